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

// MultiWait is an AcquireAllWait request that is willing to wait. The caller
// fills in the exported fields and must not change them while the request is
// in progress. One goroutine at a time drives it: AcquireAllWait, then
// ContinueAll after each Notify, or CancelAll.
type MultiWait struct {
	TTL      time.Duration // every lease's ttl once all are granted; required
	Owner    []byte        // as Acquire's owner, on every lease
	Priority int           // in each lock's queue
	Shared   bool          // read leases
	// Wait is how long the caller waits at most; the keys taken on the way
	// are held for TTL+Wait.
	Wait time.Duration
	// Notify is called, on whatever goroutine granted the key the request
	// was waiting for and with no lock of the table held, when the request
	// can move on: the caller must then call ContinueAll. It must not block.
	Notify func()

	keys   [][]byte // copies, in taking order
	order  []int    // order[j] is the caller's position of keys[j]
	tokens []uint64 // tokens[j] for j < next
	next   int      // keys[:next] are held
	cur    *Wait    // the queue the request stands in, for keys[next]
	done   bool
}

// AcquireAll grants a lease on every key, all or none, and returns the
// tokens in the order of keys; ok=false when some key is held by someone
// else or has requests queued for it. ttl is required: a lock's default ttl
// does not apply. Keys must be distinct. As with Acquire, an owner's own
// live leases are renewed and their tokens returned again.
func (t *Table) AcquireAll(keys [][]byte, ttl time.Duration, owner []byte, shared bool) (tokens []uint64, ok bool, err error) {
	if err := t.checkAll(keys, ttl, owner); err != nil {
		return nil, false, err
	}
	return t.acquireAllAtOnce(keys, ttl, owner, shared)
}

// AcquireAllWait is AcquireAll for a request that is willing to wait. When
// the keys cannot all be granted at once, it starts taking them one by one
// (see the package's notes on multi-locks) and returns done=false:
// mw.Notify then reports progress, and ContinueAll carries on. done=true
// with tokens is a grant; done=true without tokens means the request ended
// ungranted.
func (t *Table) AcquireAllWait(keys [][]byte, mw *MultiWait) (tokens []uint64, done bool, err error) {
	if err := t.checkAll(keys, mw.TTL, mw.Owner); err != nil {
		return nil, true, err
	}
	tokens, ok, err := t.acquireAllAtOnce(keys, mw.TTL, mw.Owner, mw.Shared)
	if ok || err != nil {
		return tokens, true, err
	}
	mw.Owner = bytes.Clone(mw.Owner) // may alias a network buffer
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
	tokens, done, err = t.advanceAll(mw)
	return tokens, done, err
}

// ContinueAll carries on with mw after its Notify: it takes the key it was
// waiting for and the next ones, until it has all (done, with the tokens in
// the caller's order of keys), must wait again (not done), or has lost its
// place (done, no tokens): the owner's retry took it over, or a lease taken
// on the way was lost.
func (t *Table) ContinueAll(mw *MultiWait) (tokens []uint64, done bool) {
	if mw.done {
		return nil, true
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
		return nil, true
	}
	mw.tokens[mw.next] = token
	mw.next++
	mw.cur = nil
	tokens, done, _ = t.advanceAll(mw)
	return tokens, done
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

// checkAll checks AcquireAll's arguments.
func (t *Table) checkAll(keys [][]byte, ttl time.Duration, owner []byte) error {
	if err := t.checkTTL(ttl); err != nil {
		return err
	}
	if len(owner) > t.cfg.MaxKeyLen {
		return ErrOwnerTooLong
	}
	for _, k := range keys {
		if err := t.CheckKey(k); err != nil {
			return err
		}
	}
	return nil
}

// acquireAllAtOnce is the atomic attempt: every shard involved is locked, in
// shard order (so that two attempts cannot deadlock on the mutexes), every
// key is checked, and then all are granted or none.
func (t *Table) acquireAllAtOnce(keys [][]byte, ttl time.Duration, owner []byte, shared bool) ([]uint64, bool, error) {
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
	now := int64(t.cfg.Clock.Now())
	// Check every key before granting any.
	for _, p := range places {
		s := t.shards[p.shard]
		i := s.find(p.h, p.key, now)
		switch {
		case i == 0 && t.cfg.RequireCreate:
			return nil, false, &KeyError{Key: string(p.key), Err: ErrNoSuchLock}
		case i == 0:
			continue
		case shared && s.at(i).flags&flagSemaphore != 0:
			return nil, false, &KeyError{Key: string(p.key), Err: ErrSharedSemaphore}
		}
		if len(owner) > 0 {
			if n, err := s.ownersLease(i, owner, shared); err != nil {
				return nil, false, err
			} else if n != noLease {
				continue
			}
		}
		if s.waiterCount(i) > 0 || !s.grantable(i, shared) {
			return nil, false, nil
		}
	}
	tokens := make([]uint64, len(keys))
	for _, p := range places {
		s := t.shards[p.shard]
		i := s.lookup(p.h, p.key)
		if i == 0 {
			i = s.insert(p.h, p.key)
		} else if len(owner) > 0 {
			if n, _ := s.ownersLease(i, owner, shared); n != noLease {
				tokens[p.at] = s.renewLease(i, n, now, int64(ttl))
				continue
			}
		}
		tokens[p.at] = s.grantMode(i, now, int64(ttl), owner, shared)
	}
	return tokens, true, nil
}

// advanceAll takes mw's keys from mw.next on, one at a time, until it must
// wait for one or has them all.
func (t *Table) advanceAll(mw *MultiWait) (tokens []uint64, done bool, err error) {
	hold := mw.TTL + mw.Wait
	for mw.next < len(mw.keys) {
		w := &Wait{TTL: hold, Priority: mw.Priority, Shared: mw.Shared, Notify: func(uint64) { mw.Notify() }}
		token, ok, err := t.take(mw.keys[mw.next], hold, mw.Owner, mw.Shared, w)
		switch {
		case err != nil: // the lock was deleted meanwhile, under --require-create
			mw.done = true
			t.releaseTaken(mw)
			return nil, true, err
		case !ok:
			mw.cur = w
			return nil, false, nil
		}
		mw.tokens[mw.next] = token
		mw.next++
	}
	mw.done = true
	// All held: each lease now runs for TTL from here, not TTL+Wait.
	for j, key := range mw.keys {
		ok, _ := t.Extend(key, mw.tokens[j], mw.TTL)
		if !ok {
			// Lost on the way (a clock that jumped past TTL+Wait): all or none.
			t.releaseTaken(mw)
			return nil, true, nil
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
