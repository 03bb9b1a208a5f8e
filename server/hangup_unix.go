//go:build unix

package server

import (
	"errors"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchHangup reports, by closing the returned channel, when the peer of nc
// closes the connection, without consuming any byte it sent: the goroutine
// transport uses it while a connection waits in ACQUIRE ... WAIT and is not
// reading. It stops watching at the first byte of data (a pipelined command
// stays for the reader) or when stop is called; stop waits for the watcher's
// goroutine, which it owns, and clears the read deadline it used.
func watchHangup(nc net.Conn) (hangup <-chan struct{}, stop func()) {
	hup := make(chan struct{})
	nc = socketOf(nc)
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return hup, func() {}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return hup, func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b [1]byte
		hungUp := false
		err := raw.Read(func(fd uintptr) bool {
			n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch {
			case errors.Is(err, unix.EAGAIN):
				return false // nothing yet: wait for readiness
			case err == nil && n == 0:
				close(hup) // orderly shutdown by the peer
				hungUp = true
			case err != nil:
				close(hup) // reset
				hungUp = true
			}
			return true
		})
		if !hungUp && errors.Is(err, net.ErrClosed) {
			close(hup) // the server closed the socket (an ACL reload revoked its user)
		}
	}()
	return hup, func() {
		nc.SetReadDeadline(time.Unix(1, 0)) // wake raw.Read
		<-done
		nc.SetReadDeadline(time.Time{})
	}
}
