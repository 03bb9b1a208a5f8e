package limits

// FileLimit is an open-file limit (RLIMIT_NOFILE): soft, then hard.
type FileLimit struct{ Cur, Max uint64 }

// RaiseFileLimit raises the soft limit lim.Cur to need if it is lower,
// through set: to need (raising the hard limit too, which only a privileged
// process may), or else to the hard limit. It returns the soft limit now in
// force and the error of the attempt to reach need.
func RaiseFileLimit(lim FileLimit, need uint64, set func(FileLimit) error) (uint64, error) {
	if lim.Cur >= need {
		return lim.Cur, nil
	}
	err := set(FileLimit{Cur: need, Max: max(lim.Max, need)})
	if err == nil {
		return need, nil
	}
	if lim.Cur < lim.Max && set(FileLimit{Cur: lim.Max, Max: lim.Max}) == nil {
		return lim.Max, err
	}
	return lim.Cur, err
}
