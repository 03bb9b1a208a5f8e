package locker

import (
	"strconv"
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
