// Package eventring keeps the last lock events of a server in a bounded
// ring, fed straight from the lock table's event sink while someone records
// them (the admin listener, for the status page's recent events): a page
// opened after the fact shows what happened before it.
//
// The ring is fed by the table's sink and not by a pub/sub watch because a
// watch makes every event into a RESP frame, delivers it to an outbox and
// parses it back on another goroutine: about six times the cost of a lock
// cycle (1 µs to 6 µs, 24 allocations, in server's BenchmarkRecentEvents).
// The ring's cost is the table building the event (which it does anyway
// with LOCKSTATS on or a subscriber), one atomic add, an uncontended slot
// mutex and two copies of at most TextMax bytes; nothing allocates once
// the slots' buffers have grown. Events are timed by a clock each
// recorder's goroutine sets every ClockTick, not by time.Now per event,
// which took 40% of the ring's time on a virtual machine without a fast
// clock source.
package eventring

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// Max is the most events the ring keeps.
const Max = 300

// ClockTick is how often a recorder sets the ring's clock: the precision
// of Event.Time.
const ClockTick = 100 * time.Millisecond

// TextMax bounds the bytes of a key, and of an owner, a slot keeps, so
// that the ring's memory is bounded whatever --max-key-len allows.
const TextMax = 1024

// Event is a lock event as the ring recorded it.
type Event struct {
	Time  time.Time // to within ClockTick
	Kind  locker.EventKind
	Key   string
	Token uint64
	Owner string // as the table has it (scoped owners with their scope)
	// Truncated: the key or the owner was longer than TextMax bytes and is
	// cut there.
	Truncated bool
}

// Ring keeps the last Max events. Writers claim a slot by an atomic
// sequence number, so that events from different shards do not queue on
// one mutex; each slot has its own, which a writer meets held only when the
// ring wrapped round under it. The zero Ring is empty and not recording.
type Ring struct {
	recorders atomic.Int32  // Record not yet stopped; recording while > 0
	seq       atomic.Uint64 // events recorded; the next one's number
	now       atomic.Int64  // unix ns, set every ClockTick while recording
	slots     [Max]slot
}

type slot struct {
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

// On reports whether the ring records.
func (r *Ring) On() bool { return r.recorders.Load() > 0 }

// Add records ev, whose key and owner may be borrowed: the ring copies them.
func (r *Ring) Add(ev locker.Event) {
	n := r.seq.Add(1) // this event's number + 1
	s := &r.slots[n%Max]
	now := r.now.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq > n {
		return // a later event took the slot first: this one is already out of the ring
	}
	s.seq, s.at, s.kind, s.token = n, now, ev.Kind, ev.Token
	s.key = append(s.key[:0], ev.Key[:min(len(ev.Key), TextMax)]...)
	s.owner = append(s.owner[:0], ev.Owner[:min(len(ev.Owner), TextMax)]...)
	s.truncated = len(ev.Key) > TextMax || len(ev.Owner) > TextMax
}

// Read returns the events in the ring, oldest first.
func (r *Ring) Read() []Event {
	last := r.seq.Load()
	first := uint64(1)
	if last > Max {
		first = last - Max + 1
	}
	out := make([]Event, 0, last-first+1)
	for n := first; n <= last; n++ {
		s := &r.slots[n%Max]
		s.mu.Lock()
		if s.seq == n { // not yet written (a writer between its add and its lock), or overwritten since
			out = append(out, Event{
				Time: time.Unix(0, s.at), Kind: s.kind, Key: string(s.key), Token: s.token,
				Owner: string(s.owner), Truncated: s.truncated,
			})
		}
		s.mu.Unlock()
	}
	return out
}

// Sink is a lock table's event sink: the ring while it records, and Next
// (the sink the table had without it) while that one is active. With no
// recorder its cost over Next is one atomic load per event the table asks
// about.
type Sink struct {
	Ring *Ring
	Next locker.EventSink
}

func (s *Sink) Active() bool { return s.Ring.On() || s.Next.Active() }

func (s *Sink) Publish(ev locker.Event) {
	if s.Ring.On() {
		s.Ring.Add(ev)
	}
	if s.Next.Active() {
		s.Next.Publish(ev)
	}
}

// Record makes the ring record until stop is called. While any recorder
// is on, the table the ring's Sink feeds builds every event, as it does
// for a subscriber (see the package doc for the cost). Each call starts a
// goroutine that sets the ring's clock every ClockTick; stop ends it and
// waits for it, and is safe to call more than once. Recorders count, so
// two on one ring do not stop each other's recording.
func (r *Ring) Record() (stop func()) {
	r.now.Store(time.Now().UnixNano())
	r.recorders.Add(1)
	stopC, doneC := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(doneC)
		tick := time.NewTicker(ClockTick)
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
