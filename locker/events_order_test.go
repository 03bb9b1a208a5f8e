package locker

import (
	"slices"
	"testing"
	"time"
)

// TestEventsOrderAcrossHandOff: Table.unlock notifies the granted
// waiters before it publishes the events of the same critical section. A
// waiter that acts on its grant at once (here synchronously, as the server's
// own Notify does with Release when the loop is closing; on the goroutine
// transport, the connection's goroutine replying and the client releasing)
// gets its "released" published before the "acquired" of its own lease, and
// before the "released" of the previous holder. A subscriber that tracks who
// holds the lock ends up believing the last lease is still held.
func TestEventsOrderAcrossHandOff(t *testing.T) {
	sink := &recordingSink{}
	sink.active.Store(true)
	tb, _ := newTestTable(t, func(c *Config) { c.Events = sink })
	k := []byte("e")
	t1 := mustAcquire(t, tb, "e", time.Second, "alice")
	var t2 uint64
	w := &Wait{Notify: func(tok uint64) { t2 = tok; tb.Release(k, tok) }}
	if _, granted, err := tb.AcquireWait(&Request{Key: k, TTL: time.Second, Owner: []byte("bob")}, w); granted || err != nil {
		t.Fatalf("AcquireWait = %v, %v; want queued", granted, err)
	}
	tb.Release(k, t1)
	want := []Event{
		{EventAcquired, "e", t1, "alice", 0},
		{EventReleased, "e", t1, "alice", 0},
		{EventAcquired, "e", t2, "bob", 0},
		{EventReleased, "e", t2, "bob", 0},
	}
	if got := sink.take(); !slices.Equal(got, want) {
		t.Fatalf("events out of order\n got %+v\nwant %+v", got, want)
	}
}
