//go:build linux || darwin

package server

import "syscall"

// openFilesLimit reads the process's open-file limit.
func openFilesLimit() (*fileLimit, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return nil, err
	}
	return &fileLimit{cur: r.Cur, max: r.Max}, nil
}

// setOpenFilesLimit sets it. syscall's Setrlimit, unlike a raw system call,
// tells the runtime, so that commands the process starts are not given the
// limit it had before.
func setOpenFilesLimit(l fileLimit) error {
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: l.cur, Max: l.max})
}
