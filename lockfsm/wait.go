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

// wait is a queued OpWait.
type wait struct {
	waiter   string
	key      []byte
	number   uint64 // the wait's place among all waits queued, in log order
	handle   *locker.Wait
	deadline int64 // soft: this replica's clock at apply plus Wait

	// Guarded by waits.dueMu.
	retry int64 // collectDue reports it again no earlier than this
	at    int   // its index in the due heap
}

// grant is a wait granted from its queue, kept for an OpCancelWait.
type grant struct {
	key   []byte
	token uint64
}

// lease names a lease: its key and token.
type lease struct {
	key   string
	token uint64
}

// note is an OnGrant call to make once the command is applied.
type note struct {
	waiter, key []byte
	token       uint64
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
	if token != 0 {
		ws.putGrant([]byte(w.waiter), grant{key: w.key, token: token})
	}
	ws.notes = append(ws.notes, note{waiter: []byte(w.waiter), key: w.key, token: token})
}

// putGrant records a grant made from a queue to waiter, forgetting the
// oldest past maxGrants.
func (ws *waits) putGrant(waiter []byte, g grant) {
	if it := ws.grants.get(waiter); it != nil {
		ws.removeGrant(it)
	}
	ws.byLease[lease{string(g.key), g.token}] = ws.grants.put(waiter, g)
	for ws.grants.len() > ws.maxGrants {
		ws.removeGrant(ws.grants.front())
	}
}

func (ws *waits) removeGrant(it *item[grant]) {
	delete(ws.byLease, lease{string(it.val.key), it.val.token})
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

// dropNotes forgets the notes of waiter not yet made.
func (ws *waits) dropNotes(waiter []byte) {
	ws.notes = slices.DeleteFunc(ws.notes, func(n note) bool { return bytes.Equal(n.waiter, waiter) })
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
	if len(c.Waiter) == 0 {
		return Result{Err: fmt.Errorf("%w: a WAIT without a waiter id", ErrBadEntry)}
	}
	ws := f.waits.Load()
	if ws.queued[string(c.Waiter)] != nil {
		return Result{Err: ErrWaiterExists}
	}
	if it := ws.grants.get(c.Waiter); it != nil {
		ws.removeGrant(it) // the id is used again: its old grant was answered
	}
	w := ws.newWait(c.Waiter, c.Key)
	r.Token, r.Granted, r.Err = t.AcquireWait(req, w.handle)
	if r.Granted {
		ws.claim(c.Key, r.Token)
	}
	if r.Err != nil || r.Granted {
		return r
	}
	ws.number++
	w.number = ws.number
	w.deadline = int64(t.Config().Clock.Now()) + int64(min(c.Wait, maxWait))
	ws.add(w)
	r.Queued = true
	return r
}

// applyCancelWait applies an OpCancelWait: the wait leaves its queue, or,
// if it was granted from it, its lease is released.
func (f *FSM) applyCancelWait(t *locker.Table, c *Command) (r Result) {
	ws := f.waits.Load()
	if w := ws.queued[string(c.Waiter)]; w != nil {
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
	if t.ReleaseScoped(it.val.key, it.val.token, nil) {
		r.Token, r.N = it.val.token, 1
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
	if _, granted := t.CancelWait(w.handle); granted {
		return false // its Notify told of the grant
	}
	ws.forget(w)
	ws.notes = append(ws.notes, note{waiter: []byte(w.waiter), key: w.key})
	return true
}

// flushNotes makes the OnGrant calls of the command just applied.
func (f *FSM) flushNotes() {
	ws := f.waits.Load()
	if len(ws.notes) == 0 {
		return
	}
	notes := ws.notes
	ws.notes = nil
	if f.onGrant == nil {
		return
	}
	for _, n := range notes {
		f.onGrant(n.waiter, n.key, n.token)
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
