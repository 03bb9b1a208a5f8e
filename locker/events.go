package locker

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
type Event struct {
	Kind  EventKind
	Key   string
	Token uint64 // the lease's token; the last token granted for deleted
	Owner string // the lease's owner, if it named one
}

// EventSink receives a Table's events. Active is asked before every event is
// built and must be cheap (an atomic load): when it says false, the table
// does no work for events at all. Publish is called after the shard lock is
// released, on the goroutine that caused the event; it must not block.
type EventSink interface {
	Active() bool
	Publish(Event)
}

// emit records an event about entry i, to publish once the shard is unlocked.
func (s *shard) emit(kind EventKind, i uint32) {
	if s.sink == nil || !s.sink.Active() {
		return
	}
	e := s.at(i)
	ev := Event{Kind: kind, Key: string(s.key(e)), Token: e.token}
	if e.ownerLen > 0 {
		ev.Owner = string(s.strings.get(e.ownerRef, int(e.ownerLen)))
	}
	s.events = append(s.events, ev)
}
