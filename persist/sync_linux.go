package persist

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncData makes f's data durable with fdatasync, as Redis does for its
// AOF: the file's size is written with it (the log only grows), its times
// are not.
func syncData(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
