package server

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// TestLockDelayOverTheWire: after an expiry (not a release) the lock answers
// nil to ACQUIRE for its lock-delay, shows it in STATUS, refuses DELETE, and
// grants again, with a larger token, once the delay is over.
func TestLockDelayOverTheWire(t *testing.T) {
	clock := &locker.ManualClock{}
	ts := startServer(t, withManualClock(clock), func(c *Config) { c.Locker.LockDelay = 2 * time.Second })
	rdb := ts.client()

	do(t, rdb, "CREATE", "job", "LOCKDELAY", 500).Is(1)
	tok := do(t, rdb, "ACQUIRE", "job", 100).Token()
	do(t, rdb, "RELEASE", "job", tok).Is(1)
	tok = do(t, rdb, "ACQUIRE", "job", 100).Token() // a release started no delay

	clock.Advance(150 * time.Millisecond)
	do(t, rdb, "ACQUIRE", "job", 1000).Nil()
	wantStatus(t, status(t, rdb, "job"), map[string]string{
		"state": "delayed", "token": "0", "ttl": "0", "lock-delay": "500", "delay-left": "450",
	})
	do(t, rdb, "DELETE", "job").Err("INUSE")
	do(t, rdb, "VERIFY", "job", tok).Is(0)

	clock.Advance(450 * time.Millisecond)
	if next := do(t, rdb, "ACQUIRE", "job", 1000).Token(); next <= tok {
		t.Fatalf("token after the delay %d <= %d", next, tok)
	}

	// A lock made on the fly takes the server's --lock-delay.
	fly := do(t, rdb, "ACQUIRE", "fly", 100).Token()
	clock.Advance(100 * time.Millisecond)
	do(t, rdb, "ACQUIRE", "fly", 100).Nil()
	wantStatus(t, status(t, rdb, "fly"), map[string]string{"state": "delayed", "lock-delay": "2000", "created": "0"})
	clock.Advance(2 * time.Second)
	if next := do(t, rdb, "ACQUIRE", "fly", 100).Token(); next <= fly {
		t.Fatalf("token after the delay %d <= %d", next, fly)
	}
	if got := infoField(t, rdb, "locks", "lock_delays"); got != "2" {
		t.Fatalf("INFO lock_delays = %s, want 2", got)
	}
	do(t, rdb, "CREATE", "bad", "LOCKDELAY", -1).Err("ERR LOCKDELAY must be a non-negative number of milliseconds")
}
