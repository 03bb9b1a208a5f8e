package server

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/limits"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
)

// TestStatusPageEvents: an EventWatch receives the lock's events, owners
// with spaces whole. (The page's lock rows: admin's TestStatusLocks.)
func TestStatusPageEvents(t *testing.T) {
	ts := startServer(t)
	events := make(chan locker.Event, 16)
	w := ts.WatchEvents(func(ev locker.Event) { events <- ev }, func() { t.Error("events lost") })
	defer w.Stop()
	defer w.Stop() // twice is safe

	rdb := ts.client()
	if err := rdb.Do(ctx(t), "ACQUIRE", "k", "30000", "OWNER", "a b").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if want := (locker.Event{Kind: locker.EventAcquired, Key: "k", Token: ev.Token, Owner: "a b"}); ev != want || ev.Token == 0 {
			t.Fatalf("event %+v, want %+v", ev, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no acquired event")
	}
}

// TestEventWatchFallsBehind: a watch that does not keep up is cut off at
// the pub/sub output limit as any subscriber is, reports the loss, and
// subscribes again: later events arrive.
func TestEventWatchFallsBehind(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.OutputLimits.PubSub = limits.OutputLimit{Hard: 300} })
	events := make(chan locker.Event, 1024)
	lost := make(chan struct{}, 16)
	release := make(chan struct{})
	first := true
	w := ts.WatchEvents(func(ev locker.Event) {
		if first {
			first = false
			<-release // the watch's goroutine stalls: its outbox fills
		}
		events <- ev
	}, func() { lost <- struct{}{} })
	defer w.Stop()

	rdb := ts.client()
	for i := range 20 {
		if err := rdb.Do(ctx(t), "ACQUIRE", "k", "30000", "OWNER", "owner-with-a-longish-name").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Do(ctx(t), "FORCE-RELEASE", "k").Err(); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	close(release)
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("no loss reported")
	}
	// The watch reports the loss, then subscribes again: an event made
	// between the two is not its to see. Its pattern back in the hub (the
	// old subscription left before the report) marks the new one.
	testutil.Eventually(t, 10*time.Second, "the watch subscribed again", func() bool {
		return infoField(t, rdb, "stats", "pubsub_patterns") == "1"
	})
	if err := rdb.Do(ctx(t), "ACQUIRE", "after", "30000").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Key == "after" {
				return
			}
		case <-deadline:
			t.Fatal("no event after the watch subscribed again")
		}
	}
}
