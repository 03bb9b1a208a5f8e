package locker

import "time"

// Wait is the handle of one single-key request waiting for its lock: given
// to AcquireWait with the Request, then to CancelWait if the caller gives
// up. Waiters are served in order of priority (higher first) and, within a
// priority, of arrival. When the lock frees (release, expiry, or the end of
// a lock-delay), the lease goes straight to the head of the queue, under
// the same shard lock: no wake-up of every waiter, no race to re-acquire.
//
// The caller sets Notify before AcquireWait and must not change it while
// the Wait is queued. A Wait is used for one request only.
type Wait struct {
	// Notify is called once when the lease is granted, with its token, on
	// whatever goroutine freed the lock and after the table's locks are
	// released. It must not block: hand the token over and return. A token
	// of 0 means the wait was superseded: a later AcquireWait with the same
	// Owner took its place in the queue.
	Notify func(token uint64)

	// The request's, copied by AcquireWait (priority is replaced by the
	// place an owner's retry takes over). Guarded by the shard's mutex once
	// queued.
	ttl      time.Duration // 0: the lock's default
	owner    []byte
	priority int
	mode     Mode

	// Guarded by the shard's mutex.
	state waitState
	token uint64
	seq   uint64
	entry uint32
	shard *shard
	since int64 // when it queued, a stamp (metrics.go), for the wait time
}

type waitState uint8

const (
	waitNone waitState = iota
	waitQueued
	waitGranted
	waitCancelled
	waitSuperseded // by a later request of the same owner (takeOwnersPlace)
)

// waitQueue is one lock's waiters, highest priority first, then oldest first.
type waitQueue struct {
	items []*Wait
}

func (q *waitQueue) push(w *Wait) {
	i := len(q.items)
	for i > 0 && q.items[i-1].priority < w.priority {
		i--
	}
	q.items = append(q.items, nil)
	copy(q.items[i+1:], q.items[i:])
	q.items[i] = w
}

func (q *waitQueue) remove(w *Wait) {
	for i, x := range q.items {
		if x == w {
			q.items = append(q.items[:i], q.items[i+1:]...)
			q.items[:len(q.items)+1][len(q.items)] = nil
			return
		}
	}
}

// enqueue adds w to entry i's queue.
func (s *shard) enqueue(i uint32, w *Wait) {
	q := s.waiters[i]
	if q == nil {
		q = &waitQueue{}
		s.waiters[i] = q
		s.at(i).flags |= flagWaiters
	}
	s.waitSeq++
	w.state, w.seq, w.entry, w.shard = waitQueued, s.waitSeq, i, s
	q.push(w)
	s.counts.waits.Add(1)
}

// handOff grants entry i to the head of its queue for as long as the head's
// request can be granted: one writer, or a run of readers, or permits while
// a semaphore has them. A writer at the head stops readers behind it, so a
// stream of readers cannot starve it. Waiters are notified once the shard is
// unlocked.
func (s *shard) handOff(i uint32, now int64) { s.grantQueue(i, now, nil) }

// grantQueue is handOff for a call that has just queued arriving (nil for
// none): the grants to the others are hand-offs, the lock passing from a
// lease that ended (or a lock-delay, or a wait given up) to a waiter.
func (s *shard) grantQueue(i uint32, now int64, arriving *Wait) {
	for s.at(i).flags&flagWaiters != 0 {
		q := s.waiters[i]
		w := q.items[0]
		if !s.grantable(i, w.mode) {
			return
		}
		q.items[0] = nil // the backing array must not pin a finished wait
		q.items = q.items[1:]
		if len(q.items) == 0 {
			s.dropQueue(i)
		}
		ttl := int64(w.ttl)
		if ttl == 0 {
			ttl = s.defaultTTL(i)
		}
		w.token = s.grantMode(i, now, ttl, w.owner, w.mode)
		w.state = waitGranted
		s.granted = append(s.granted, w)
		s.counts.waitGrants.Add(1)
		s.waitEnded(w, now)
		if w != arriving {
			bump(&s.metrics.handOffs, 1)
		}
	}
}

// keepGrant takes w off the list of grants to notify: its grant is being
// returned to the caller directly.
func (s *shard) keepGrant(w *Wait) {
	for n, g := range s.granted {
		if g == w {
			s.granted = append(s.granted[:n], s.granted[n+1:]...)
			return
		}
	}
}

// dropQueue forgets entry i's empty queue.
func (s *shard) dropQueue(i uint32) {
	delete(s.waiters, i)
	s.at(i).flags &^= flagWaiters
}

// waiterCount is the number of requests queued for entry i.
func (s *shard) waiterCount(i uint32) int {
	if s.at(i).flags&flagWaiters == 0 {
		return 0
	}
	return len(s.waiters[i].items)
}

// unlock releases s and then notifies the waiters granted, and publishes the
// events that happened, while it was held.
// Every Table method unlocks a shard through it, since any of them may expire
// a lease on the way and hand the lock to a waiter.
func (t *Table) unlock(s *shard) {
	if len(s.granted) == 0 && s.events == nil {
		s.mu.Unlock()
		return
	}
	granted, events := s.granted, s.events
	s.granted, s.events = nil, nil
	s.mu.Unlock()
	// Events first: a waiter may act on its grant at once (release it, say),
	// and its own events must not overtake the ones that led to the grant.
	if events != nil {
		events.publish(s.sink)
		s.spareEvents.Store(events)
	}
	for _, w := range granted {
		w.Notify(w.token)
	}
}

// AcquireWait is Acquire for a request that is willing to wait: if the lease
// cannot be granted now, w joins the lock's queue at req.Priority and
// AcquireWait returns granted=false. w.Notify is then called when the lease
// is handed to it, or never if CancelWait takes it out first. A request that
// could be granted at once is granted at once (and Notify is not called),
// unless others of the same or a higher priority are already waiting: it
// never overtakes them. (A reader queued by its priority ahead of a writer
// that waits for the readers to leave is granted at once.) A request whose
// Owner is already queued takes that request's place instead of queueing
// twice, and the older one is notified with token 0.
func (t *Table) AcquireWait(req *Request, w *Wait) (token uint64, granted bool, err error) {
	w.ttl, w.priority, w.mode = req.TTL, req.Priority, req.Mode
	return t.acquire(req, w)
}

// takeOwnersPlace puts w where a queued request of the same owner stands (a
// retry from a new connection, say), so that the owner never queues twice;
// the old request is told it was superseded. It reports whether it did.
func (s *shard) takeOwnersPlace(i uint32, w *Wait) bool {
	if s.waiterCount(i) == 0 {
		return false
	}
	q := s.waiters[i]
	for n, old := range q.items {
		if string(old.owner) != string(w.owner) {
			continue
		}
		w.priority = old.priority // the place in the queue is the old one's
		w.state, w.seq, w.entry, w.shard = waitQueued, old.seq, i, s
		q.items[n] = w
		old.state, old.token = waitSuperseded, 0
		s.granted = append(s.granted, old) // Notify(0) once unlocked
		return true
	}
	return false
}

// CancelWait takes w out of its queue, as when its wait times out or its
// connection closes. If the lease was handed to w first, it returns that
// token and granted=true: the caller now holds the lease and should use it
// or release it, since Notify may not have been seen yet.
func (t *Table) CancelWait(w *Wait) (token uint64, granted bool) {
	s := w.shard
	if s == nil {
		return 0, false
	}
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	if w.state == waitQueued {
		// As every operation does: a lease past its deadline is expired
		// now, and may hand the lock to this very waiter.
		s.settle(w.entry, now)
	}
	switch w.state {
	case waitGranted:
		return w.token, true
	case waitQueued:
		if q := s.waiters[w.entry]; q != nil {
			q.remove(w)
			if len(q.items) == 0 {
				s.dropQueue(w.entry)
			}
		}
		w.state = waitCancelled
		s.counts.waitCancels.Add(1)
		s.waitEnded(w, now)
		// The request behind it may fit now (readers behind a writer
		// that gave up).
		s.handOff(w.entry, now)
		s.removeIfUnused(w.entry)
	}
	return 0, false
}
