package locker

import (
	"slices"
	"time"
)

// Leases named by their owner rather than their token: what Redis lock
// libraries do, whose lock is a key holding the owner's random value and
// whose unlock is "delete the key if it still holds my value". The server
// maps those libraries' commands and scripts to these.

// Owned is what an operation on an owner's lease found.
type Owned uint8

const (
	// NotHeld: the lock has no live lease (to Redis, the key does not
	// exist).
	NotHeld Owned = iota
	// HeldByOther: it has live leases, none of them the one asked for.
	HeldByOther
	// OwnedDone: the owner's lease was found, and released or extended.
	OwnedDone
)

// ReleaseOwned ends owner's live lease of key, exclusive or one of a holder
// set, if its owner begins with scope (see ReleaseScoped). A nil owner
// names every live lease in scope: Redis's DEL, which ends a lock whoever
// holds it. Waiters are then granted as after Release.
func (t *Table) ReleaseOwned(key, owner, scope []byte) Owned {
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if i == 0 || !s.live(i) {
		return NotHeld
	}
	done := false
	if e := s.at(i); e.flags&flagHeld != 0 && s.inScope(e, scope) && (owner == nil || s.ownerIs(e, owner)) {
		s.counts.released.Add(1)
		s.journal(ChangeRelease, i, e.token, 0, nil, false)
		s.emitEnd(EventReleased, i, now)
		s.endLease(i, now)
		done = true
	}
	if hs := s.holders(i); hs != nil {
		for n := len(hs.items) - 1; n >= 0; n-- {
			if s.holders(i) == nil {
				break // the last one gone, the set is forgotten
			}
			h := &hs.items[n]
			if !h.delayed && holderInScope(h.owner, scope) && (owner == nil || h.owner == string(owner)) {
				s.releaseHolder(i, n, now)
				done = true
				if owner != nil {
					break
				}
			}
		}
	}
	if !done {
		return HeldByOther
	}
	s.handOff(i, now)
	s.removeIfUnused(i)
	return OwnedDone
}

// ExtendOwned moves the deadline of owner's live lease of key (exclusive or
// one of a holder set, in scope) to now+ttl, or with add to its deadline
// +ttl. A nil owner names every live lease in scope: Redis's PEXPIRE. The
// new ttl must be in the table's range (ErrTTLRange).
func (t *Table) ExtendOwned(key, owner, scope []byte, ttl time.Duration, add bool) (Owned, error) {
	if !add {
		if err := t.checkTTL(ttl); err != nil {
			return NotHeld, err
		}
	}
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if i == 0 || !s.live(i) {
		return NotHeld, nil
	}
	// newTTL is a lease's ttl from now, checked before any lease moves.
	newTTL := func(deadline int64) (int64, error) {
		d := time.Duration(ttl)
		if add {
			d += time.Duration(max(deadline-now, 0))
		}
		return int64(d), t.checkTTL(d)
	}
	found := false
	if e := s.at(i); e.flags&flagHeld != 0 && s.inScope(e, scope) && (owner == nil || s.ownerIs(e, owner)) {
		d, err := newTTL(e.deadline)
		if err != nil {
			return HeldByOther, err
		}
		s.renew(i, now, d)
		found = true
	}
	if hs := s.holders(i); hs != nil {
		for n := range hs.items {
			h := &hs.items[n]
			if h.delayed || !holderInScope(h.owner, scope) || owner != nil && h.owner != string(owner) {
				continue
			}
			d, err := newTTL(h.deadline)
			if err != nil {
				return HeldByOther, err
			}
			s.renewHolder(i, n, now, d)
			found = true
			if owner != nil {
				break
			}
		}
	}
	if !found {
		return HeldByOther, nil
	}
	return OwnedDone, nil
}

// live reports whether settled entry i has a live lease: its own or one of
// its holder set's.
func (s *shard) live(i uint32) bool {
	if s.at(i).flags&flagHeld != 0 {
		return true
	}
	hs := s.holders(i)
	return hs != nil && hs.live > 0
}

// OwnedTTL reports what owner's live lease of key (exclusive or one of a
// holder set) has left: OwnedDone and the time, or NotHeld or HeldByOther.
func (t *Table) OwnedTTL(key, owner []byte) (Owned, time.Duration) {
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if i == 0 || !s.live(i) {
		return NotHeld, 0
	}
	if e := s.at(i); e.flags&flagHeld != 0 && s.ownerIs(e, owner) {
		return OwnedDone, time.Duration(max(e.deadline-now, 0))
	}
	if n := s.ownersHolder(i, owner); n >= 0 {
		return OwnedDone, time.Duration(max(s.holders(i).items[n].deadline-now, 0))
	}
	return HeldByOther, 0
}

// ExtendAllOwned moves the deadline of owner's live lease of every one of
// keys to now+ttl, all or none: if one key has no lease of owner's, none
// moves, and it returns what that key had (NotHeld or HeldByOther), the
// first such in the keys' order. Redis lock libraries extend a lock of
// several keys this way (redlock's extend script).
func (t *Table) ExtendAllOwned(keys [][]byte, owner []byte, ttl time.Duration) (Owned, error) {
	if err := t.checkTTL(ttl); err != nil {
		return NotHeld, err
	}
	type place struct {
		h     uint32
		shard int
		n     int // the owner's lease: entryLease or its place in the holder set
		i     uint32
	}
	places := make([]place, len(keys))
	order := make([]int, 0, len(keys)) // distinct shards, in locking order
	for j, k := range keys {
		places[j].h, places[j].shard = t.place(k)
		if !slices.Contains(order, places[j].shard) {
			order = append(order, places[j].shard)
		}
	}
	slices.Sort(order)
	for _, si := range order {
		t.shards[si].mu.Lock()
	}
	defer func() {
		for _, si := range order {
			t.unlock(t.shards[si])
		}
	}()
	now := int64(t.cfg.Clock.Now())
	// Checked in the keys' order, whatever the shards, so that every
	// replica gives the same answer.
	for j, k := range keys {
		p := &places[j]
		s := t.shards[p.shard]
		p.i = s.find(p.h, k, now)
		switch {
		case p.i == 0 || !s.live(p.i):
			return NotHeld, nil
		case s.at(p.i).flags&flagHeld != 0 && s.ownerIs(s.at(p.i), owner):
			p.n = entryLease
		default:
			if p.n = s.ownersHolder(p.i, owner); p.n < 0 {
				return HeldByOther, nil
			}
		}
	}
	for j := range keys {
		p := &places[j]
		s := t.shards[p.shard]
		if p.n == entryLease {
			s.renew(p.i, now, int64(ttl))
		} else {
			s.renewHolder(p.i, p.n, now, int64(ttl))
		}
	}
	return OwnedDone, nil
}
