package locker

import (
	"testing"
	"time"
)

// TestCancelWaitSettlesFirst: CancelWait is the one operation on a lock
// that does not settle it first. A waiter whose timeout comes after the
// holder's deadline, but before the reaper's next tick, is sent away with
// nil although the lock was free (docs: "A lease is dead from its deadline
// on"; design: "every operation first settles the entry it touches"). Any
// other call on the lock at that instant would have handed it the lease.
func TestCancelWaitSettlesFirst(t *testing.T) {
	tb, clock := newTestTable(t)
	mustAcquire(t, tb, "c", 95*time.Millisecond, "")
	w, _ := mustQueue(t, tb, &Request{Key: []byte("c"), TTL: time.Second})
	clock.Advance(100 * time.Millisecond) // the wait's timeout; the lease died 5ms ago
	if tok, ok := tb.CancelWait(w); !ok {
		st, _ := tb.Status([]byte("c"))
		t.Fatalf("CancelWait = %d, %v: the waiter timed out on a lock free for 5ms (status now %+v)", tok, ok, st)
	}
}
