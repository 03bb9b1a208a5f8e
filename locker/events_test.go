package locker

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type recordingSink struct {
	active atomic.Bool
	mu     sync.Mutex
	got    []Event
}

func (r *recordingSink) Active() bool { return r.active.Load() }
func (r *recordingSink) Publish(ev Event) {
	r.mu.Lock()
	r.got = append(r.got, ev)
	r.mu.Unlock()
}

func (r *recordingSink) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

func TestEvents(t *testing.T) {
	sink := &recordingSink{}
	sink.active.Store(true)
	tb, clock := newTestTable(t, func(c *Config) { c.Events = sink })
	k := []byte("e")

	t1 := mustAcquire(t, tb, "e", time.Second, "alice")
	mustAcquire(t, tb, "e", time.Second, "alice") // the owner's retry renews
	tb.Extend(k, t1, 2*time.Second)
	_, ch := mustQueue(t, tb, &Request{Key: []byte("e"), TTL: time.Second, Owner: []byte("bob")})
	tb.Release(k, t1)
	t2 := <-ch
	clock.Advance(time.Second)
	tb.ExpireDue()
	tb.Create([]byte("d"), CreateOptions{})
	tb.Delete([]byte("d"))

	want := []Event{
		{EventAcquired, "e", t1, "alice"},
		{EventExtended, "e", t1, "alice"},
		{EventExtended, "e", t1, "alice"},
		{EventReleased, "e", t1, "alice"},
		{EventAcquired, "e", t2, "bob"},
		{EventExpired, "e", t2, "bob"},
		{EventDeleted, "d", 0, ""},
	}
	if got := sink.take(); !slices.Equal(got, want) {
		t.Fatalf("events\n got %+v\nwant %+v", got, want)
	}

	sink.active.Store(false)
	tok := mustAcquire(t, tb, "quiet", time.Second, "")
	tb.Release([]byte("quiet"), tok)
	if got := sink.take(); len(got) != 0 {
		t.Fatalf("events while nobody listens: %+v", got)
	}
	// The key is made once, as a server's comes from its read buffer: the
	// owner reaches the journal, and escape analysis does not tell a
	// Request's fields apart, so a key built in the loop would escape too.
	req := &Request{Key: []byte("quiet"), TTL: time.Second}
	if allocs := testing.AllocsPerRun(100, func() {
		tok, _, _ := tb.Acquire(req)
		tb.Release(req.Key, tok)
	}); allocs != 0 {
		t.Fatalf("%v allocations per acquire+release with an idle sink, want 0", allocs)
	}
}
