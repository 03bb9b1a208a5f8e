package admin

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/server"
)

// feedSource is a StatusSource whose event watch the test drives by hand.
type feedSource struct {
	StatusSource // nil: only WatchEvents is called
	onEvent      func(locker.Event)
	onLost       func()
	watches      int
}

func (s *feedSource) WatchEvents(onEvent func(locker.Event), onLost func()) *server.EventWatch {
	s.onEvent, s.onLost = onEvent, onLost
	s.watches++
	return &server.EventWatch{} // never stopped: these tests do not leave
}

// TestEventFeedSlowBrowser: a browser that does not take its events keeps
// eventBuffer of them and a count of the rest, publishing never waits for
// it, and another browser gets every event.
func TestEventFeedSlowBrowser(t *testing.T) {
	src := &feedSource{}
	f := newEventFeed(src)
	slow, ok := f.join()
	fast, ok2 := f.join()
	if !ok || !ok2 || src.watches != 1 {
		t.Fatalf("join: %v %v, %d watches, want 1", ok, ok2, src.watches)
	}
	const extra = 5
	got := 0
	for i := range eventBuffer + extra {
		src.onEvent(locker.Event{Kind: locker.EventAcquired, Key: "k", Token: uint64(i + 1)})
		if i%10 == 0 {
			evs, dropped := f.take(fast)
			got += len(evs)
			if dropped != 0 {
				t.Fatalf("the fast browser dropped %d", dropped)
			}
		}
	}
	evs, _ := f.take(fast)
	if got += len(evs); got != eventBuffer+extra {
		t.Errorf("the fast browser got %d events, want %d", got, eventBuffer+extra)
	}
	evs, dropped := f.take(slow)
	if len(evs) != eventBuffer || dropped != extra {
		t.Errorf("the slow browser: %d events and %d dropped, want %d and %d", len(evs), dropped, eventBuffer, extra)
	}
	if evs[0].Token != "1" || evs[len(evs)-1].Token != "256" {
		t.Errorf("the slow browser kept events %s to %s, want the oldest", evs[0].Token, evs[len(evs)-1].Token)
	}
	select {
	case <-slow.wake:
	default:
		t.Error("the slow browser was not woken")
	}

	// A gap in the server's subscription is reported to everyone.
	src.onLost()
	if _, dropped := f.take(fast); dropped != 1 {
		t.Errorf("after a lost subscription, dropped %d, want 1", dropped)
	}
}

// TestEventFeedStreamsBound: no more than eventStreamsMax browsers stream
// at once.
func TestEventFeedStreamsBound(t *testing.T) {
	f := newEventFeed(&feedSource{})
	var subs []*feedSub
	for range eventStreamsMax {
		sub, ok := f.join()
		if !ok {
			t.Fatalf("join %d refused", len(subs)+1)
		}
		subs = append(subs, sub)
	}
	if _, ok := f.join(); ok {
		t.Fatalf("join %d accepted", eventStreamsMax+1)
	}
}

// TestHistoryRing: the history keeps the last historySamples samples,
// oldest first, since gives those after a time, and a counter that went
// down (a cluster's new table) counts from zero rather than going negative.
func TestHistoryRing(t *testing.T) {
	h := &history{samples: make([]rateSample, 0, historySamples)}
	for i := 1; i <= historySamples+5; i++ {
		h.add(rateSample{Time: int64(i)})
	}
	all := h.since(0)
	if len(all) != historySamples || all[0].Time != 6 || all[len(all)-1].Time != historySamples+5 {
		t.Fatalf("%d samples from %d to %d, want %d from 6", len(all), all[0].Time, all[len(all)-1].Time, historySamples)
	}
	if got := h.since(historySamples + 3); len(got) != 2 || got[0].Time != historySamples+4 {
		t.Errorf("since: %+v", got)
	}
	s := sampleOf(lockCounts{grants: 100, waits: 10}, lockCounts{grants: 150, waits: 4}, 2*time.Second, time.UnixMilli(5000))
	if s.Grants != 25 || s.Waits != 2 || s.Time != 5000 {
		t.Errorf("sample %+v, want 25 grants/s and, the waits' counter having restarted, 2 waits/s", s)
	}
}
