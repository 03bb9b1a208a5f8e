package locker

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/keyslot"
)

// Replicated mode (Config.Replicated): see the package doc. This file holds
// its token counters and the leader's and every replica's side of expiry:
// CollectDue and Fire.

// DueKind names what a Due item would end.
type DueKind uint8

// The kinds of Due items.
const (
	// DueLease is a lease (exclusive, a reader, or a semaphore's permit)
	// whose deadline has passed.
	DueLease DueKind = iota + 1
	// DueDelay is a lock-delay whose end has passed.
	DueDelay
	// DueWait is a waiting request past its deadline, as the state machine
	// above the table names it (lockfsm: Key is the waiter's id, Token the
	// wait's number). The table neither collects nor fires it: waits are
	// timed by their callers, and a replicated table's waits by its state
	// machine.
	DueWait
)

// String returns "lease" or "delay".
func (k DueKind) String() string {
	switch k {
	case DueLease:
		return "lease"
	case DueDelay:
		return "delay"
	case DueWait:
		return "wait"
	}
	return fmt.Sprintf("DueKind(%d)", uint8(k))
}

// Due is one thing CollectDue found due and Fire ends.
type Due struct {
	Kind DueKind
	Key  string
	// Token is the lease's token; for DueDelay, the token of the lease
	// whose expiry began the delay.
	Token uint64
	// Renewals is how many times the lease had been renewed (Extend, or
	// its owner's repeated acquire) when it was collected; 0 for DueDelay.
	// Fire skips a lease renewed since: the renewal was applied after the
	// leader saw the lease due, and moved its deadline.
	Renewals uint32
}

// DueRetry is how long CollectDue waits before it returns an item again
// that is still due: its proposal may have been lost.
const DueRetry = time.Second

// slotTokens are replicated mode's token counters, one per key slot, shared
// by every shard (keys of one slot may fall in different shards).
type slotTokens struct {
	floor    atomic.Uint64 // every token is above it
	counters [keyslot.Slots]atomic.Uint64
}

// next returns slot's next token: max(counter, floor)+1.
func (st *slotTokens) next(slot uint16) uint64 {
	c := &st.counters[slot]
	for {
		cur := c.Load()
		n := max(cur, st.floor.Load()) + 1
		if c.CompareAndSwap(cur, n) {
			return n
		}
	}
}

// raise makes slot's counter at least token.
func (st *slotTokens) raise(slot uint16, token uint64) { raiseTo(&st.counters[slot], token) }

func raiseTo(v *atomic.Uint64, to uint64) {
	for {
		cur := v.Load()
		if cur >= to || v.CompareAndSwap(cur, to) {
			return
		}
	}
}

// RaiseTokenFloor makes every token granted from now on greater than floor,
// as Config.FirstToken does at New; a lower floor than the table's changes
// nothing. A replicated table's state machine applies a new leader's floor
// (say, BootEpochToken of its wall clock) at the start of each term. In the
// default mode it raises every shard's counter.
func (t *Table) RaiseTokenFloor(floor uint64) {
	if t.tokens != nil {
		raiseTo(&t.tokens.floor, floor)
		return
	}
	for _, s := range t.shards {
		s.mu.Lock()
		s.lastToken = max(s.lastToken, floor)
		s.mu.Unlock()
	}
}

// TokenState returns what a replicated table's next tokens depend on, for a
// snapshot beside Dump: the floor, and the counter of every key slot
// (keyslot.Slots of them, 0 for a slot that granted nothing). In the
// default mode it returns the highest shard counter and no counters.
func (t *Table) TokenState() (floor uint64, counters []uint64) {
	if t.tokens == nil {
		for _, s := range t.shards {
			s.mu.Lock()
			floor = max(floor, s.lastToken)
			s.mu.Unlock()
		}
		return floor, nil
	}
	counters = make([]uint64, keyslot.Slots)
	for n := range counters {
		counters[n] = t.tokens.counters[n].Load()
	}
	return t.tokens.floor.Load(), counters
}

// RestoreTokenState installs what TokenState returned, so that a table
// restored from a snapshot (Restore of each lock Dump reported, in either
// order) issues the same next tokens as the one it was taken from. Floor and
// counters only rise: a value below the table's is ignored. In the default
// mode counters must be nil and floor raises every shard's counter.
func (t *Table) RestoreTokenState(floor uint64, counters []uint64) error {
	if t.tokens == nil {
		if counters != nil {
			return fmt.Errorf("%w: slot counters, but the table is not replicated", ErrTokenState)
		}
		t.RaiseTokenFloor(floor)
		return nil
	}
	if len(counters) != keyslot.Slots {
		return fmt.Errorf("%w: %d slot counters, want %d", ErrTokenState, len(counters), keyslot.Slots)
	}
	t.RaiseTokenFloor(floor)
	for n, c := range counters {
		t.tokens.raise(uint16(n), c)
	}
	return nil
}

// noRoom is collectEntry's next look at an entry whose due items did not
// all fit: at once, from the shard's backlog.
const noRoom = -1 << 63

// collectKey names one item CollectDue returned, to hold it back for
// DueRetry: the entry, the lease's token and the kind.
type collectKey struct {
	entry uint32
	token uint64
	kind  DueKind
}

// CollectDue returns up to limit items whose time has passed by the Clock:
// leases past their deadline and lock-delays past their end. It changes no
// lock: a leader proposes the items through its log, and every replica
// applies them with Fire. An item is returned at most once per DueRetry,
// and again after that while it is still due (its proposal may have been
// lost). The work of a call is bounded by limit and the timer wheel's batch,
// not by the number of locks. Only a replicated table's leader calls it
// (from one goroutine at a time), every tick or so; a table that never
// calls it keeps no state for it. In the default mode it returns nothing:
// the table expires leases itself.
func (t *Table) CollectDue(limit int) []Due {
	if t.tokens == nil || limit <= 0 {
		return nil
	}
	t.collectMu.Lock()
	defer t.collectMu.Unlock()
	var out []Due
	n := len(t.shards)
	for k := 0; k < n && len(out) < limit; k++ {
		// Start where the last call stopped, so that a busy shard cannot
		// starve the others of the room in a reply.
		si := (t.collectFrom + k) % n
		s := t.shards[si]
		upTo := int64(t.cfg.Clock.Now())
		for {
			s.mu.Lock()
			var done bool
			out, done = s.collectDue(upTo, max(upTo, int64(t.cfg.Clock.Now())), limit, out)
			t.unlock(s)
			if done || len(out) >= limit {
				break
			}
		}
		if len(out) >= limit {
			t.collectFrom = si
		}
	}
	return out
}

// collectDue advances the shard's wheel towards upTo, appending what is due
// by now to out until it holds max items, moving at most expireBatch timers.
// It reports whether it reached upTo.
func (s *shard) collectDue(upTo, now int64, limit int, out []Due) ([]Due, bool) {
	if s.collected == nil {
		s.collected = make(map[collectKey]int64)
	}
	if now >= s.nextSweep {
		s.nextSweep = now + int64(DueRetry)
		for k, retry := range s.collected {
			if retry <= now {
				delete(s.collected, k)
			}
		}
	}
	for len(s.backlog) > 0 && len(out) < limit {
		i := s.backlog[0]
		s.backlog = s.backlog[1:]
		out = s.collectEntry(i, now, limit, out)
	}
	if len(out) >= limit {
		return out, false
	}
	budget := min(expireBatch, limit-len(out))
	done := s.wheel.advanceBudget(upTo/s.tick, budget, func(i uint32) {
		out = s.collectEntry(i, now, limit, out)
	})
	return out, done
}

// collectEntry appends entry i's due items to out, as room allows, and
// schedules its timer for when it must be looked at again: the next
// deadline, or the end of an item's DueRetry.
func (s *shard) collectEntry(i uint32, now int64, limit int, out []Due) []Due {
	e := s.at(i)
	if e.flags&(flagHeld|flagDelayed|flagMulti) == 0 {
		return out
	}
	next := int64(1<<63 - 1)
	look := func(token uint64, deadline int64, kind DueKind, renewals uint32) {
		if deadline > now {
			next = min(next, deadline)
			return
		}
		k := collectKey{entry: i, token: token, kind: kind}
		if retry, ok := s.collected[k]; ok && retry > now {
			next = min(next, retry)
			return
		}
		if len(out) >= limit {
			next = noRoom
			return
		}
		out = append(out, Due{Kind: kind, Key: string(s.key(e)), Token: token, Renewals: renewals})
		s.collected[k] = now + int64(DueRetry)
		next = min(next, now+int64(DueRetry))
	}
	switch {
	case e.flags&flagHeld != 0:
		look(e.token, e.deadline, DueLease, s.renewals[i])
	case e.flags&flagDelayed != 0:
		look(e.token, e.deadline, DueDelay, 0)
	}
	if hs := s.holders(i); hs != nil {
		for n := range hs.items {
			h := &hs.items[n]
			if h.delayed {
				look(h.token, h.deadline, DueDelay, 0)
			} else {
				look(h.token, h.deadline, DueLease, h.renewals)
			}
		}
	}
	switch next {
	case 1<<63 - 1:
	case noRoom:
		// The next call looks again first, whatever the clock says.
		s.backlog = append(s.backlog, i)
	default:
		s.wheel.schedule(i, ceilDiv(next, s.tick))
	}
	return out
}

// Fire ends each item that is still what it names, in order, and returns
// how many it ended. A DueLease ends the key's live lease with the item's
// token, if it has not been renewed since (Due.Renewals), as an expiry
// does: it counts as expired, EventExpired is published, and the lock's
// lock-delay, if it has one, begins; it runs from the later of the lease's
// deadline and now, so that it is never cut short by a late Fire. A
// DueDelay ends the lock-delay that followed the expiry of the lease with
// the item's token. Either way the lock is then handed to its waiters, as
// after Release. Items that no longer match (the lease was released,
// renewed, or ended and granted again) are skipped: a stale item never ends
// a newer lease. What is ended depends on the table's state only, never on
// the Clock. Items of another kind (DueWait) are skipped. Fire is for
// replicated tables, but works in the default mode too.
func (t *Table) Fire(items []Due) (fired int) {
	for n := range items {
		if t.fire(&items[n]) {
			fired++
		}
	}
	return fired
}

func (t *Table) fire(d *Due) bool {
	key := []byte(d.Key)
	if d.Kind != DueLease && d.Kind != DueDelay || t.CheckKey(key) != nil {
		return false
	}
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if i == 0 {
		return false
	}
	if !s.fireItem(i, d, now) {
		return false
	}
	if len(s.collected) > 0 {
		delete(s.collected, collectKey{entry: i, token: d.Token, kind: d.Kind})
	}
	s.handOff(i, now)
	s.removeIfUnused(i)
	return true
}

// fireItem ends what d names in entry i, if it still matches.
func (s *shard) fireItem(i uint32, d *Due, now int64) bool {
	e := s.at(i)
	switch {
	case d.Kind == DueLease && e.flags&flagHeld != 0:
		if e.token != d.Token || s.renewals[i] != d.Renewals {
			return false
		}
		deadline := e.deadline
		s.counts.expired.Add(1)
		s.emitEnd(EventExpired, i, deadline)
		s.endLease(i, deadline)
		if delay := s.lockDelay(i); delay > 0 {
			e.flags |= flagDelayed
			e.deadline = max(deadline, now) + delay
			s.counts.delayed.Add(1)
			s.wheel.schedule(i, s.wheelDue(i))
		}
		return true
	case d.Kind == DueDelay && e.flags&flagDelayed != 0:
		if e.token != d.Token {
			return false
		}
		e.flags &^= flagDelayed
		s.wheel.cancel(i)
		return true
	}
	n := s.findHolder(i, d.Token)
	if n < 0 {
		return false
	}
	hs := s.holders(i)
	h := &hs.items[n]
	switch {
	case d.Kind == DueLease && !h.delayed && h.renewals == d.Renewals:
		s.counts.expired.Add(1)
		s.emitHolder(EventExpired, i, h, s.leaseEnded(h.since, h.deadline))
		hs.forget(h)
		s.countHolder(i, -1)
		hs.live--
		if delay := s.lockDelay(i); delay > 0 {
			h.delayed = true
			h.deadline = max(h.deadline, now) + delay
			h.owner = ""
			s.counts.delayed.Add(1)
		} else {
			s.dropHolder(i, n)
		}
	case d.Kind == DueDelay && h.delayed:
		s.dropHolder(i, n)
	default:
		return false
	}
	s.scheduleHolders(i) // forgets the set once it is empty
	return true
}

// findHolder returns the position in entry i's holder set of the lease with
// token, live or serving its lock-delay, or -1.
func (s *shard) findHolder(i uint32, token uint64) int {
	if hs := s.holders(i); hs != nil {
		n, found := slices.BinarySearchFunc(hs.items, token, func(h holder, t uint64) int { return cmp.Compare(h.token, t) })
		if found {
			return n
		}
	}
	return -1
}
