package locker

// A lock that may have more than one holder at a time keeps its leases in a
// holder set beside the entry rather than in the entry itself: a read/write
// lock while readers hold it (SHARED), and a semaphore (Create with a Limit)
// always. An exclusive lease stays in the entry, so the common lock pays
// nothing for sharing. The two never mix: an exclusive lease, or its
// lock-delay, keeps every other grant out, and any holder in the set keeps an
// exclusive grant out.
//
// The entry's deadline is the earliest deadline in the set, so the timer
// wheel needs one node per lock however many hold it; settling walks the set.

// holder is one lease in a holder set.
type holder struct {
	token    uint64
	deadline int64 // the lease's deadline; the lock-delay's end once delayed
	owner    string
	// delayed: the lease expired and the lock has a lock-delay. Its place
	// stays taken (a permit of a semaphore, a reader that blocks writers)
	// until deadline, but it is no lease: VERIFY and RELEASE ignore it.
	delayed bool
}

// holderSet is the leases of one lock, in grant order.
type holderSet struct {
	items []holder
	live  int // items not delayed
}

// holders returns entry i's holder set, or nil when the entry has none.
func (s *shard) holders(i uint32) *holderSet {
	if s.at(i).flags&flagMulti == 0 {
		return nil
	}
	return s.holderSets[i]
}

// limit is entry i's number of permits when it is a semaphore, 0 otherwise.
func (s *shard) limit(i uint32) int {
	if s.at(i).flags&flagSemaphore == 0 {
		return 0
	}
	return int(s.settings[i].limit)
}

// grantable reports whether entry i could grant a lease of the given mode
// now, leaving aside anyone queued for it.
func (s *shard) grantable(i uint32, shared bool) bool {
	e := s.at(i)
	switch {
	case e.flags&(flagHeld|flagDelayed) != 0:
		return false // an exclusive lease, or the lock-delay after one
	case e.flags&flagSemaphore != 0:
		hs := s.holders(i)
		return hs == nil || len(hs.items) < s.limit(i)
	case e.flags&flagMulti != 0:
		return shared // read-held: readers join, a writer waits for all to leave
	}
	return true
}

// grantMode gives entry i a lease of the mode asked for: a holder-set lease
// for a reader or a semaphore's permit, the entry's own otherwise.
func (s *shard) grantMode(i uint32, now, ttl int64, owner []byte, shared bool) uint64 {
	if shared || s.at(i).flags&flagSemaphore != 0 {
		return s.grantHolder(i, now, ttl, owner)
	}
	return s.grant(i, now, ttl, owner)
}

// grantHolder adds a lease to entry i's holder set.
func (s *shard) grantHolder(i uint32, now, ttl int64, owner []byte) uint64 {
	e := s.at(i)
	hs := s.holders(i)
	if hs == nil {
		hs = &holderSet{}
		s.holderSets[i] = hs
		e.flags |= flagMulti
	}
	e.token = s.nextToken()
	h := holder{token: e.token, deadline: now + ttl, owner: string(owner)}
	s.journal(ChangeGrant, i, h.token, h.deadline, owner, e.flags&flagSemaphore == 0)
	hs.items = append(hs.items, h)
	hs.live++
	s.counts.held.Add(1)
	s.counts.granted.Add(1)
	s.emitHolder(EventAcquired, i, &h)
	s.scheduleHolders(i)
	return h.token
}

// liveHolder returns the position in entry i's holder set of the live lease
// with token, or -1.
func (s *shard) liveHolder(i uint32, token uint64) int {
	if hs := s.holders(i); hs != nil {
		for n := range hs.items {
			if h := &hs.items[n]; h.token == token && !h.delayed {
				return n
			}
		}
	}
	return -1
}

// ownersHolder returns the position of owner's live lease in entry i's
// holder set, or -1.
func (s *shard) ownersHolder(i uint32, owner []byte) int {
	if hs := s.holders(i); hs != nil {
		for n := range hs.items {
			if h := &hs.items[n]; h.owner == string(owner) && !h.delayed {
				return n
			}
		}
	}
	return -1
}

// renewHolder moves the deadline of the n-th lease of entry i.
func (s *shard) renewHolder(i uint32, n int, now, ttl int64) {
	h := &s.holders(i).items[n]
	h.deadline = now + ttl
	s.journal(ChangeExtend, i, h.token, h.deadline, nil, false)
	s.counts.renewed.Add(1)
	s.emitHolder(EventExtended, i, h)
	s.scheduleHolders(i)
}

// releaseHolder ends the n-th lease of entry i, as its holder asked.
func (s *shard) releaseHolder(i uint32, n int) {
	hs := s.holders(i)
	s.counts.released.Add(1)
	s.journal(ChangeRelease, i, hs.items[n].token, 0, nil, false)
	s.emitHolder(EventReleased, i, &hs.items[n])
	s.dropHolder(i, n)
	s.counts.held.Add(-1)
	hs.live--
	s.scheduleHolders(i)
}

// dropHolder removes the n-th item of entry i's holder set, keeping the
// order of the rest (the order STATUS lists them in).
func (s *shard) dropHolder(i uint32, n int) {
	hs := s.holderSets[i]
	copy(hs.items[n:], hs.items[n+1:])
	hs.items[len(hs.items)-1] = holder{}
	hs.items = hs.items[:len(hs.items)-1]
}

// settleHolders expires entry i's leases whose deadline has passed, each into
// its lock-delay when the lock has one, and ends the lock-delays that have
// passed.
func (s *shard) settleHolders(i uint32, now int64) {
	hs := s.holders(i)
	delay := s.lockDelay(i)
	for n := 0; n < len(hs.items); {
		h := &hs.items[n]
		if !h.delayed && h.deadline <= now {
			s.counts.expired.Add(1)
			s.emitHolder(EventExpired, i, h)
			s.counts.held.Add(-1)
			hs.live--
			if delay > 0 {
				h.delayed = true
				h.deadline += delay // from the deadline, as for an exclusive lease
				h.owner = ""
				s.counts.delayed.Add(1)
			}
		}
		if h.deadline <= now {
			s.dropHolder(i, n)
			continue
		}
		n++
	}
	s.scheduleHolders(i)
}

// scheduleHolders points entry i's deadline and timer at the earliest
// deadline in its holder set, and forgets the set once it is empty.
func (s *shard) scheduleHolders(i uint32) {
	hs := s.holderSets[i]
	e := s.at(i)
	if len(hs.items) == 0 {
		delete(s.holderSets, i)
		e.flags &^= flagMulti
		s.wheel.cancel(i)
		return
	}
	first := hs.items[0].deadline
	for _, h := range hs.items[1:] {
		first = min(first, h.deadline)
	}
	e.deadline = first
	s.wheel.schedule(i, s.wheelDue(i))
}

// emitHolder records an event about one lease of entry i's holder set.
func (s *shard) emitHolder(kind EventKind, i uint32, h *holder) {
	if s.sink == nil || !s.sink.Active() {
		return
	}
	s.events = append(s.events, Event{Kind: kind, Key: string(s.key(s.at(i))), Token: h.token, Owner: h.owner})
}
