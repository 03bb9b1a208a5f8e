//go:build linux

package server

import (
	"bytes"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// dialSmallRcvbuf dials with a tiny receive buffer, so the server's replies
// back up in its own buffer (c.pending) quickly.
func (ts *testServer) dialSmallRcvbuf(t *testing.T) *net.TCPConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	nc, err := d.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc.(*net.TCPConn)
}

// onLoop runs fn on each of the server's event loops in turn and waits for
// it: a connection may live on any of them.
func (ts *testServer) onLoop(t *testing.T, fn func(l *ioLoop)) {
	t.Helper()
	ts.mu.Lock()
	loops := ts.loops
	ts.mu.Unlock()
	if len(loops) == 0 {
		t.Skip("event-loop transport only")
	}
	for _, l := range loops {
		done := make(chan struct{})
		if !l.post(func() { fn(l); close(done) }) {
			t.Fatal("loop gone")
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("loop did not run the task")
		}
	}
}

// A client whose replies wait in c.pending half-closes its side. Were the
// loop to watch EPOLLRDHUP then, that level-triggered event, which handle
// has no use for while replies are pending, would make epoll_wait return at
// once forever: a core spinning until the client reads. So while replies
// are pending the loop must watch EPOLLOUT alone.
func TestHalfClosedClientWithPendingRepliesIsNotWatchedForRDHUP(t *testing.T) {
	ts := startServer(t)
	nc := ts.dialSmallRcvbuf(t)
	// Small requests, large replies: nothing blocks on the client side.
	if _, err := nc.Write([]byte(strings.Repeat("COMMAND DOCS\r\n", 2000))); err != nil {
		t.Fatal(err)
	}
	nc.CloseWrite() // FIN: EPOLLRDHUP would be reported from now on
	deadline := time.Now().Add(5 * time.Second)
	for {
		pending, rdhup := 0, false
		ts.onLoop(t, func(l *ioLoop) {
			for _, c := range l.conns {
				if c.pending.Len() > 0 {
					pending += c.pending.Len()
					rdhup = rdhup || c.watching&unix.EPOLLRDHUP != 0
				}
			}
		})
		if rdhup {
			t.Fatal("a connection with pending replies is watched for EPOLLRDHUP: the loop would spin")
		}
		if pending > 0 {
			break // the replies backed up, and the watch is right
		}
		if time.Now().After(deadline) {
			t.Fatal("replies never backed up")
		}
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, nc)
}

// Regression: QUIT at the end of a pipeline whose replies the socket could
// not take at once made the event loop close with replies still pending, so
// their tail and QUIT's +OK never arrived. As in Redis (and --io-loops 0),
// the replies must go out before the close.
func TestQuitSendsPendingRepliesFirst(t *testing.T) {
	ts := startServer(t)
	nc := ts.dialSmallRcvbuf(t)
	const n = 2000
	if _, err := nc.Write([]byte(strings.Repeat("COMMAND DOCS\r\n", n) + "QUIT\r\n")); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	all, err := io.ReadAll(nc)
	if err != nil && !isReset(err) {
		t.Fatalf("read: %v", err)
	}
	if !bytes.HasSuffix(all, []byte("+OK\r\n")) {
		t.Errorf("got %d bytes of replies, not ending in QUIT's +OK: the pending replies were dropped on close", len(all))
	}
}

func isReset(err error) bool { return strings.Contains(err.Error(), "reset") }
