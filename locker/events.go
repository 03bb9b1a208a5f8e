package locker

import (
	"time"
	"unsafe"
)

// EventKind names what happened to a lock.
type EventKind string

// The events a Table reports.
const (
	EventAcquired EventKind = "acquired" // a lease was granted, at once or from the queue
	EventReleased EventKind = "released" // a lease was released by its holder
	EventExpired  EventKind = "expired"  // a lease reached its deadline
	EventExtended EventKind = "extended" // a lease's deadline moved (EXTEND, or its owner's repeated ACQUIRE)
	EventDeleted  EventKind = "deleted"  // a lock was deleted
	// EventForced: an operator's ForceRelease ended a lease, or cut short
	// the lock-delay of an expired one (Owner is then empty).
	EventForced EventKind = "forced"
)

// Event is one thing that happened to a lock.
//
// The Key and Owner of an Event handed to EventSink.Publish are borrowed:
// they point into a buffer the table reuses once Publish returns, so that
// reporting an event allocates nothing. A sink that keeps either past the
// call copies it (strings.Clone); one that only reads them, or builds
// something new from them, need not.
type Event struct {
	Kind  EventKind
	Key   string
	Token uint64 // the lease's token; the last token granted for deleted
	Owner string // the lease's owner, if it named one
	// Held is how long the lease had been held when it was released,
	// expired (up to its deadline) or forced; 0 for the other kinds, for
	// the end of a lock-delay, and for a lease restored from a snapshot or
	// a journal, whose grant the table did not see.
	Held time.Duration
}

// EventSink receives a Table's events. Active is asked before every event is
// built and must be cheap (an atomic load): when it says false, the table
// does no work for events at all. Publish is called after the shard lock is
// released, on the goroutine that caused the event; it must not block, and
// must copy the event's Key and Owner to keep them (see Event).
type EventSink interface {
	Active() bool
	Publish(Event)
}

// Observer is an EventSink's fast path for statistics. If the sink given
// as Config.Events also implements it, Observe is told of events as they
// happen: synchronously, on the goroutine that holds the shard's lock, with
// the key borrowed from the table (valid during the call only), whether or
// not Active asks for the event to be built for Publish. That is the one
// thing the table calls with a shard locked, and only a leaf may do it:
// Observe must not block, must not call the Table, may take only locks that
// are never held while calling the Table, and must cost tens of
// nanoseconds, since every grant and release waits for it. In exchange it
// is spared what building and publishing an event costs (copying the key
// and owner, taking and giving back the shard's batch, a call per event
// after the unlock), which for a sink as cheap as a heavy-hitters sketch is
// most of the price (docs/performance.md).
//
// Observe's result matters for an EventAcquired only: whether to be told of
// that lease's end (EventReleased, EventExpired, or EventForced), which the
// table remembers with the lease. A sketch that drops the grant of a key it
// does not track so spares itself the key's end. The end of a lease whose
// grant the table did not see (restored from a snapshot or a journal) is
// not told either.
type Observer interface {
	Observe(kind EventKind, key string, token uint64, held time.Duration) (followEnd bool)
}

// eventBatch is the events of one hold of a shard's lock, published once it
// is unlocked. The keys and owners are copied into text under the lock, since
// the entry they live in may change as soon as it is released; the batch is
// then kept as the shard's spare for the next hold, so that a lock cycle with
// a sink allocates nothing once the buffers have grown to fit. (Two holds of
// one shard publishing at once need two batches: the later one is then
// made, and the one returned last stays the spare.)
type eventBatch struct {
	pending []pendingEvent
	text    []byte // the keys and owners of pending, end to end
}

// pendingEvent is an Event whose key and owner are spans of eventBatch.text,
// made strings only once text has stopped growing. An owner that is already
// a string (a holder set's) is kept as it is.
type pendingEvent struct {
	kind              EventKind
	token             uint64
	keyAt, keyLen     int
	ownerAt, ownerLen int
	owner             string
	held              time.Duration
}

// add records an event whose key and owner bytes are copied now.
func (b *eventBatch) add(kind EventKind, token uint64, key, owner []byte, ownerStr string, held time.Duration) {
	p := pendingEvent{kind: kind, token: token, keyAt: len(b.text), keyLen: len(key), owner: ownerStr, held: held}
	b.text = append(b.text, key...)
	if len(owner) > 0 {
		p.ownerAt, p.ownerLen = len(b.text), len(owner)
		b.text = append(b.text, owner...)
	}
	b.pending = append(b.pending, p)
}

// publish hands every event to sink, in order, and empties the batch.
func (b *eventBatch) publish(sink EventSink) {
	for i := range b.pending {
		p := &b.pending[i]
		ev := Event{Kind: p.kind, Key: b.span(p.keyAt, p.keyLen), Token: p.token, Owner: p.owner, Held: p.held}
		if p.ownerLen > 0 {
			ev.Owner = b.span(p.ownerAt, p.ownerLen)
		}
		sink.Publish(ev)
	}
	clear(b.pending) // the owners of holder sets must not be pinned
	b.pending, b.text = b.pending[:0], b.text[:0]
}

// span is the string of n bytes of text from at, without a copy: valid
// until the batch is reused (see Event).
func (b *eventBatch) span(at, n int) string {
	if n == 0 {
		return ""
	}
	return unsafe.String(&b.text[at], n)
}

// borrow is key as a string without a copy, valid while key's bytes are
// (see Observer).
func borrow(key []byte) string {
	if len(key) == 0 {
		return ""
	}
	return unsafe.String(&key[0], len(key))
}

// eventsOn returns the batch to record an event in, taking one when the shard
// has none under this hold, or nil when nobody listens.
func (s *shard) eventsOn() *eventBatch {
	if s.sink == nil || !s.sink.Active() {
		return nil
	}
	if s.events == nil {
		if s.events = s.spareEvents.Swap(nil); s.events == nil {
			s.events = new(eventBatch)
		}
	}
	return s.events
}

// emit tells the observer of an event about entry i and records it, to
// publish once the shard is unlocked. An event that ends the exclusive
// lease goes through emitEnd instead.
func (s *shard) emit(kind EventKind, i uint32, held time.Duration) {
	if s.observer != nil {
		e := s.at(i)
		follow := s.observer.Observe(kind, borrow(s.key(e)), e.token, held)
		if st := s.grantedAt.at(i); follow && kind == EventAcquired && *st != 0 {
			*st |= observedBit // see Observer
		}
	}
	s.record(kind, i, held)
}

// record records an event about entry i, to publish once the shard is
// unlocked, if anyone listens; held is the lease's hold time for an event
// that ends it.
func (s *shard) record(kind EventKind, i uint32, held time.Duration) {
	b := s.eventsOn()
	if b == nil {
		return
	}
	e := s.at(i)
	var owner []byte
	if e.ownerLen > 0 {
		owner = s.strings.get(e.ownerRef, int(e.ownerLen))
	}
	b.add(kind, e.token, s.key(e), owner, "", held)
}

// ends reports whether an event of kind ends a lease.
func ends(kind EventKind) bool {
	return kind == EventReleased || kind == EventExpired || kind == EventForced
}

// emitEnd is emit for an event that ends entry i's exclusive lease at end,
// with its hold time, which it works out only when anyone listens: the
// observer if it asked for this lease's end at its grant, or the sink.
func (s *shard) emitEnd(kind EventKind, i uint32, end int64) {
	observed := s.observer != nil && *s.grantedAt.at(i)&observedBit != 0
	active := s.sink != nil && s.sink.Active()
	if !observed && !active {
		return
	}
	held := s.heldFor(i, end)
	if observed {
		e := s.at(i)
		s.observer.Observe(kind, borrow(s.key(e)), e.token, held)
	}
	if active {
		s.record(kind, i, held)
	}
}

// emitHolder records an event about one lease of entry i's holder set.
// h must be the holder set's own, so that a grant's observedBit stays with
// it.
func (s *shard) emitHolder(kind EventKind, i uint32, h *holder, held time.Duration) {
	if s.observer != nil && (!ends(kind) || h.since&observedBit != 0) {
		if s.observer.Observe(kind, borrow(s.key(s.at(i))), h.token, held) && kind == EventAcquired && h.since != 0 {
			h.since |= observedBit
		}
	}
	if b := s.eventsOn(); b != nil {
		b.add(kind, h.token, s.key(s.at(i)), nil, h.owner, held)
	}
}
