package locker

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// observingSink is a recordingSink that is also an Observer: it records
// what Observe is told, and checks that the shard is locked meanwhile.
type observingSink struct {
	recordingSink
	tb       *Table
	observed []Event
	unlocked []string // keys observed while their shard was not locked
}

func (o *observingSink) Observe(kind EventKind, key string, token uint64, held time.Duration) bool {
	if o.tb != nil {
		if _, s := o.tb.locate([]byte(key)); s.mu.TryLock() {
			s.mu.Unlock()
			o.unlocked = append(o.unlocked, key)
		}
	}
	o.observed = append(o.observed, Event{Kind: kind, Key: strings.Clone(key), Token: token, Held: held})
	return !strings.HasPrefix(key, "unfollowed")
}

// TestObserver: a sink that is an Observer is told of every event, with its
// key, token and hold time, synchronously under the shard's lock, whether
// or not Active asks for events to be built; and the same events, built,
// reach Publish while it does.
func TestObserver(t *testing.T) {
	sink := &observingSink{}
	tb, clock := newTestTable(t, func(c *Config) { c.Events = sink })
	sink.tb = tb
	k := []byte("o")
	t1 := mustAcquire(t, tb, "o", time.Second, "alice")
	clock.Advance(10 * time.Millisecond)
	tb.Release(k, t1)
	t2 := mustAcquire(t, tb, "o", time.Second, "bob")
	sink.active.Store(true)
	clock.Advance(2 * time.Second)
	tb.ExpireDue()
	r1, _, err := tb.Acquire(&Request{Key: []byte("r"), TTL: time.Second, Mode: Shared})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Millisecond)
	tb.Release([]byte("r"), r1)
	// Grants the observer does not follow: their ends are published, not
	// observed.
	u1 := mustAcquire(t, tb, "unfollowed", time.Second, "")
	tb.Release([]byte("unfollowed"), u1)
	u2, _, err := tb.Acquire(&Request{Key: []byte("unfollowed-r"), TTL: time.Second, Mode: Shared})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	tb.ExpireDue()

	want := []Event{
		{Kind: EventAcquired, Key: "o", Token: t1},
		{Kind: EventReleased, Key: "o", Token: t1, Held: 10 * time.Millisecond},
		{Kind: EventAcquired, Key: "o", Token: t2},
		{Kind: EventExpired, Key: "o", Token: t2, Held: time.Second},
		{Kind: EventAcquired, Key: "r", Token: r1},
		{Kind: EventReleased, Key: "r", Token: r1, Held: time.Millisecond},
		{Kind: EventAcquired, Key: "unfollowed", Token: u1},
		{Kind: EventAcquired, Key: "unfollowed-r", Token: u2},
	}
	if !slices.Equal(sink.observed, want) {
		t.Fatalf("observed\n got %+v\nwant %+v", sink.observed, want)
	}
	if len(sink.unlocked) > 0 {
		t.Fatalf("observed with the shard unlocked: %q", sink.unlocked)
	}
	published := sink.take()
	for i := range published {
		published[i].Owner = "" // Observe is not told the owner
	}
	wantPublished := append(slices.Clone(want[3:7]),
		Event{Kind: EventReleased, Key: "unfollowed", Token: u1},
		want[7],
		Event{Kind: EventExpired, Key: "unfollowed-r", Token: u2, Held: time.Second})
	if !slices.Equal(published, wantPublished) {
		t.Fatalf("published while active\n got %+v\nwant %+v", published, wantPublished)
	}
}
