package locker

import (
	"bytes"
	"slices"
	"time"
)

// Multi-lock: AcquireAll takes several locks, all or none.
//
// A first attempt is atomic: it locks every shard the keys fall in, in shard
// order, and grants every key only if every key can be granted without
// overtaking anyone queued. A request that may wait and could not be granted
// at once then takes the keys one by one in a single global order (sorted by
// key), waiting in each lock's fair queue in turn and holding the keys it has
// while it waits for the next. Since every multi-lock request takes its keys
// in the same order, no two can each hold a key the other waits for: there
// is no deadlock whatever order clients name the keys in. The keys taken on
// the way are held for TTL plus the whole wait, so none runs out before the
// last is granted; then all are renewed to TTL from that moment. A request
// that gives up releases what it took. Others see the keys taken on the way
// as held, by the request's owner if it named one: all or none is what the
// requester is told, not what every observer sees at every instant.

// MultiWait is the handle of one AcquireAllWait request that waits: given
// to AcquireAllWait with the Request, then to ContinueAll after each Notify,
// or to CancelAll if the caller gives up. One goroutine at a time drives
// it. The caller sets Notify before AcquireAllWait and must not change it
// while the request is in progress. A MultiWait is used for one request
// only.
type MultiWait struct {
	// Notify is called, on whatever goroutine granted the key the request
	// was waiting for and with no lock of the table held, when the request
	// can move on: the caller must then call ContinueAll. It must not block.
	Notify func()

	// The request's, copied by AcquireAllWait.
	ttl      time.Duration // every lease's once all are granted
	hold     time.Duration // each lease's while the rest are waited for: ttl plus the request's Wait
	owner    []byte
	priority int
	mode     Mode

	keys   [][]byte // copies, in taking order
	order  []int    // order[j] is the caller's position of keys[j]
	tokens []uint64 // tokens[j] for j < next
	next   int      // keys[:next] are held
	cur    *Wait    // the queue the request stands in, for keys[next]
	done   bool
	err    error // why ContinueAll ended the request, if an error did
}

// Err is the error that ended mw ungranted in ContinueAll, nil if none did:
// ErrTableFull when a key it reached after waiting would have been a new
// lock in a full table, ErrNoSuchLock when one was deleted meanwhile under
// Config.RequireCreate. What it took on the way was released.
func (mw *MultiWait) Err() error { return mw.err }

// AcquireAll grants a lease on every one of req.Keys, all or none, and
// returns the tokens in the order of the keys; granted=false when some key
// is held by someone else or has requests queued for it. req.TTL is
// required: a lock's default ttl does not apply. The keys must be distinct.
// As with Acquire, an owner's own live leases are renewed and their tokens
// returned again.
func (t *Table) AcquireAll(req *Request) (tokens []uint64, granted bool, err error) {
	if err := t.checkAll(req); err != nil {
		return nil, false, err
	}
	return t.acquireAllAtOnce(req)
}

// AcquireAllWait is AcquireAll for a request that is willing to wait. When
// the keys cannot all be granted at once, it starts taking them one by one
// (see the package's notes on multi-locks) and returns granted=false with
// mw.Waiting() true: mw.Notify then reports progress, and ContinueAll
// carries on. Not granted and not waiting, without an error, the request
// ended ungranted: a lease taken on the way was lost.
func (t *Table) AcquireAllWait(req *Request, mw *MultiWait) (tokens []uint64, granted bool, err error) {
	if err := t.checkAll(req); err != nil {
		mw.done = true
		return nil, false, err
	}
	tokens, granted, err = t.acquireAllAtOnce(req)
	if granted || err != nil {
		mw.done = true
		return tokens, granted, err
	}
	keys := req.Keys
	mw.ttl, mw.hold = req.TTL, req.TTL+req.Wait
	mw.owner = bytes.Clone(req.Owner) // may alias a network buffer
	mw.priority, mw.mode = req.Priority, req.Mode
	mw.order = make([]int, len(keys))
	for j := range mw.order {
		mw.order[j] = j
	}
	slices.SortFunc(mw.order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	mw.keys = make([][]byte, len(keys))
	for j, at := range mw.order {
		mw.keys[j] = bytes.Clone(keys[at])
	}
	mw.tokens = make([]uint64, len(keys))
	return t.advanceAll(mw)
}

// Waiting reports whether mw is still in progress, waiting in a lock's
// queue: its Notify is still to come. It is false once the request is
// granted, ended ungranted or cancelled.
func (mw *MultiWait) Waiting() bool { return !mw.done }

// ContinueAll carries on with mw after its Notify: it takes the key it was
// waiting for and the next ones, until it has all (granted, with the tokens
// in the order of the request's keys), must wait again (mw.Waiting()), or
// has lost its place (neither): the owner's retry took it over, a lease
// taken on the way was lost, or a key could not be taken (see Err).
func (t *Table) ContinueAll(mw *MultiWait) (tokens []uint64, granted bool) {
	if mw.done {
		return nil, false
	}
	w := mw.cur
	s := w.shard
	s.mu.Lock()
	state, token := w.state, w.token
	t.unlock(s)
	switch state {
	case waitQueued:
		return nil, false // not this request's turn yet
	case waitSuperseded:
		// The owner's retry stands in this request's place and holds the
		// keys it took (they are the owner's): nothing to release.
		mw.done = true
		return nil, false
	}
	mw.tokens[mw.next] = token
	mw.next++
	mw.cur = nil
	tokens, granted, mw.err = t.advanceAll(mw)
	return tokens, granted
}

// CancelAll ends mw ungranted, as when its wait times out or its connection
// closes: it leaves the queue it stands in and releases every key it took,
// including one handed to it since the last Notify.
func (t *Table) CancelAll(mw *MultiWait) {
	if mw.done {
		return
	}
	mw.done = true
	if w := mw.cur; w != nil {
		if token, granted := t.CancelWait(w); granted {
			mw.tokens[mw.next] = token
			mw.next++
		} else if w.state == waitSuperseded {
			return // as in ContinueAll: the keys are the retry's now
		}
	}
	t.releaseTaken(mw)
}

// checkAll checks AcquireAll's request.
func (t *Table) checkAll(req *Request) error {
	if err := t.checkTTL(req.TTL); err != nil {
		return err
	}
	if len(req.Owner) > t.cfg.MaxKeyLen {
		return ErrOwnerTooLong
	}
	for _, k := range req.Keys {
		if err := t.CheckKey(k); err != nil {
			return err
		}
	}
	return nil
}

// acquireAllAtOnce is the atomic attempt: every shard involved is locked, in
// shard order (so that two attempts cannot deadlock on the mutexes), every
// key is checked, and then all are granted or none.
func (t *Table) acquireAllAtOnce(req *Request) ([]uint64, bool, error) {
	keys, ttl, owner, mode := req.Keys, req.TTL, req.Owner, req.Mode
	renew := len(owner) > 0 && !req.NoRenew
	type place struct {
		h     uint32
		shard int
		key   []byte
		at    int // position in keys
	}
	places := make([]place, len(keys))
	for j, k := range keys {
		h, si := t.place(k)
		places[j] = place{h: h, shard: si, key: k, at: j}
	}
	if t.cfg.Replicated {
		// The duplicate named must not depend on the shards: the first in
		// key order.
		slices.SortFunc(places, func(a, b place) int { return bytes.Compare(a.key, b.key) })
		for j := 1; j < len(places); j++ {
			if bytes.Equal(places[j].key, places[j-1].key) {
				return nil, false, &KeyError{Key: string(places[j].key), Err: ErrDuplicateKey}
			}
		}
	}
	slices.SortFunc(places, func(a, b place) int {
		if a.shard != b.shard {
			return a.shard - b.shard
		}
		return bytes.Compare(a.key, b.key)
	})
	for j := 1; j < len(places); j++ {
		if bytes.Equal(places[j].key, places[j-1].key) {
			return nil, false, &KeyError{Key: string(places[j].key), Err: ErrDuplicateKey}
		}
	}
	var locked []*shard
	for _, p := range places {
		if s := t.shards[p.shard]; len(locked) == 0 || locked[len(locked)-1] != s {
			s.mu.Lock()
			locked = append(locked, s)
		}
	}
	defer func() {
		for _, s := range locked {
			t.unlock(s)
		}
	}()
	if t.cfg.Replicated {
		// Shard order is per replica: check (the first refusal is the
		// answer) and grant (keys of one slot share a token counter) in
		// the request's order, with every shard locked already.
		slices.SortFunc(places, func(a, b place) int { return a.at - b.at })
	}
	now := int64(t.cfg.Clock.Now())
	// Check every key before granting any.
	newLocks := 0
	for _, p := range places {
		s := t.shards[p.shard]
		i := s.find(p.h, p.key, now)
		switch {
		case i == 0 && t.cfg.RequireCreate:
			return nil, false, &KeyError{Key: string(p.key), Err: ErrNoSuchLock}
		case i == 0:
			newLocks++
			continue
		case mode == Shared && s.at(i).flags&flagSemaphore != 0:
			return nil, false, &KeyError{Key: string(p.key), Err: ErrSharedSemaphore}
		}
		if renew {
			if n, err := s.ownersLease(i, owner, mode); err != nil {
				return nil, false, err
			} else if n != noLease {
				continue
			}
		}
		if s.waiterCount(i) > 0 || !s.grantable(i, mode) {
			return nil, false, nil
		}
	}
	if newLocks > 0 {
		// All the places at once, or none, so that a refusal takes nothing.
		if err := t.shards[places[0].shard].claim(newLocks); err != nil {
			return nil, false, err
		}
	}
	tokens := make([]uint64, len(keys))
	for _, p := range places {
		s := t.shards[p.shard]
		i := s.lookup(p.h, p.key)
		if i == 0 {
			i = s.insert(p.h, p.key)
		} else if renew {
			if n, _ := s.ownersLease(i, owner, mode); n != noLease {
				tokens[p.at] = s.renewLease(i, n, now, int64(ttl))
				continue
			}
		}
		tokens[p.at] = s.grantMode(i, now, int64(ttl), owner, mode)
	}
	return tokens, true, nil
}

// advanceAll takes mw's keys from mw.next on, one at a time, until it must
// wait for one or has them all.
func (t *Table) advanceAll(mw *MultiWait) (tokens []uint64, granted bool, err error) {
	for mw.next < len(mw.keys) {
		w := &Wait{Notify: func(uint64) { mw.Notify() }, ttl: mw.hold, priority: mw.priority, mode: mw.mode}
		token, granted, err := t.take(mw.keys[mw.next], mw.hold, mw.owner, mw.mode, true, w)
		switch {
		case err != nil: // the lock was deleted meanwhile, under --require-create
			mw.done = true
			t.releaseTaken(mw)
			return nil, false, err
		case !granted:
			mw.cur = w
			return nil, false, nil
		}
		mw.tokens[mw.next] = token
		mw.next++
	}
	mw.done = true
	// All held: each lease now runs for TTL from here, not TTL+Wait.
	for j, key := range mw.keys {
		ok, _ := t.Extend(key, mw.tokens[j], mw.ttl)
		if !ok {
			// Lost on the way (a clock that jumped past TTL+Wait): all or none.
			t.releaseTaken(mw)
			return nil, false, nil
		}
	}
	tokens = make([]uint64, len(mw.keys))
	for j, at := range mw.order {
		tokens[at] = mw.tokens[j]
	}
	return tokens, true, nil
}

// releaseTaken releases the keys mw took on its way.
func (t *Table) releaseTaken(mw *MultiWait) {
	for j := range mw.next {
		t.Release(mw.keys[j], mw.tokens[j])
	}
	mw.next = 0
}

// MultiWaitState is a waiting MultiWait's progress, as a replicated table's
// snapshot keeps it (lockfsm): the keys it took and the one it stands in
// the queue of. The leases it took are the table's own, snapshotted with
// it; the queue it stands in is restored by RestoreQueue.
type MultiWaitState struct {
	Keys     [][]byte // in taking order (sorted)
	Order    []int    // Order[j] is the request's position of Keys[j]
	Tokens   []uint64 // the leases of Keys[:Next]
	Next     int      // Keys[:Next] are held; it waits for Keys[Next]
	TTL      time.Duration
	Hold     time.Duration // each lease's while the rest are waited for
	Owner    []byte
	Priority int
	Mode     Mode
}

// State returns mw's progress and the Wait it stands in the queue of
// Keys[Next] with (the handle Table.Queue reports), for a snapshot; nil if
// mw is not waiting.
func (mw *MultiWait) State() (MultiWaitState, *Wait) {
	if mw.done || mw.cur == nil {
		return MultiWaitState{}, nil
	}
	return MultiWaitState{
		Keys: mw.keys, Order: mw.order, Tokens: mw.tokens[:mw.next], Next: mw.next,
		TTL: mw.ttl, Hold: mw.hold, Owner: mw.owner, Priority: mw.priority, Mode: mw.mode,
	}, mw.cur
}

// Queued returns the Wait mw stands in a queue with, nil when it is not
// waiting. It changes each time ContinueAll takes a key and queues for the
// next.
func (mw *MultiWait) Queued() *Wait {
	if mw.done {
		return nil
	}
	return mw.cur
}

// RestoreMultiWait rebuilds a waiting MultiWait from st, with notify as its
// Notify, and returns it and the Wait to put in the queue of
// st.Keys[st.Next] (a QueuedWait for RestoreQueue, with st.Hold as its TTL).
// The state is checked for shape only; the leases it names must be the
// restored table's.
func RestoreMultiWait(st MultiWaitState, notify func()) (*MultiWait, *Wait, error) {
	n := len(st.Keys)
	if n == 0 || len(st.Order) != n || st.Next < 0 || st.Next >= n || len(st.Tokens) != st.Next {
		return nil, nil, ErrQueueState
	}
	seen := make([]bool, n)
	for _, at := range st.Order {
		if at < 0 || at >= n || seen[at] {
			return nil, nil, ErrQueueState
		}
		seen[at] = true
	}
	mw := &MultiWait{
		Notify: notify,
		ttl:    st.TTL, hold: st.Hold, owner: bytes.Clone(st.Owner), priority: st.Priority, mode: st.Mode,
		keys: make([][]byte, n), order: slices.Clone(st.Order), tokens: make([]uint64, n), next: st.Next,
	}
	for j, k := range st.Keys {
		mw.keys[j] = bytes.Clone(k)
	}
	copy(mw.tokens, st.Tokens)
	mw.cur = &Wait{Notify: func(uint64) { mw.Notify() }}
	return mw, mw.cur, nil
}
