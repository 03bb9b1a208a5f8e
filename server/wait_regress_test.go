//go:build linux

package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// Regression (event loop): a parked connection is spared by the idle sweep,
// but its idle clock did not restart when the wait ended, so the next sweep
// closed it right after it was handed the lease (releasing an EPHEMERAL
// one) before the client could send anything.
func TestIdleClockRestartsAfterWait(t *testing.T) {
	ts := startServer(t, withIdleTimeout(400*time.Millisecond))
	held, ok, err := ts.Table().Acquire(&locker.Request{Key: []byte("k"), TTL: 30 * time.Second})
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

// Regression (goroutine transport): the hang-up watch obeyed the idle read
// deadline armed before the ACQUIRE was read; once it passed, a hang-up went
// unnoticed for the rest of the wait and a lease handed over meanwhile went
// to the dead connection.
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

// Regression (goroutine transport): with a command pipelined behind the
// waiting ACQUIRE, a lease granted after the client hung up was kept, since
// the first write to a closed peer succeeds. It must be released at once.
func TestPipelinedWaiterHangupGetsNoLease(t *testing.T) {
	ts := startServer(t)
	holder := ts.dial()
	holder.send("ACQUIRE k 30000\r\n")
	held := token(t, holder)

	waiter := ts.dial()
	waiter.send("ACQUIRE k 30000 WAIT 20000\r\n")
	waitForWaiters(t, ts, "k", 1)
	waiter.send("PING\r\n") // pipelined behind the waiting ACQUIRE: stops the hang-up watch
	// Scenario, not synchronisation: let the PING arrive before the FIN, and
	// the FIN before the grant.
	time.Sleep(100 * time.Millisecond)
	waiter.Close()
	time.Sleep(100 * time.Millisecond)

	holder.send(fmt.Sprintf("RELEASE k %d\r\n", held))
	if got := holder.reply(); got != int64(1) {
		t.Fatalf("release: %#v", got)
	}
	// The grant goes to the waiter, which must hand it straight back.
	for deadline := time.Now().Add(5 * time.Second); ; {
		st, _ := ts.Table().Status([]byte("k"))
		if !st.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %d was handed to a connection closed before the grant, and kept (ttl %v)", st.Token, st.TTL)
		}
		ts.Table().ExpireDue()
	}
}

// Regression (event loop): a wait that ended early stayed in the loop's
// timer heap until its original deadline (up to max-ttl), pinning its
// connection and wait state.
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

// Regression (goroutine transport): the idle timeout was only a read
// deadline, so a client that pipelined requests with large replies and then
// neither read nor sent held its goroutine in Flush for ever. Like the event
// loop's sweep, the transport must close it.
func TestIdleTimeoutClosesClientThatDoesNotRead(t *testing.T) {
	ts := startServer(t, withIdleTimeout(300*time.Millisecond))
	nc := ts.dialSmallRcvbuf(t)
	if _, err := nc.Write([]byte(strings.Repeat("COMMAND DOCS\r\n", 2000))); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ts.clientCount() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connection(s) still open 5s after the client last sent, with a 300ms idle timeout", ts.clientCount())
		}
		// Poll, not spin: on two cores a spinning test takes the CPU the
		// server needs to build and write its replies (this test failed
		// under load for that).
		time.Sleep(10 * time.Millisecond)
	}
}
