//go:build unix

package server

import (
	"errors"
	"syscall"
)

// writeNow makes one non-blocking write of p to the socket behind raw and
// returns how much it took: 0, without an error, when its buffer is full.
// The function given to raw.Write reports true whatever happened, so the
// runtime never parks the goroutine to wait for room (see writeSocket).
func writeNow(raw syscall.RawConn, p []byte) (int, error) {
	var n int
	var werr error
	err := raw.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), p)
			if werr != syscall.EINTR {
				return true
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errors.Is(werr, syscall.EAGAIN):
		return 0, nil
	case werr != nil:
		return 0, werr
	}
	return n, nil
}
