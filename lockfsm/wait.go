package lockfsm

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// Waits (OpWait) queue in the lock table's own queues (locker.AcquireWait):
// the table hands a freed lock to the head of its queue inside the call
// that freed it, so every replica grants the same waiter the same token
// within the same entry. The FSM keeps, beside the table, what it needs to
// name those waits across nodes: each queued wait by its Waiter id, the
// grants made from the queues (for an OpCancelWait that comes too late),
// and each queued wait's soft deadline, which the leader collects (as it
// collects leases) and proposes in an OpFire.

// ErrWaiterExists is the result of an OpWait whose Waiter is queued
// already: waiter ids must be unique among queued waits.
var ErrWaiterExists = errors.New("lockfsm: a wait with this waiter id is queued already")

// MaxGrants bounds how many grants made from the queues the FSM remembers
// for OpCancelWait. Past it the oldest is forgotten: a cancel that comes
// later finds nothing to release, and the lease runs out by its ttl.
const MaxGrants = 1 << 16

// maxWait bounds a wait's deadline, so that no Wait overflows the clock;
// the server refuses a WAIT over max-ttl long before.
const maxWait = 100 * 365 * 24 * time.Hour

// wait is a queued OpWait or OpWaitAll.
type wait struct {
	waiter   string
	key      []byte // the key whose queue it stands in
	number   uint64 // the wait's place among all waits queued, in log order
	handle   *locker.Wait
	deadline int64 // soft: this replica's clock at apply plus Wait

	// An OpWaitAll's: its progress, which moves handle and key from queue
	// to queue as it takes its keys, and its keys in the request's order.
	multi *locker.MultiWait
	keys  [][]byte

	// Guarded by waits.dueMu.
	retry int64 // collectDue reports it again no earlier than this
	at    int   // its index in the due heap
}

// grant is a wait granted from its queue, kept for an OpCancelWait: one
// lease, or an OpWaitAll's, one per key.
type grant struct {
	keys   [][]byte
	tokens []uint64
}

// lease names a lease: its key and token.
type lease struct {
	key   string
	token uint64
}

// note is an OnGrant call to make once the command is applied.
type note struct {
	waiter, key []byte   // key: the one an OpWaitAll's wait last stood in the queue of
	tokens      []uint64 // nil: ended ungranted
}

// waits are the FSM's queued waits and grants. Only the applying goroutine
// touches them, but for the due heap, which the leader's duties read.
type waits struct {
	queued    map[string]*wait // by waiter id
	byHandle  map[*locker.Wait]*wait
	number    uint64 // the last wait's number
	grants    *ordered[grant]
	byLease   map[lease]*item[grant] // grants by their lease, for claim
	maxGrants int
	notes     []note
	moved     []*wait // OpWaitAll's waits whose Notify came: ContinueAll them (continueAll)

	dueMu sync.Mutex // guards due, and each wait's retry and at
	due   dueHeap
}

func newWaits() *waits {
	return &waits{
		queued:    make(map[string]*wait),
		byHandle:  make(map[*locker.Wait]*wait),
		grants:    newOrdered[grant](),
		byLease:   make(map[lease]*item[grant]),
		maxGrants: MaxGrants,
	}
}

// newWait returns a wait whose handle reports to ws.
func (ws *waits) newWait(waiter, key []byte) *wait {
	w := &wait{waiter: string(waiter), key: bytes.Clone(key), at: -1}
	w.handle = &locker.Wait{Notify: func(token uint64) { ws.ended(w, token) }}
	return w
}

// newMultiWait returns an OpWaitAll's wait for keys, whose progress reports
// to ws; its handle and key are set once it queues.
func (ws *waits) newMultiWait(waiter []byte, keys [][]byte) *wait {
	w := &wait{waiter: string(waiter), at: -1, keys: make([][]byte, len(keys))}
	for j, k := range keys {
		w.keys[j] = bytes.Clone(k)
	}
	w.multi = &locker.MultiWait{Notify: func() { ws.moved = append(ws.moved, w) }}
	return w
}

// queuedAt points w, an OpWaitAll's, at the queue its progress stands in.
func (w *wait) queuedAt() {
	st, handle := w.multi.State()
	w.handle, w.key = handle, st.Keys[st.Next]
}

// add registers w, queued.
func (ws *waits) add(w *wait) {
	ws.queued[w.waiter] = w
	ws.byHandle[w.handle] = w
	ws.dueMu.Lock()
	heap.Push(&ws.due, w)
	ws.dueMu.Unlock()
}

// forget unregisters w, which is no longer queued.
func (ws *waits) forget(w *wait) {
	delete(ws.queued, w.waiter)
	delete(ws.byHandle, w.handle)
	ws.dueMu.Lock()
	if w.at >= 0 {
		heap.Remove(&ws.due, w.at)
	}
	ws.dueMu.Unlock()
}

// ended is w's Notify: the table granted it token, or 0 when a request of
// the same owner took its place.
func (ws *waits) ended(w *wait, token uint64) {
	ws.forget(w)
	if token == 0 {
		ws.notes = append(ws.notes, note{waiter: []byte(w.waiter), key: w.key})
		return
	}
	tokens := []uint64{token}
	ws.putGrant([]byte(w.waiter), grant{keys: [][]byte{w.key}, tokens: tokens})
	ws.notes = append(ws.notes, note{waiter: []byte(w.waiter), key: w.key, tokens: tokens})
}

// continueAll carries on with the OpWaitAll waits whose Notify came while
// the command was applied, in the order it came (alike on every replica),
// until none is left: a wait's progress may free a lock, and so move
// another.
func (ws *waits) continueAll(t *locker.Table) {
	for len(ws.moved) > 0 {
		w := ws.moved[0]
		ws.moved = ws.moved[1:]
		if ws.queued[w.waiter] != w {
			continue // ended since: cancelled, or past its deadline
		}
		tokens, granted := t.ContinueAll(w.multi)
		switch {
		case granted:
			ws.forget(w)
			ws.putGrant([]byte(w.waiter), grant{keys: w.keys, tokens: tokens})
			ws.notes = append(ws.notes, note{waiter: []byte(w.waiter), key: w.key, tokens: tokens})
		case w.multi.Waiting():
			if w.multi.Queued() != w.handle {
				delete(ws.byHandle, w.handle)
				w.queuedAt()
				ws.byHandle[w.handle] = w
			}
		default:
			// Ended ungranted: its owner's later request took its place, or
			// a key it took was lost, or one could not be taken.
			ws.forget(w)
			ws.notes = append(ws.notes, note{waiter: []byte(w.waiter), key: w.key})
		}
	}
	ws.moved = ws.moved[:0]
}

// putGrant records a grant made from a queue to waiter, forgetting the
// oldest past maxGrants.
func (ws *waits) putGrant(waiter []byte, g grant) {
	if it := ws.grants.get(waiter); it != nil {
		ws.removeGrant(it)
	}
	it := ws.grants.put(waiter, g)
	for j, key := range g.keys {
		ws.byLease[lease{string(key), g.tokens[j]}] = it
	}
	for ws.grants.len() > ws.maxGrants {
		ws.removeGrant(ws.grants.front())
	}
}

func (ws *waits) removeGrant(it *item[grant]) {
	for j, key := range it.val.keys {
		delete(ws.byLease, lease{string(key), it.val.tokens[j]})
	}
	ws.grants.remove(it)
}

// claim forgets the grant of the lease (key, token), if one is recorded: a
// request of its owner (an OWNER's retry of a WAIT whose answer was lost,
// through any node) was just answered with that lease, so the lease is no
// longer the abandoned wait's to give back. Without this, the first wait's
// OpCancelWait, which comes when its node gives up on its client, would
// release the lease the retry holds (chaos finding 1: a third permit of a
// LIMIT 2 semaphore).
func (ws *waits) claim(key []byte, token uint64) {
	if len(ws.byLease) == 0 {
		return
	}
	if it := ws.byLease[lease{string(key), token}]; it != nil {
		ws.removeGrant(it)
	}
}

// claimAll claims the leases of keys with tokens, a MACQUIRE's (claim).
func (ws *waits) claimAll(keys [][]byte, tokens []uint64) {
	for j, k := range keys {
		ws.claim(k, tokens[j])
	}
}

// dropNotes forgets the notes of waiter not yet made.
func (ws *waits) dropNotes(waiter []byte) {
	ws.notes = slices.DeleteFunc(ws.notes, func(n note) bool { return bytes.Equal(n.waiter, waiter) })
}

// takeWaiterID checks the waiter id of a new wait: given, and not queued
// already. A grant recorded under it is forgotten: the id is used again, so
// its old grant was answered.
func (ws *waits) takeWaiterID(waiter []byte) error {
	if len(waiter) == 0 {
		return fmt.Errorf("%w: a WAIT without a waiter id", ErrBadEntry)
	}
	if ws.queued[string(waiter)] != nil {
		return ErrWaiterExists
	}
	if it := ws.grants.get(waiter); it != nil {
		ws.removeGrant(it)
	}
	return nil
}

// applyWait applies an OpWait.
func (f *FSM) applyWait(t *locker.Table, c *Command) (r Result) {
	req := &locker.Request{Key: c.Key, TTL: c.TTL, Owner: c.Owner, Mode: modeOf(c.Shared), Priority: c.Priority, Wait: c.Wait}
	if c.Wait <= 0 {
		r.Token, r.Granted, r.Err = t.Acquire(req)
		if r.Granted {
			f.waits.Load().claim(c.Key, r.Token)
		}
		return r
	}
	ws := f.waits.Load()
	if err := ws.takeWaiterID(c.Waiter); err != nil {
		return Result{Err: err}
	}
	w := ws.newWait(c.Waiter, c.Key)
	r.Token, r.Granted, r.Err = t.AcquireWait(req, w.handle)
	if r.Granted {
		ws.claim(c.Key, r.Token)
	}
	if r.Err != nil || r.Granted {
		return r
	}
	ws.queue(w, int64(t.Config().Clock.Now())+int64(min(c.Wait, maxWait)))
	r.Queued = true
	return r
}

// queue registers w, which the table left waiting, as the latest wait,
// with its deadline.
func (ws *waits) queue(w *wait, deadline int64) {
	ws.number++
	w.number = ws.number
	w.deadline = deadline
	ws.add(w)
}

// acquireAll applies a MACQUIRE that does not wait (OpAcquireAll, or an
// OpWaitAll without a Wait).
func (f *FSM) acquireAll(t *locker.Table, req *locker.Request) (r Result) {
	r.Tokens, r.Granted, r.Err = t.AcquireAll(req)
	if r.Granted {
		f.waits.Load().claimAll(req.Keys, r.Tokens)
	}
	return r
}

// applyWaitAll applies an OpWaitAll: MACQUIRE ... WAIT. Granted at once,
// or not queued, it answers as OpAcquireAll; queued, it takes its keys one
// by one as locker.AcquireAllWait does, each step inside the apply of the
// entry that freed the key it waited for (continueAll), and its grant is
// reported to OnGrant as an OpWait's is.
func (f *FSM) applyWaitAll(t *locker.Table, c *Command) (r Result) {
	req := &locker.Request{Keys: c.Keys, TTL: c.TTL, Owner: c.Owner, Mode: modeOf(c.Shared), Priority: c.Priority, Wait: min(c.Wait, maxWait)}
	if c.Wait <= 0 {
		return f.acquireAll(t, req)
	}
	ws := f.waits.Load()
	if err := ws.takeWaiterID(c.Waiter); err != nil {
		return Result{Err: err}
	}
	w := ws.newMultiWait(c.Waiter, c.Keys)
	r.Tokens, r.Granted, r.Err = t.AcquireAllWait(req, w.multi)
	switch {
	case r.Granted:
		ws.claimAll(c.Keys, r.Tokens)
	case r.Err == nil && w.multi.Waiting():
		w.queuedAt()
		ws.queue(w, int64(t.Config().Clock.Now())+int64(req.Wait))
		r.Queued = true
	}
	return r
}

// applyCancelWait applies an OpCancelWait: the wait leaves its queue, or,
// if it was granted from it, its leases are released. An OpWaitAll's wait
// also gives back the keys it took on its way.
func (f *FSM) applyCancelWait(t *locker.Table, c *Command) (r Result) {
	ws := f.waits.Load()
	if w := ws.queued[string(c.Waiter)]; w != nil {
		if w.multi != nil {
			t.CancelAll(w.multi)
			ws.forget(w)
			return r
		}
		if _, granted := t.CancelWait(w.handle); !granted {
			ws.forget(w)
			return r
		}
		// Granted on the way out (its Notify recorded the grant): release
		// it below.
	}
	it := ws.grants.get(c.Waiter)
	if it == nil {
		return r
	}
	ws.removeGrant(it)
	ws.dropNotes(c.Waiter)
	for j, key := range it.val.keys {
		if t.ReleaseScoped(key, it.val.tokens[j], nil) {
			r.Token = it.val.tokens[j]
			r.N++
		}
	}
	return r
}

// fireWait ends the wait d names, if it is still queued: its deadline
// passed on the leader that proposed d. It reports whether it did.
func (f *FSM) fireWait(t *locker.Table, d *locker.Due) bool {
	ws := f.waits.Load()
	w := ws.queued[d.Key]
	if w == nil || w.number != d.Token {
		return false // granted, cancelled, or another wait of the same id
	}
	if w.multi != nil {
		t.CancelAll(w.multi) // and gives back what it took
	} else if _, granted := t.CancelWait(w.handle); granted {
		return false // its Notify told of the grant
	}
	ws.forget(w)
	ws.notes = append(ws.notes, note{waiter: []byte(w.waiter), key: w.key})
	return true
}

// flushNotes carries on with the OpWaitAll waits the command moved, then
// makes the OnGrant calls of the command just applied.
func (f *FSM) flushNotes(t *locker.Table) {
	ws := f.waits.Load()
	ws.continueAll(t)
	if len(ws.notes) == 0 {
		return
	}
	notes := ws.notes
	ws.notes = nil
	if f.onGrant == nil {
		return
	}
	for _, n := range notes {
		f.onGrant(n.waiter, n.key, n.tokens)
	}
}

// collectDue appends to out the waits whose deadline has passed by now, up
// to limit items in out, each at most once per locker.DueRetry.
func (ws *waits) collectDue(now int64, limit int, out []locker.Due) []locker.Due {
	ws.dueMu.Lock()
	defer ws.dueMu.Unlock()
	for len(out) < limit && len(ws.due) > 0 && ws.due[0].next() <= now {
		w := ws.due[0]
		out = append(out, locker.Due{Kind: locker.DueWait, Key: w.waiter, Token: w.number})
		w.retry = now + int64(locker.DueRetry)
		heap.Fix(&ws.due, 0)
	}
	return out
}

// next is when the wait is due to be reported: its deadline, or the end of
// its retry interval.
func (w *wait) next() int64 { return max(w.deadline, w.retry) }

// dueHeap orders waits by when they are next due, then by number.
type dueHeap []*wait

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	a, b := h[i].next(), h[j].next()
	return a < b || a == b && h[i].number < h[j].number
}
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}
func (h *dueHeap) Push(x any) {
	w := x.(*wait)
	w.at = len(*h)
	*h = append(*h, w)
}
func (h *dueHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.at = -1
	return w
}
