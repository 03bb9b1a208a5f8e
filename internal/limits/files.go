package limits

import (
	"fmt"

	"github.com/rs/zerolog"
)

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

// reservedFiles is how many descriptors the server keeps for itself beyond
// one per client: the standard streams, the listener, the Go runtime's
// poller, the data directory's files, a connection being handed over. Redis
// keeps the same 32 (CONFIG_MIN_RESERVED_FDS). Each event loop adds its
// epoll and eventfd descriptors.
const reservedFiles = 32

// FitMaxClients fits maxClients to the process's open-file limit, as
// Redis's adjustOpenFilesLimit does, for a server with ioLoops event loops:
// if the soft limit is too low for that many clients and the reserve, it
// raises it, to what is needed or else as far as the hard limit; if that
// is still too low, it returns the clients the limit allows, with a
// warning, and fails if it allows none. Where the limit cannot be read
// (not Linux or macOS) it returns maxClients.
func FitMaxClients(maxClients, ioLoops int, log zerolog.Logger) (int, error) {
	lim, err := OpenFiles()
	if err != nil {
		log.Warn().Err(err).Int("max_clients", maxClients).Msg("cannot read the open-file limit (ulimit -n); max clients left as given")
		return maxClients, nil
	}
	if lim == nil {
		return maxClients, nil
	}
	reserve := uint64(reservedFiles + 2*ioLoops)
	need := uint64(maxClients) + reserve
	now, setErr := RaiseFileLimit(*lim, need, SetOpenFiles)
	if now >= need {
		if now > lim.Cur {
			log.Info().Uint64("open_files_limit", now).Uint64("was", lim.Cur).Msg("raised the open-file limit for max clients")
		}
		return maxClients, nil
	}
	if now <= reserve {
		return 0, fmt.Errorf("server: the open-file limit (ulimit -n) of %d leaves no descriptor for a client: the server keeps %d for itself; raise it to at least %d for --max-clients %d",
			now, reserve, need, maxClients)
	}
	clients := int(now - reserve)
	ev := log.Warn()
	if setErr != nil {
		ev = ev.AnErr("raise_error", setErr)
	}
	ev.Int("max_clients", clients).
		Int("max_clients_requested", maxClients).
		Uint64("open_files_limit", now).
		Uint64("open_files_needed", need).
		Msg("max clients lowered to fit the open-file limit (ulimit -n)")
	return clients, nil
}
