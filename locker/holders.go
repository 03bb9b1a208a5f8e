package locker

import (
	"cmp"
	"slices"
	"time"
)

// A lock that may have more than one holder at a time keeps its leases in a
// holder set beside the entry rather than in the entry itself: a read/write
// lock while readers hold it (SHARED), and a semaphore (Create with a Limit)
// always. An exclusive lease stays in the entry, so the common lock pays
// nothing for sharing. The two never mix: an exclusive lease, or its
// lock-delay, keeps every other grant out, and any holder in the set keeps an
// exclusive grant out.
//
// The entry's deadline is never later than the earliest deadline in the set,
// so the timer wheel needs one node per lock however many hold it; settling
// walks the set, and makes the entry's deadline exactly the earliest.
//
// A semaphore may have up to MaxLimit holders, so only settling walks the
// set, once per call. The items stay in grant order, which is token order,
// so a token is found by binary search; an owner is found by a scan while
// the set is small, and by an index once it has grown. A grant or a
// renewal only ever lowers the entry's deadline, and a release leaves it
// be: when the lease that held the earliest deadline leaves, the timer
// fires early once, and that settling finds the next.

// holder is one lease in a holder set.
type holder struct {
	token    uint64
	deadline int64 // the lease's deadline; the lock-delay's end once delayed
	owner    string
	// delayed: the lease expired and the lock has a lock-delay. Its place
	// stays taken (a permit of a semaphore, a reader that blocks writers)
	// until deadline, but it is no lease: VERIFY and RELEASE ignore it.
	delayed bool
	// renewals counts the lease's renewals (replicated mode's Due.Renewals).
	renewals uint32
	since    int64 // the grant's stamp (metrics.go), for the hold time
}

// holderSet is the leases of one lock, in grant order.
type holderSet struct {
	items []holder
	live  int // items not delayed
	// byOwner maps each owner with a live lease to its token, once the set
	// has grown past ownerIndexFrom items; nil before.
	byOwner map[string]uint64
}

// ownerIndexFrom is the size of a holder set above which looking an owner
// up by a scan costs more than keeping an index of owners.
const ownerIndexFrom = 32

// forget takes h's owner out of the owner index, as h's lease ends.
func (hs *holderSet) forget(h *holder) {
	if hs.byOwner != nil && h.owner != "" && hs.byOwner[h.owner] == h.token {
		delete(hs.byOwner, h.owner)
	}
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
func (s *shard) grantable(i uint32, mode Mode) bool {
	e := s.at(i)
	switch {
	case e.flags&(flagHeld|flagDelayed) != 0:
		return false // an exclusive lease, or the lock-delay after one
	case e.flags&flagSemaphore != 0:
		hs := s.holders(i)
		return hs == nil || len(hs.items) < s.limit(i)
	case e.flags&flagMulti != 0:
		return mode == Shared // read-held: readers join, a writer waits for all to leave
	}
	return true
}

// grantMode gives entry i a lease of the mode asked for: a holder-set lease
// for a reader or a semaphore's permit, the entry's own otherwise.
func (s *shard) grantMode(i uint32, now, ttl int64, owner []byte, mode Mode) uint64 {
	if mode == Shared || s.at(i).flags&flagSemaphore != 0 {
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
	e.token = s.nextToken(i)
	h := holder{token: e.token, deadline: now + ttl, owner: string(owner), since: stamp(now)}
	s.journal(ChangeGrant, i, h.token, h.deadline, owner, e.flags&flagSemaphore == 0)
	hs.items = append(hs.items, h)
	hs.live++
	if hs.byOwner != nil && h.owner != "" {
		hs.byOwner[h.owner] = h.token
	}
	s.countHolder(i, 1)
	s.counts.granted.Add(1)
	s.emitHolder(EventAcquired, i, &hs.items[len(hs.items)-1], 0)
	if len(hs.items) == 1 {
		s.scheduleHolders(i) // a new set: the entry's deadline is stale
	} else {
		s.lowerHoldersDeadline(i, h.deadline)
	}
	return h.token
}

// liveHolder returns the position in entry i's holder set of the live lease
// with token, or -1.
func (s *shard) liveHolder(i uint32, token uint64) int {
	if hs := s.holders(i); hs != nil {
		n, found := slices.BinarySearchFunc(hs.items, token, func(h holder, t uint64) int { return cmp.Compare(h.token, t) })
		if found && !hs.items[n].delayed {
			return n
		}
	}
	return -1
}

// ownersHolder returns the position of owner's live lease in entry i's
// holder set, or -1.
func (s *shard) ownersHolder(i uint32, owner []byte) int {
	hs := s.holders(i)
	switch {
	case hs == nil:
		return -1
	case hs.byOwner == nil && len(hs.items) > ownerIndexFrom:
		hs.byOwner = make(map[string]uint64, len(hs.items))
		for n := range hs.items {
			if h := &hs.items[n]; h.owner != "" && !h.delayed {
				hs.byOwner[h.owner] = h.token
			}
		}
	case hs.byOwner == nil:
		for n := range hs.items {
			if h := &hs.items[n]; h.owner == string(owner) && !h.delayed {
				return n
			}
		}
		return -1
	}
	token, ok := hs.byOwner[string(owner)]
	if !ok {
		return -1
	}
	return s.liveHolder(i, token)
}

// renewHolder moves the deadline of the n-th lease of entry i.
func (s *shard) renewHolder(i uint32, n int, now, ttl int64) {
	h := &s.holders(i).items[n]
	h.deadline = now + ttl
	h.renewals++
	s.journal(ChangeExtend, i, h.token, h.deadline, nil, false)
	s.counts.renewed.Add(1)
	s.emitHolder(EventExtended, i, h, 0)
	s.lowerHoldersDeadline(i, h.deadline)
}

// releaseHolder ends the n-th lease of entry i, as its holder asked at now.
func (s *shard) releaseHolder(i uint32, n int, now int64) {
	hs := s.holders(i)
	s.counts.released.Add(1)
	s.journal(ChangeRelease, i, hs.items[n].token, 0, nil, false)
	s.emitHolder(EventReleased, i, &hs.items[n], s.leaseEnded(hs.items[n].since, now))
	hs.forget(&hs.items[n])
	s.countHolder(i, -1)
	s.dropHolder(i, n)
	hs.live--
	if len(hs.items) == 0 {
		s.scheduleHolders(i) // forgets the set
	}
}

// dropHolder removes the n-th item of entry i's holder set, keeping the
// order of the rest (grant order, which STATUS lists and liveHolder
// searches). The oldest, the usual one to go, leaves without a copy.
func (s *shard) dropHolder(i uint32, n int) {
	hs := s.holderSets[i]
	if n == 0 {
		hs.items[0] = holder{}
		hs.items = hs.items[1:]
		return
	}
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
	kept := hs.items[:0] // compacted in place, in one pass
	for n := range hs.items {
		h := hs.items[n]
		if !h.delayed && h.deadline <= now {
			s.counts.expired.Add(1)
			s.emitHolder(EventExpired, i, &h, s.leaseEnded(h.since, h.deadline))
			hs.forget(&h)
			s.countHolder(i, -1)
			hs.live--
			if delay > 0 {
				h.delayed = true
				h.deadline += delay // from the deadline, as for an exclusive lease
				h.owner = ""
				s.counts.delayed.Add(1)
			}
		}
		if h.deadline > now {
			kept = append(kept, h)
		}
	}
	clear(hs.items[len(kept):]) // the backing array must not pin owners
	hs.items = kept
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

// lowerHoldersDeadline moves entry i's deadline, which bounds its holder
// set's earliest, to d if d comes first: d is a holder's new deadline.
func (s *shard) lowerHoldersDeadline(i uint32, d int64) {
	if e := s.at(i); d < e.deadline {
		e.deadline = d
		s.wheel.schedule(i, s.wheelDue(i))
	}
}

// forceHolders ends the lease token of entry i's holder set, or every lease
// with AllLeases, live or serving a lock-delay, for ForceRelease at now. It
// returns how many it ended.
func (s *shard) forceHolders(i uint32, token uint64, now int64) int {
	hs := s.holders(i)
	ended := 0
	kept := hs.items[:0] // compacted in place, in one pass
	for n := range hs.items {
		h := hs.items[n]
		if token != AllLeases && h.token != token {
			kept = append(kept, h)
			continue
		}
		s.journal(ChangeRelease, i, h.token, 0, nil, false)
		var held time.Duration
		if !h.delayed {
			held = s.leaseEnded(h.since, now)
		}
		s.emitHolder(EventForced, i, &h, held)
		if !h.delayed {
			hs.forget(&h)
			s.countHolder(i, -1)
			hs.live--
		}
		ended++
	}
	clear(hs.items[len(kept):]) // the backing array must not pin owners
	hs.items = kept
	if ended > 0 {
		s.scheduleHolders(i) // forgets the set once it is empty
	}
	return ended
}
