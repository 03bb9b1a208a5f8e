package locker

import (
	"slices"
	"strings"
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
	ev.Key, ev.Owner = strings.Clone(ev.Key), strings.Clone(ev.Owner) // borrowed (see Event)
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
		{EventAcquired, "e", t1, "alice", 0},
		{EventExtended, "e", t1, "alice", 0},
		{EventExtended, "e", t1, "alice", 0},
		{EventReleased, "e", t1, "alice", 0},
		{EventAcquired, "e", t2, "bob", 0},
		{EventExpired, "e", t2, "bob", time.Second},
		{EventDeleted, "d", 0, "", 0},
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

// readingSink reads each event's key and owner during Publish and keeps
// neither, as a sink that follows Event's contract may.
type readingSink struct{ keyBytes, events int }

func (r *readingSink) Active() bool { return true }
func (r *readingSink) Publish(ev Event) {
	r.keyBytes += len(ev.Key) + len(ev.Owner)
	r.events++
}

// TestEventsAllocateNothingWithAListener: the key and owner of an event are
// copied into a batch the shard reuses, so a lock cycle that a sink listens
// to allocates no more than one nobody listens to.
func TestEventsAllocateNothingWithAListener(t *testing.T) {
	sink := &readingSink{}
	tb, _ := newTestTable(t, func(c *Config) { c.Events = sink })
	req := &Request{Key: []byte("a key longer than an entry holds inline"), TTL: time.Second, Owner: []byte("owner")}
	if allocs := testing.AllocsPerRun(100, func() {
		tok, _, _ := tb.Acquire(req)
		tb.Release(req.Key, tok)
	}); allocs != 0 {
		t.Fatalf("%v allocations per acquire+release with a listening sink, want 0", allocs)
	}
	if want := 2 * (len(req.Key) + len(req.Owner)); sink.events < 2 || sink.keyBytes != sink.events/2*want {
		t.Fatalf("the sink saw %d events with %d bytes of keys and owners", sink.events, sink.keyBytes)
	}
}

// TestEventKeysAreBorrowed: the events of one hold keep their own keys and
// owners apart, and a later hold reuses the buffer, which is why a sink that
// keeps a key copies it.
func TestEventKeysAreBorrowed(t *testing.T) {
	var seen []string
	sink := sinkFunc(func(ev Event) { seen = append(seen, ev.Key+"/"+ev.Owner) })
	tb, clock := newTestTable(t, func(c *Config) { c.Events = sink; c.Shards = 1 })
	mustAcquire(t, tb, "first", time.Second, "o1")
	mustAcquire(t, tb, "second-key-past-the-inline-limit", 2*time.Second, "o2")
	clock.Advance(3 * time.Second)
	tb.ExpireDue() // both expire under one hold: one batch, two events
	want := []string{"first/o1", "second-key-past-the-inline-limit/o2", "first/o1", "second-key-past-the-inline-limit/o2"}
	if !slices.Equal(seen, want) {
		t.Fatalf("events %q, want %q", seen, want)
	}
}

type sinkFunc func(Event)

func (f sinkFunc) Active() bool     { return true }
func (f sinkFunc) Publish(ev Event) { f(ev) }
