package server

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// TestMaxLocksOverTheWire fills a server's table to --max-locks: a command
// that would make a new lock gets -OOM (MACQUIRE as a whole), every command
// on an existing lock works on, and INFO counts the refusals.
func TestMaxLocksOverTheWire(t *testing.T) {
	clock := &locker.ManualClock{}
	ts := startServer(t, withManualClock(clock), func(c *Config) { c.Locker.MaxLocks = 3 })
	rdb := ts.client()

	a := do(t, rdb, "ACQUIRE", "a", 1000).Token()
	do(t, rdb, "ACQUIRE", "b", 1000).Token()
	do(t, rdb, "CREATE", "c").Is(1)

	const full = "OOM lock table full (max-locks 3)"
	if msg := do(t, rdb, "ACQUIRE", "d", 1000).Err("OOM "); msg != full {
		t.Fatalf("reply %q, want %q", msg, full)
	}
	do(t, rdb, "CREATE", "d").Err(full)
	do(t, rdb, "ACQUIRE", "d", 1000, "WAIT", 100).Err(full)
	do(t, rdb, "MACQUIRE", 1000, 2, "c", "d").Err(full)
	wantStatus(t, status(t, rdb, "c"), map[string]string{"state": "free"}) // MACQUIRE took nothing

	// Existing locks at the bound.
	do(t, rdb, "ACQUIRE", "a", 1000).Nil()
	do(t, rdb, "VERIFY", "a", a).Is(1)
	do(t, rdb, "EXTEND", "a", a, 2000).Is(1)
	wantStatus(t, status(t, rdb, "a"), map[string]string{"state": "held"})
	if r := do(t, rdb, "LOCKS", 0, "COUNT", 10); r.err != nil {
		t.Fatalf("LOCKS at the bound: %s", r)
	}
	c := do(t, rdb, "ACQUIRE", "c", 1000).Token()
	do(t, rdb, "RELEASE", "c", c).Is(1)
	if got := infoField(t, rdb, "locks", "max_locks"); got != "3" {
		t.Fatalf("INFO max_locks = %s", got)
	}
	if got := infoField(t, rdb, "locks", "table_full_refusals"); got != "4" {
		t.Fatalf("INFO table_full_refusals = %s, want 4", got)
	}

	// A released lock made on the fly frees its place.
	do(t, rdb, "RELEASE", "a", a).Is(1)
	do(t, rdb, "ACQUIRE", "d", 1000).Token()
	do(t, rdb, "ACQUIRE", "e", 1000).Err(full)
	do(t, rdb, "DELETE", "c").Is(1)
	clock.Advance(1500 * time.Millisecond) // b and d expire, and go once looked at
	do(t, rdb, "VERIFY", "b", 1).Is(0)
	do(t, rdb, "VERIFY", "d", 1).Is(0)
	do(t, rdb, "MACQUIRE", 1000, 3, "e", "f", "g").tokensOf(3)
}

// TestMaxLocksRestoreOverTheBound: a data directory that holds more locks
// than a restarted server's --max-locks is restored in full, since
// restoring is not making new locks; new locks get -OOM until enough go.
func TestMaxLocksRestoreOverTheBound(t *testing.T) {
	p := startPersist(t, t.TempDir())
	for _, k := range []string{"a", "b", "c"} {
		do(t, p.rdb, "CREATE", k).Is(1)
	}
	p = p.restart(func(c *Config) { c.Locker.MaxLocks = 2 })
	for _, k := range []string{"a", "b", "c"} {
		wantStatus(t, status(t, p.rdb, k), map[string]string{"state": "free", "created": "1"})
	}
	do(t, p.rdb, "ACQUIRE", "d", 1000).Err("OOM lock table full (max-locks 2)")
	do(t, p.rdb, "ACQUIRE", "a", 1000).Token()
	do(t, p.rdb, "DELETE", "b").Is(1)
	do(t, p.rdb, "CREATE", "d").Err("OOM ")
	do(t, p.rdb, "DELETE", "c").Is(1)
	do(t, p.rdb, "CREATE", "d").Is(1)
}

// TestMaxLocksMAcquireWaitRefusedOnTheWay: a MACQUIRE ... WAIT that queued
// for a held key and then finds the table full at a new one gets -OOM, not
// a nil reply as if it had timed out, and holds nothing.
func TestMaxLocksMAcquireWaitRefusedOnTheWay(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Locker.MaxLocks = 2 })
	rdb := ts.client()
	a := do(t, rdb, "ACQUIRE", "a", 30000).Token()
	w := ts.dial()
	w.send("MACQUIRE 30000 2 z a WAIT 20000\r\nPING\r\n")
	waitForWaiters(t, ts, "a", 1)
	do(t, rdb, "ACQUIRE", "b", 30000).Token() // the table is full
	do(t, rdb, "RELEASE", "a", a).Is(1)
	w.expectErr("OOM lock table full (max-locks 2)")
	w.expect("PONG")
	do(t, rdb, "STATUS", "a").Nil()
	do(t, rdb, "STATUS", "z").Nil()
}
