//go:build linux

package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Event loop: a parked connection is exempt from the idle sweep, but its
// lastRead is not refreshed when the wait ends. The next sweep (within
// idle/4) closes it right after it was handed the lease, before the client
// could send anything, and closeConn releases its EPHEMERAL lease.
func TestIdleClockRestartsAfterWait(t *testing.T) {
	ts := startServer(t, withIdleTimeout(400*time.Millisecond))
	held, ok, err := ts.Table().Acquire([]byte("k"), 30*time.Second, nil)
	if err != nil || !ok {
		t.Fatal(err)
	}
	waiter := ts.dial()
	waiter.send("ACQUIRE k 30000 WAIT 10000 EPHEMERAL\r\n")
	waitForWaiters(t, ts, "k", 1)
	time.Sleep(time.Second) // parked longer than the idle timeout: fine, it is blocked

	ts.Table().Release([]byte("k"), held)
	tok := token(t, waiter)
	time.Sleep(200 * time.Millisecond) // well under the 400ms idle timeout since the reply
	if !ts.Table().Verify([]byte("k"), uint64(tok)) {
		t.Errorf("EPHEMERAL lease %d granted from the queue was released 200ms after the grant: the idle sweep closed the connection", tok)
	}
	waiter.send("PING\r\n")
	if l, err := waiter.r.ReadString('\n'); err != nil {
		t.Errorf("connection closed right after its wait was granted: %v (%q)", err, l)
	}
}

// Goroutine transport: watchHangup's raw.Read obeys the read deadline that
// flushBeforeRead armed for the idle timeout before the ACQUIRE was read.
// When it passes, the watcher returns silently (hup is never closed), so a
// hang-up after that point goes unnoticed for the rest of the wait, and a
// lease handed over meanwhile goes to the dead connection.
func TestHangupNoticedPastIdleDeadline(t *testing.T) {
	ts := startServer(t, withIdleTimeout(300*time.Millisecond))
	holder := ts.dial()
	holder.send("ACQUIRE k 30000\r\n")
	held := token(t, holder)
	waiter := ts.dial()
	waiter.send("ACQUIRE k 30000 WAIT 20000\r\n")
	waitForWaiters(t, ts, "k", 1)
	time.Sleep(600 * time.Millisecond) // past the idle deadline armed before the ACQUIRE was read
	waiter.Close()

	deadline := time.Now().Add(2 * time.Second)
	for {
		st, _ := ts.Table().Status([]byte("k"))
		if st.Waiters == 0 {
			break
		}
		if time.Now().After(deadline) {
			// Show the consequence: the lease goes to the dead connection.
			ts.Table().Release([]byte("k"), uint64(held))
			time.Sleep(100 * time.Millisecond)
			st, _ := ts.Table().Status([]byte("k"))
			t.Fatalf("hang-up of a waiter not noticed 2s later (waiters=%d); after RELEASE the lock is held=%v with token %d, by a closed connection", 1, st.Held, st.Token)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Goroutine transport, pipelined command behind the waiting ACQUIRE: the
// docs promise "a lease granted meanwhile is released when its reply cannot
// be written". But the first write to a socket whose peer has closed
// succeeds (the peer answers it with RST), so Flush returns nil and the
// lease stays held by the dead connection until its ttl.
func TestPipelinedWaiterHangupGetsNoLease(t *testing.T) {
	ts := startServer(t)
	holder := ts.dial()
	holder.send("ACQUIRE k 30000\r\n")
	held := token(t, holder)

	waiter := ts.dial()
	waiter.send("ACQUIRE k 30000 WAIT 20000\r\n")
	waitForWaiters(t, ts, "k", 1)
	waiter.send("PING\r\n") // pipelined behind the waiting ACQUIRE: stops the hang-up watch
	time.Sleep(100 * time.Millisecond)
	waiter.Close()
	time.Sleep(100 * time.Millisecond)

	holder.send(fmt.Sprintf("RELEASE k %d\r\n", held))
	if got := holder.reply(); got != int64(1) {
		t.Fatalf("release: %#v", got)
	}
	time.Sleep(300 * time.Millisecond)
	st, _ := ts.Table().Status([]byte("k"))
	if st.Held {
		t.Errorf("lease %d was handed to a connection closed before the grant, and kept (ttl %v)", st.Token, st.TTL)
	}
}

// Event loop: a wait that ends early leaves its entry in the loop's timer
// heap until its original deadline (up to max-ttl, 24h by default), holding
// the *conn (reader and writer buffers) and the blockState alive.
func TestFinishedWaitsLeaveTimerHeap(t *testing.T) {
	ts := startServer(t)
	holder := ts.dial()
	waiter := ts.dial()
	const n = 300
	for i := 0; i < n; i++ {
		holder.send("ACQUIRE k 30000\r\n")
		held := token(t, holder)
		waiter.send("ACQUIRE k 30000 WAIT 86400000\r\n")
		waitForWaiters(t, ts, "k", 1)
		holder.send(fmt.Sprintf("RELEASE k %d\r\n", held))
		holder.reply()
		got := token(t, waiter)
		waiter.send(fmt.Sprintf("RELEASE k %d\r\n", got))
		waiter.reply()
	}
	var timers int
	ts.onLoop(t, func(l *ioLoop) { timers = len(l.waitTimers) })
	if timers > 10 {
		t.Errorf("%d finished waits still sit in the timer heap (each pins its conn until its 24h deadline)", timers)
	}
}

// Goroutine transport: the idle timeout is only a read deadline. A client
// that pipelines requests with large replies and then neither reads nor
// sends leaves the connection's goroutine blocked in Flush (no write
// deadline) for ever, holding its buffers and a max-clients slot, although
// it has sent nothing for far longer than --idle-timeout. The event loop's
// sweep does close it.
func TestIdleTimeoutClosesClientThatDoesNotRead(t *testing.T) {
	ts := startServer(t, withIdleTimeout(300*time.Millisecond))
	nc := ts.dialSmallRcvbuf(t)
	if _, err := nc.Write([]byte(strings.Repeat("COMMAND DOCS\r\n", 2000))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if n := ts.clientCount(); n != 0 {
		t.Errorf("%d connection(s) still open 1.5s after sending anything, with a 300ms idle timeout", n)
	}
}
