package locker

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/keyslot"
)

// Journal receives the changes a restart must replay to rebuild the table,
// for a durable store to write down (the persist package). The table calls
// Change under a shard's lock, in the order the changes happen to each lock,
// so a journal keeps that order by buffering per shard; it must not block or
// call back into the table. Expiry is not journaled: deadlines are, and a
// replay expires what is past its deadline.
type Journal interface {
	// Change records c, which is valid only for the call.
	Change(shard int, c *Change)
	// ReserveTokens returns once a restart is sure to start its token
	// sequence above upTo: the table issues no token above a reservation.
	// It may block (on an fsync) and is called under a shard's lock, rarely.
	// A journal that has failed may return without that assurance; it must
	// then keep every reply that would show such a token from being sent
	// (the server commits before it replies, and a failed journal's commits
	// fail).
	ReserveTokens(upTo uint64)
}

// ChangeKind names a change to the table.
type ChangeKind uint8

// The changes a Journal receives.
const (
	ChangeCreate  ChangeKind = iota + 1 // Create, with the lock's settings
	ChangeDelete                        // Delete
	ChangeGrant                         // a lease granted: Token, Deadline, Owner, Shared
	ChangeExtend                        // a lease's deadline moved: Token, Deadline
	ChangeRelease                       // a lease released by its holder, or ended by ForceRelease (a lock-delay too): Token
)

// Change is one change to one lock.
type Change struct {
	Kind     ChangeKind
	Key      []byte
	Token    uint64
	Deadline int64 // the lease's deadline on the table's Clock, ns; for ChangeCreate, the time of the create
	Owner    []byte
	Shared   bool          // a read lease
	Options  CreateOptions // ChangeCreate's settings
}

// LockState is a lock as Dump reports it and Restore installs it.
type LockState struct {
	Key       []byte
	Created   bool
	Options   CreateOptions // a created lock's settings
	LastToken uint64
	// Leases are the live leases and the expired ones serving a
	// lock-delay. A live lease whose deadline has passed by the time it is
	// restored expires then, into its lock-delay from that deadline; in
	// replicated mode nothing expires, and such a lease waits for Fire.
	Leases []LeaseState
}

// LeaseState is one lease of a LockState.
type LeaseState struct {
	Token    uint64
	Deadline int64 // on the table's Clock, ns
	Owner    []byte
	Shared   bool
	// DelayedUntil, when not 0, says the lease has expired and its
	// lock-delay runs until then (on the table's Clock): it holds its
	// place, but it is no lease.
	DelayedUntil int64
	// Renewals counts a live lease's renewals, in replicated mode only
	// (see Due.Renewals); 0 otherwise.
	Renewals uint32
}

// TokenReserveChunk is how many tokens the table reserves at a time: a
// restart skips at most a few times this many, and a reservation (an fsync)
// is needed about once per this many grants.
const TokenReserveChunk = 1 << 20

// tokenBudget bounds the tokens the shards may issue to what the journal
// has reserved.
type tokenBudget struct {
	ceiling atomic.Uint64 // tokens up to ceiling may be issued
	mu      sync.Mutex    // serialises reservations
	journal Journal
}

// reserve blocks until token may be issued.
func (b *tokenBudget) reserve(token uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if token <= b.ceiling.Load() {
		return // another shard reserved past it meanwhile
	}
	next := token + TokenReserveChunk
	b.journal.ReserveTokens(next)
	b.ceiling.Store(next)
}

// nextToken is entry i's next token: the shard's next, within the
// journal's reservation, or in replicated mode its key slot's.
func (s *shard) nextToken(i uint32) uint64 {
	if s.tokens != nil {
		return s.tokens.next(keyslot.Of(s.key(s.at(i))))
	}
	s.lastToken++
	if s.budget != nil && s.lastToken > s.budget.ceiling.Load() {
		s.budget.reserve(s.lastToken)
	}
	return s.lastToken
}

// journal records a change to entry i, if the table has a journal.
func (s *shard) journal(kind ChangeKind, i uint32, token uint64, deadline int64, owner []byte, shared bool) {
	if s.journalTo == nil {
		return
	}
	// The shard's own Change, reused under its lock: one on the stack would
	// escape through the interface call and cost an allocation per change.
	c := &s.change
	*c = Change{Kind: kind, Key: s.key(s.at(i)), Token: token, Deadline: deadline, Owner: owner, Shared: shared}
	if kind == ChangeCreate {
		c.Options = s.options(i)
	}
	s.journalTo.Change(s.num, c)
	*c = Change{} // hold no key or owner past the call
}

// options returns the settings Create gave entry i.
func (s *shard) options(i uint32) CreateOptions {
	st, ok := s.settings[i]
	if !ok {
		return CreateOptions{}
	}
	o := CreateOptions{DefaultTTL: time.Duration(st.defaultTTL), Limit: int(st.limit)}
	if st.lockDelay != inheritDelay {
		o.LockDelay, o.LockDelaySet = time.Duration(st.lockDelay), true
	}
	return o
}

// Dump calls fn with the state of every lock, one shard at a time; fn runs
// with no lock held, so it may write to disk. A lock that exists for the
// whole dump is reported once; changes made meanwhile may or may not be
// seen, which a replay of the journal from before the dump makes good.
func (t *Table) Dump(fn func(*LockState)) {
	var states []LockState
	for _, s := range t.shards {
		// A slice of the shard per lock hold, as Scan does, so that a dump
		// of a large table stalls no shard for long.
		for i, done := uint32(1), false; !done; {
			now := int64(t.cfg.Clock.Now())
			s.mu.Lock()
			states = states[:0]
			for end := i + dumpSlice; i < end && i < s.top; i++ {
				if s.at(i).flags&flagLive == 0 || s.settle(i, now) == 0 {
					continue
				}
				states = append(states, s.state(i))
			}
			done = i >= s.top
			t.unlock(s)
			for n := range states {
				fn(&states[n])
			}
		}
	}
}

// dumpSlice is how many entry slots Dump examines per hold of a shard lock.
const dumpSlice = 1024

// state describes entry i for Dump.
func (s *shard) state(i uint32) LockState {
	e := s.at(i)
	st := LockState{Key: append([]byte(nil), s.key(e)...), Created: e.flags&flagCreated != 0, LastToken: e.token}
	if st.Created {
		st.Options = s.options(i)
	}
	switch {
	case e.flags&flagHeld != 0:
		l := LeaseState{Token: e.token, Deadline: e.deadline, Renewals: s.renewals[i]}
		if e.ownerLen > 0 {
			l.Owner = append([]byte(nil), s.strings.get(e.ownerRef, int(e.ownerLen))...)
		}
		st.Leases = append(st.Leases, l)
	case e.flags&flagDelayed != 0:
		st.Leases = append(st.Leases, LeaseState{Token: e.token, DelayedUntil: e.deadline})
	}
	if hs := s.holders(i); hs != nil {
		shared := e.flags&flagSemaphore == 0
		for _, h := range hs.items {
			l := LeaseState{Token: h.token, Deadline: h.deadline, Owner: []byte(h.owner), Shared: shared}
			switch {
			case h.delayed:
				l.Deadline, l.DelayedUntil = 0, h.deadline
			case s.replicated:
				l.Renewals = h.renewals
			}
			st.Leases = append(st.Leases, l)
		}
	}
	return st
}

// Restore installs a lock, as Dump reported it or a replay rebuilt it, into
// a table that does not have it; it journals nothing. Leases past their
// deadline expire at once, into their lock-delay if it has not ended, except
// in replicated mode, where they stay until Fire. Call it before the table
// serves requests.
func (t *Table) Restore(st *LockState) error {
	if err := t.CheckKey(st.Key); err != nil {
		return err
	}
	h, s := t.locate(st.Key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.lookup(h, st.Key)
	if i == 0 {
		// Never refused: restoring is not making new locks. OverMaxLocks
		// tells the caller if the table came back over its bound.
		if s.bound != nil {
			s.bound.locks.Add(1)
		}
		i = s.insert(h, st.Key)
	}
	e := s.at(i)
	if st.Created {
		s.makeCreated(i, settingsOf(st.Options))
	}
	e.token = max(e.token, st.LastToken)
	s.lastToken = max(s.lastToken, st.LastToken)
	if s.tokens != nil {
		// Without RestoreTokenState the lock's own tokens still only grow.
		slot := keyslot.Of(st.Key)
		s.tokens.raise(slot, st.LastToken)
		for _, l := range st.Leases {
			s.tokens.raise(slot, l.Token)
		}
	}
	for _, l := range st.Leases {
		if l.Shared || e.flags&flagSemaphore != 0 {
			if e.flags&(flagHeld|flagDelayed) != 0 {
				continue // a replay never mixes them; be safe if it did
			}
			hs := s.holders(i)
			if hs == nil {
				hs = &holderSet{}
				s.holderSets[i] = hs
				e.flags |= flagMulti
			}
			// Later grants must come after every restored holder, in token
			// order (liveHolder searches by it), whatever LastToken says.
			e.token = max(e.token, l.Token)
			s.lastToken = max(s.lastToken, l.Token)
			h := holder{token: l.Token, deadline: l.Deadline, owner: string(l.Owner), renewals: l.Renewals}
			if l.DelayedUntil != 0 {
				h = holder{token: l.Token, deadline: l.DelayedUntil, delayed: true}
			} else {
				hs.live++
				s.countHolder(i, 1)
			}
			hs.items = append(hs.items, h)
			continue
		}
		if e.flags&(flagHeld|flagDelayed|flagMulti) != 0 {
			continue
		}
		e.token = l.Token
		if l.DelayedUntil != 0 {
			e.flags |= flagDelayed
			e.deadline = l.DelayedUntil
			s.wheel.schedule(i, s.wheelDue(i))
			continue
		}
		e.flags |= flagHeld
		e.deadline = l.Deadline
		if s.replicated && l.Renewals > 0 {
			s.renewals[i] = l.Renewals
		}
		if len(l.Owner) > 0 {
			e.ownerRef = s.putString(l.Owner)
			e.ownerLen = uint16(len(l.Owner))
		}
		s.counts.held.Add(1)
		s.wheel.schedule(i, s.wheelDue(i))
	}
	if hs := s.holders(i); hs != nil {
		// Grant order is token order, which liveHolder searches by; a
		// rebuilt state need not list them so.
		slices.SortFunc(hs.items, func(a, b holder) int { return cmp.Compare(a.token, b.token) })
		s.scheduleHolders(i)
	}
	s.settle(i, now)
	return nil
}
