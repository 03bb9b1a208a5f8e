//go:build linux || darwin

package limits

import "syscall"

// OpenFiles reads the process's open-file limit.
func OpenFiles() (*FileLimit, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return nil, err
	}
	return &FileLimit{Cur: r.Cur, Max: r.Max}, nil
}

// SetOpenFiles sets it. syscall's Setrlimit, unlike a raw system call,
// tells the runtime, so that commands the process starts are not given the
// limit it had before.
func SetOpenFiles(l FileLimit) error {
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: l.Cur, Max: l.Max})
}
