package locker

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// heldAtFirstEvent records, when the first event is published, how many
// leases the table still holds.
type heldAtFirstEvent struct {
	tb     *Table
	events int
	held   int
}

func (h *heldAtFirstEvent) Active() bool { return true }

func (h *heldAtFirstEvent) Publish(Event) {
	if h.events == 0 {
		h.held = h.tb.Stats().Held
	}
	h.events++
}

// TestExpireDueWorksInBatches checks that the reaper reclaims a mass expiry
// in batches of at most expireBatch leases, dropping the shard's lock (and
// publishing that batch's events) between them, rather than in one hold.
func TestExpireDueWorksInBatches(t *testing.T) {
	sink := &heldAtFirstEvent{}
	tb, clock := newTestTable(t, func(c *Config) { c.Shards = 1; c.Events = sink })
	sink.tb = tb
	const n = 5 * expireBatch
	for i := range n {
		mustAcquire(t, tb, "mass:"+strconv.Itoa(i), time.Second, "")
	}
	sink.events = 0 // the grants' events
	clock.Advance(2 * time.Second)
	if got := tb.ExpireDue(); got != n {
		t.Fatalf("ExpireDue expired %d, want %d", got, n)
	}
	if sink.events != n {
		t.Fatalf("%d events published, want %d", sink.events, n)
	}
	if sink.held < n-expireBatch {
		t.Fatalf("when the first expiry event was published only %d of %d leases were still held: the reaper did more than a batch (%d) in one lock hold", sink.held, n, expireBatch)
	}
	if st := tb.Stats(); st.Held != 0 || st.Locks != 0 {
		t.Fatalf("after expiry: %d held, %d locks; want none", st.Held, st.Locks)
	}
}

// stallClock is a ManualClock that runs a hook, once, inside a reading.
type stallClock struct {
	ManualClock
	stall atomic.Pointer[func()]
}

func (c *stallClock) Now() time.Duration {
	v := c.ManualClock.Now()
	if f := c.stall.Swap(nil); f != nil {
		(*f)()
	}
	return v
}

// onFirstExpiry runs a hook when the first expiry event is published: between
// the reaper's first and second batch.
type onFirstExpiry struct {
	fired atomic.Bool
	hook  func()
}

func (s *onFirstExpiry) Active() bool { return true }

func (s *onFirstExpiry) Publish(ev Event) {
	if ev.Kind == EventExpired && !s.fired.Swap(true) {
		s.hook()
	}
}

// TestConcurrentExpireDueReclaimsAllDue runs a second ExpireDue, whose clock
// reading is a tick before the leases' deadline, between the batches of one
// whose reading is past it. The second finishes the tick the first left
// unfinished; the first must still return with every lease reclaimed.
// (Found by review: a batch judged deadlines by its pass's first reading, so
// the earlier reader rescheduled the leases past the first's pass.)
func TestConcurrentExpireDueReclaimsAllDue(t *testing.T) {
	clock := &stallClock{}
	clock.Advance(time.Hour)
	sink := &onFirstExpiry{}
	tb, _ := newTestTable(t, func(c *Config) { c.Shards = 1; c.Clock = clock; c.Events = sink })
	const n = 3 * expireBatch
	for i := range n {
		mustAcquire(t, tb, "k"+strconv.Itoa(i), time.Second, "") // all due at one tick
	}
	clock.Advance(time.Second - time.Millisecond) // B's reading: a tick before the deadline
	bRead, bGo, bDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	stall := func() { close(bRead); <-bGo }
	clock.stall.Store(&stall)
	go func() { defer close(bDone); tb.ExpireDue() }() // B
	<-bRead
	sink.hook = func() { close(bGo); <-bDone } // B takes the lock between A's batches
	clock.Advance(time.Millisecond)            // A's reading: every lease is due
	tb.ExpireDue()                             // A
	if st := tb.Stats(); st.Held != 0 {
		t.Fatalf("after ExpireDue at the deadline of all %d leases, %d are still held", n, st.Held)
	}
}

// TestReaperHandOffBetweenBatchesUsesItsOwnNow checks that a lease the
// reaper hands to a waiter in a later batch runs its full ttl from when it
// is granted, not from when the reaper's pass began.
func TestReaperHandOffBetweenBatchesUsesItsOwnNow(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.Shards = 1 })
	s := tb.shards[0]
	for i := range 4 * expireBatch {
		mustAcquire(t, tb, "mass:"+strconv.Itoa(i), time.Second, "")
	}
	mustAcquire(t, tb, "w", time.Second+10*time.Millisecond, "") // a tick after the mass
	_, ch := mustQueue(t, tb, &Request{Key: []byte("w"), TTL: 50 * time.Millisecond})
	clock.Advance(time.Second + 10*time.Millisecond)
	upTo := int64(clock.Now()) // the pass's first reading
	for {
		s.mu.Lock()
		_, done := s.expireDue(upTo, max(upTo, int64(clock.Now())))
		tb.unlock(s)
		if done {
			break
		}
		clock.Advance(10 * time.Millisecond) // commands run between batches
	}
	if tok := granted(t, ch); !tb.Verify([]byte("w"), tok) {
		t.Fatalf("the waiter's lease (ttl 50ms) was dead when it was granted")
	}
}
