package locker

import (
	"fmt"
	"testing"
	"time"
)

// TestWheelGrowsDuringFire: timerWheel.advance keeps a pointer into
// w.levels[0] (head) across fire(). A fire that hands the lock to a waiter
// with a long ttl schedules a timer on a level the wheel has not made yet;
// place() appends to w.levels, which moves the array, and head then reads a
// stale slot: the next timer of the same tick is unlinked twice (slot 0 - 1
// indexes counts out of range: the reaper panics and takes the process down).
func TestWheelGrowsDuringFire(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.Shards = 1; c.Tick = time.Millisecond })
	mustAcquire(t, tb, "b", 5*time.Millisecond, "")              // same tick as a
	mustAcquire(t, tb, "a", 5*time.Millisecond, "")              // head of the slot: fired first
	mustQueue(t, tb, &Request{Key: []byte("a"), TTL: time.Hour}) // an hour needs wheel level 3
	clock.Advance(5 * time.Millisecond)
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("ExpireDue panicked: %v", r)
			}
		}()
		tb.ExpireDue()
		return nil
	}()
	if err != nil {
		t.Fatal(err)
	}
	if st := tb.Stats(); st.Expired != 2 || st.Held != 1 || st.Locks != 1 {
		t.Fatalf("after the expiry: %+v", st)
	}
}
