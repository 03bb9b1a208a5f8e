package server

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// waitForWaiters polls STATUS until key has n waiters, bounded in time: a
// queued ACQUIRE has no reply to wait on.
func waitForWaiters(t *testing.T, ts *testServer, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, ok := ts.Table().Status([]byte(key))
		if ok && st.Waiters == n || !ok && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d waiters, want %d", key, st.Waiters, n)
		}
		ts.Table().ExpireDue() // a harmless call that yields to the server
	}
}

// waitBlocked waits until INFO's blocked_clients is n on the server rdb
// talks to.
func waitBlocked(t *testing.T, rdb doer, n int) {
	t.Helper()
	want := strconv.Itoa(n)
	waitFor(t, "blocked_clients "+want, func() bool { return infoField(t, rdb, "clients", "blocked_clients") == want })
}

func token(t *testing.T, rc *rawConn) int64 {
	t.Helper()
	v, ok := rc.reply().(int64)
	if !ok || v <= 0 {
		t.Fatalf("want a token, got %#v", v)
	}
	return v
}

// TestWaitersServedInOrder parks waiters with and without PRIORITY behind a
// holder, and checks that each release hands the lock to the next in line.
func TestWaitersServedInOrder(t *testing.T) {
	ts := startServer(t)
	holder := ts.dial()
	holder.send("ACQUIRE q 30000\r\n")
	last := token(t, holder)

	names := []string{"a", "b", "urgent", "c"}
	prio := map[string]int{"urgent": 7}
	conns := map[string]*rawConn{}
	for n, name := range names {
		rc := ts.dial()
		rc.send(fmt.Sprintf("ACQUIRE q 30000 WAIT 20000 PRIORITY %d\r\nPING\r\n", prio[name]))
		conns[name] = rc
		waitForWaiters(t, ts, "q", n+1)
	}
	rdb := ts.client()
	wantStatus(t, status(t, rdb, "q"), map[string]string{"state": "held", "waiters": "4"})
	if got := infoField(t, rdb, "clients", "blocked_clients"); got != "4" {
		t.Fatalf("blocked_clients = %s, want 4", got)
	}

	cur := holder
	for _, name := range []string{"urgent", "a", "b", "c"} {
		cur.send(fmt.Sprintf("RELEASE q %d\r\n", last))
		if got := cur.reply(); got != int64(1) {
			t.Fatalf("release by the holder before %s: %#v", name, got)
		}
		next := token(t, conns[name])
		if next <= last {
			t.Fatalf("%s got token %d after %d", name, next, last)
		}
		// The PING pipelined behind the waiting ACQUIRE runs after it.
		if got := conns[name].reply(); got != "PONG" {
			t.Fatalf("%s: reply after the token %#v", name, got)
		}
		cur, last = conns[name], next
	}
	if got := infoField(t, rdb, "locks", "wait_grants"); got != "4" {
		t.Fatalf("wait_grants = %s, want 4", got)
	}
}

func TestWaitTimesOut(t *testing.T) {
	ts := startServer(t)
	holder := ts.dial()
	holder.send("ACQUIRE t 30000\r\n")
	token(t, holder)
	w := ts.dial()
	start := time.Now()
	w.send("ACQUIRE t 1000 WAIT 150\r\n")
	if got := w.reply(); got != nil {
		t.Fatalf("timed-out wait got %#v, want nil", got)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("answered after %v, before the 150ms wait ended", waited)
	}
	rdb := ts.client()
	if got := infoField(t, rdb, "locks", "wait_timeouts"); got != "1" {
		t.Fatalf("wait_timeouts = %s, want 1", got)
	}
	wantStatus(t, status(t, rdb, "t"), map[string]string{"waiters": "0"})
	// The connection is usable after its wait.
	w.send("PING\r\n")
	if got := w.reply(); got != "PONG" {
		t.Fatalf("after the wait: %#v", got)
	}
}

// TestWaiterThatHangsUpLeavesTheQueue: the disconnected waiter must not be
// granted anything; the next waiter gets the lock.
func TestWaiterThatHangsUpLeavesTheQueue(t *testing.T) {
	ts := startServer(t)
	holder := ts.dial()
	holder.send("ACQUIRE h 30000\r\n")
	tok := token(t, holder)
	gone := ts.dial()
	gone.send("ACQUIRE h 30000 WAIT 20000\r\n")
	waitForWaiters(t, ts, "h", 1)
	next := ts.dial()
	next.send("ACQUIRE h 30000 WAIT 20000\r\n")
	waitForWaiters(t, ts, "h", 2)
	gone.Close()
	waitForWaiters(t, ts, "h", 1)
	holder.send(fmt.Sprintf("RELEASE h %d\r\n", tok))
	holder.reply()
	if got := token(t, next); got <= tok {
		t.Fatalf("next waiter got %d after %d", got, tok)
	}
	if st := ts.Table().Stats(); st.Held != 1 {
		t.Fatalf("%d leases held; only the live waiter should hold one", st.Held)
	}
}

// TestWaiterGetsExpiredLease: expiry, found by the reaper, hands the lock on.
func TestWaiterGetsExpiredLease(t *testing.T) {
	clock := &locker.ManualClock{}
	ts := startServer(t, withManualClock(clock))
	rdb := ts.client()
	tok := do(t, rdb, "ACQUIRE", "x", 100).Token()
	w := ts.dial()
	w.send("ACQUIRE x 1000 WAIT 60000\r\n")
	waitForWaiters(t, ts, "x", 1)
	clock.Advance(100 * time.Millisecond) // the reaper's next tick expires it
	if got := token(t, w); got <= int64(tok) {
		t.Fatalf("waiter got %d after %d", got, tok)
	}
}

func TestWaitErrors(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Locker.MaxTTL = time.Minute })
	rdb := ts.client()
	do(t, rdb, "ACQUIRE", "k", 1000, "WAIT", -1).Err("ERR WAIT must be a non-negative number of milliseconds")
	do(t, rdb, "ACQUIRE", "k", 1000, "WAIT", 120000).Err("ERR WAIT must be at most max-ttl (1m0s)")
	do(t, rdb, "ACQUIRE", "k", 1000, "PRIORITY", 1<<40).Err("ERR PRIORITY must be a 32-bit integer")
	do(t, rdb, "ACQUIRE", "k", 1000, "WAIT", 10, "WAIT", 10).Err("ERR syntax error")
	// WAIT on a free lock grants at once, WAIT 0 is a plain try.
	tok := do(t, rdb, "ACQUIRE", "k", 1000, "WAIT", 5000).Token()
	do(t, rdb, "ACQUIRE", "k", 1000, "WAIT", 0).Nil()
	do(t, rdb, "RELEASE", "k", tok).Is(1)
}

// TestOwnerRetryOnANewConnection: a client whose connection broke while it
// waited retries with the same OWNER on a new one; it takes the old place,
// and the old connection's wait ends with nil.
func TestOwnerRetryOnANewConnection(t *testing.T) {
	ts := startServer(t)
	holder := ts.dial()
	holder.send("ACQUIRE r 30000\r\n")
	tok := token(t, holder)
	old := ts.dial()
	old.send("ACQUIRE r 30000 OWNER job-9 WAIT 20000\r\n")
	waitForWaiters(t, ts, "r", 1)
	retry := ts.dial()
	retry.send("ACQUIRE r 30000 OWNER job-9 WAIT 20000\r\n")
	if got := old.reply(); got != nil {
		t.Fatalf("superseded wait got %#v, want nil", got)
	}
	waitForWaiters(t, ts, "r", 1)
	holder.send(fmt.Sprintf("RELEASE r %d\r\n", tok))
	holder.reply()
	got := token(t, retry)
	// Retried again once granted, it gets the same token back.
	again := ts.dial()
	again.send("ACQUIRE r 30000 OWNER job-9 WAIT 20000\r\n")
	if same := token(t, again); same != got {
		t.Fatalf("retry after the grant got %d, want %d", same, got)
	}
}
