package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/stats"
	"github.com/leasehold/leasehold/locker"
)

// The recent lock events the status page opens with (package admin): a
// ring of the last RecentEventsMax, fed straight from the lock table's
// event sink while an admin listener asks for it (RecordEvents), so that a
// page opened after the fact shows what happened before it.
//
// The ring is fed by the table's sink and not by a pub/sub watch
// (WatchEvents) because a watch makes every event into a RESP frame,
// delivers it to an outbox and parses it back on another goroutine: about
// six times the cost of a lock cycle (1 µs to 6 µs, 24 allocations, in a
// benchmark of ACQUIRE and RELEASE). The ring's cost is the table building
// the event (which it does anyway with LOCKSTATS on or a subscriber),
// one atomic add, an uncontended slot mutex and two copies of at most
// recentTextMax bytes; nothing allocates once the slots' buffers have grown.
// Events are timed by a clock each recorder's goroutine sets every
// recentClockTick, not by time.Now per event, which took 40% of the ring's
// time on a virtual machine without a fast clock source.

// RecentEventsMax is the most lock events RecentEvents returns.
const RecentEventsMax = 300

// recentClockTick is how often a recorder sets the ring's clock: the
// precision of RecentEvent.Time.
const recentClockTick = 100 * time.Millisecond

// recentTextMax bounds the bytes of a key, and of an owner, a slot keeps,
// so that the ring's memory is bounded whatever --max-key-len allows.
const recentTextMax = 1024

// RecentEvent is a lock event as the ring recorded it.
type RecentEvent struct {
	Time  time.Time // to within recentClockTick
	Kind  locker.EventKind
	Key   string
	Token uint64
	Owner string // as an admin sees it (scoped owners as user:owner)
	// Truncated: the key or the owner was longer than recentTextMax bytes
	// and is cut there.
	Truncated bool
}

// eventRing keeps the last RecentEventsMax events. Writers claim a slot by
// an atomic sequence number, so that events from different shards do not
// queue on one mutex; each slot has its own, which a writer meets held only
// when the ring wrapped round under it.
type eventRing struct {
	recorders atomic.Int32  // RecordEvents not yet stopped; recording while > 0
	seq       atomic.Uint64 // events recorded; the next one's number
	now       atomic.Int64  // unix ns, set every recentClockTick while recording
	slots     [RecentEventsMax]ringSlot
}

type ringSlot struct {
	mu        sync.Mutex // guards the fields below
	seq       uint64     // the event's number + 1; 0 for never written
	at        int64      // unix ns
	kind      locker.EventKind
	token     uint64
	key       []byte // reused: grows to the longest key the slot held
	owner     []byte
	truncated bool
	// Consecutive events take neighbouring slots, most often from different
	// cores: padding keeps them off each other's cache lines.
	_ [24]byte
}

func (r *eventRing) on() bool { return r.recorders.Load() > 0 }

func (r *eventRing) add(ev locker.Event) {
	n := r.seq.Add(1) // this event's number + 1
	s := &r.slots[n%RecentEventsMax]
	now := r.now.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq > n {
		return // a later event took the slot first: this one is already out of the ring
	}
	s.seq, s.at, s.kind, s.token = n, now, ev.Kind, ev.Token
	s.key = append(s.key[:0], ev.Key[:min(len(ev.Key), recentTextMax)]...)
	s.owner = append(s.owner[:0], ev.Owner[:min(len(ev.Owner), recentTextMax)]...)
	s.truncated = len(ev.Key) > recentTextMax || len(ev.Owner) > recentTextMax
}

// read returns the events in the ring, oldest first.
func (r *eventRing) read() []RecentEvent {
	last := r.seq.Load()
	first := uint64(1)
	if last > RecentEventsMax {
		first = last - RecentEventsMax + 1
	}
	out := make([]RecentEvent, 0, last-first+1)
	for n := first; n <= last; n++ {
		s := &r.slots[n%RecentEventsMax]
		s.mu.Lock()
		if s.seq == n { // not yet written (a writer between its add and its lock), or overwritten since
			out = append(out, RecentEvent{
				Time: time.Unix(0, s.at), Kind: s.kind, Key: string(s.key), Token: s.token,
				Owner: adminOwner(string(s.owner)), Truncated: s.truncated,
			})
		}
		s.mu.Unlock()
	}
	return out
}

// recordingSink is the lock table's event sink: the ring while it records,
// and the sink the server had without it (the pub/sub hub, or LOCKSTATS'
// statsSink) while that one is active. With no recorder its cost over the
// other sink is one atomic load per event the table asks about.
type recordingSink struct {
	ring *eventRing
	next locker.EventSink
}

func (s recordingSink) Active() bool { return s.ring.on() || s.next.Active() }

func (s recordingSink) Publish(ev locker.Event) {
	if s.ring.on() {
		s.ring.add(ev)
	}
	if s.next.Active() {
		s.next.Publish(ev)
	}
}

// RecordEvents makes the server keep its last RecentEventsMax lock events
// (RecentEvents) until stop is called; the admin listener calls it as it
// starts, so that the status page opens with the events that came before
// it. While any recorder is on, the lock table builds every event, as it
// does for a subscriber (see eventRing for the cost). Each call starts a
// goroutine that sets the ring's clock every recentClockTick; stop ends it
// and waits for it, and is safe to call more than once. Recorders count, so
// two listeners on one server do not stop each other's.
func (s *Server) RecordEvents() (stop func()) {
	r := s.recent
	r.now.Store(time.Now().UnixNano())
	r.recorders.Add(1)
	stopC, doneC := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(doneC)
		tick := time.NewTicker(recentClockTick)
		defer tick.Stop()
		for {
			select {
			case now := <-tick.C:
				r.now.Store(now.UnixNano())
			case <-stopC:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.recorders.Add(-1)
			close(stopC)
			<-doneC
		})
	}
}

// RecentEvents returns the last lock events recorded (at most
// RecentEventsMax, oldest first) while RecordEvents was on. It takes each
// slot's mutex briefly, and no lock a command holds.
func (s *Server) RecentEvents() []RecentEvent { return s.recent.read() }

// LockCounters reads the lock table's counters as StatsSnapshot's Locks
// does, without the rest: no memory statistics (which stop the world), no
// connection counts, so that a sampler may call it every second. It takes
// no lock (atomic loads).
func (s *Server) LockCounters() stats.LockStats { return s.lockStats() }
