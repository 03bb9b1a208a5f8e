package locker

import "time"

// QueuedWait is one request in a lock's queue, as Queue reports it and
// RestoreQueue installs it: for a replicated table's snapshot, which must
// carry the queues exactly, so that a restored replica hands each lock to
// the same waiters in the same order.
type QueuedWait struct {
	// Wait is the request's handle: Queue reports the queued one,
	// RestoreQueue takes a new one (never given to the table before), its
	// Notify set.
	Wait     *Wait
	Owner    []byte
	TTL      time.Duration // 0: the lock's default ttl
	Priority int           // its place: an owner's retry keeps the place of the request it replaced
	Mode     Mode
}

// Queue returns key's queue of waiting requests, in the order they will be
// served: by priority, then arrival. An unknown key, or one nobody waits
// for, returns nil.
func (t *Table) Queue(key []byte) []QueuedWait {
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if s.waiterCount(i) == 0 {
		return nil
	}
	items := s.waiters[i].items
	q := make([]QueuedWait, len(items))
	for n, w := range items {
		q[n] = QueuedWait{Wait: w, Owner: append([]byte(nil), w.owner...), TTL: w.ttl, Priority: w.priority, Mode: w.mode}
	}
	return q
}

// RestoreQueue appends q, in its order, to the queue of key, a lock that
// Restore installed, as Queue reported it: no request is granted or
// checked, and nobody is notified, so the table is exactly as the one the
// queue was taken from once every lock and queue is restored. The Waits
// then behave as if given to AcquireWait. Call it before the table serves
// requests.
func (t *Table) RestoreQueue(key []byte, q []QueuedWait) error {
	h, s := t.locate(key)
	s.mu.Lock()
	defer t.unlock(s)
	i := s.lookup(h, key)
	if i == 0 {
		return &KeyError{Key: string(key), Err: ErrQueueState}
	}
	for n := range q {
		if q[n].Wait == nil || q[n].Wait.shard != nil {
			return &KeyError{Key: string(key), Err: ErrQueueState}
		}
	}
	for n := range q {
		w := q[n].Wait
		w.owner, w.ttl, w.priority, w.mode = append([]byte(nil), q[n].Owner...), q[n].TTL, q[n].Priority, q[n].Mode
		s.enqueue(i, w)
	}
	return nil
}
