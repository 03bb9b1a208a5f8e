package server

import (
	"container/heap"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
)

// blockState is a connection parked in ACQUIRE or MACQUIRE with WAIT: it
// runs no further command until its leases are handed to it or the wait ends.
type blockState struct {
	timer     int   // index in the loop's wait heap; -1 when not in it
	deadline  int64 // Server.monotonic() ns
	since     int64 // Server.monotonic() ns the wait began (park)
	ephemeral bool  // the leases, once granted, are released when c closes
	// unblock carries CLIENT UNBLOCK to the goroutine transport's wait
	// (true: with ERROR); the event loop gets a posted task instead.
	unblock chan bool
	// One of the three:
	wait       *locker.Wait      // ACQUIRE's
	multi      *locker.MultiWait // MACQUIRE's
	replicated *replicatedWait   // either's, in cluster mode (replicated_wait.go)
	key        string            // ACQUIRE's key
	keys       [][]byte          // MACQUIRE's keys, in the order given (copies)
}

// all reports whether b is a MACQUIRE's wait.
func (b *blockState) all() bool {
	if b.replicated != nil {
		return b.replicated.cw.cmd.Op == lockfsm.OpWaitAll
	}
	return b.multi != nil
}

// waitOutcome is how a wait ended: its grant, if any.
type waitOutcome struct {
	granted bool
	token   uint64   // ACQUIRE's
	tokens  []uint64 // MACQUIRE's, in the order of its keys
	// unblockedErr: CLIENT UNBLOCK ... ERROR ended it; without a grant the
	// reply is the UNBLOCKED error rather than nil.
	unblockedErr bool
	// err ended a MACQUIRE ungranted on its way (a full table): the reply.
	err error
}

// acquireWaiting serves ACQUIRE with WAIT (cmd, an OpWait) on a single
// node: granted at once, or parked until the lock's queue hands it the
// lease or the wait times out.
func acquireWaiting(c *conn, cmd *lockfsm.Command, ephemeral bool) error {
	w := &locker.Wait{}
	key := string(cmd.Key)
	b := &blockState{timer: -1, wait: w, key: key, deadline: c.srv.monotonic() + int64(cmd.Wait), ephemeral: ephemeral}
	notify, progress := c.progressFunc(b, func(token uint64) { c.srv.lockTable().Release([]byte(key), token) })
	w.Notify = notify
	lr := cmd.Request()
	token, granted, err := c.srv.lockTable().AcquireWait(&lr, w)
	if err != nil || granted {
		if err == nil {
			c.srv.ties.granted(c, cmd.Key, token, ephemeral)
			protocol.WriteToken(c.wr, token, true)
		}
		return err
	}
	c.park(b, progress)
	return nil
}

// macquireWaiting serves MACQUIRE with WAIT (cmd, an OpWaitAll) on a
// single node: all granted at once, or parked while the table takes the
// keys in order, waiting in each lock's queue.
func macquireWaiting(c *conn, cmd *lockfsm.Command, ephemeral bool) error {
	mw := &locker.MultiWait{}
	b := &blockState{timer: -1, multi: mw, deadline: c.srv.monotonic() + int64(cmd.Wait), ephemeral: ephemeral}
	// When the server closes under a parked MACQUIRE, the loop's shutdown
	// closes the connection, and that cancels the request.
	notify, progress := c.progressFunc(b, func(uint64) {})
	mw.Notify = func() { notify(0) }
	lr := cmd.Request()
	tokens, granted, err := c.srv.lockTable().AcquireAllWait(&lr, mw)
	switch {
	case err != nil:
		return err
	case !mw.Waiting():
		if granted {
			c.tieAll(cmd.Keys, tokens, ephemeral)
		}
		protocol.WriteTokens(c.wr, tokens)
		return nil
	}
	b.keys = cloneKeys(cmd.Keys) // cmd's alias the reader's buffer
	c.park(b, progress)
	return nil
}

func (c *conn) checkWait(wait time.Duration) error {
	if max := c.srv.cfg.Locker.MaxTTL; wait > max {
		return protocol.WaitTooLongError(max)
	}
	return nil
}

// progressFunc returns the Notify for b's wait, which runs on whatever
// goroutine moved the wait on: on the event loop it posts the progress to
// c's loop (and calls orphaned with the token if the loop has stopped); on
// the goroutine transport it hands it to the channel waitInline watches.
func (c *conn) progressFunc(b *blockState, orphaned func(token uint64)) (notify func(uint64), progress chan uint64) {
	if l := c.loop; l != nil {
		return func(token uint64) {
			if !l.post(func() { l.progressed(c, b, token) }) {
				orphaned(token) // the server is closing
			}
		}, nil
	}
	// One slot is enough: a single wait is notified once, and a multi-lock
	// is notified at most once per step, each step waiting for the last.
	progress = make(chan uint64, 1)
	return func(token uint64) { progress <- token }, progress
}

// park makes c wait: on the event loop until its timer or a Notify, on
// the goroutine transport right here.
//
// CLIENT UNBLOCK finds the wait once INFO's blocked_clients counts it (the
// table lists the waiter a little earlier, as the lock's queue holds it).
func (c *conn) park(b *blockState, progress chan uint64) {
	c.parkedAt = c.srv.monotonic()
	b.since = c.parkedAt
	c.blocked = b
	if c.loop != nil {
		c.parked.Store(b)
		c.srv.stats.blocked.Add(1)
		c.loop.armWaitTimer(c, b) // the loop replies later
		return
	}
	b.unblock = make(chan bool, 1)
	c.parked.Store(b)
	c.srv.stats.blocked.Add(1)
	c.waitInline(b, progress)
}

// unpark forgets c's wait, once it has ended, and returns it.
func (c *conn) unpark() *blockState {
	b := c.blocked
	c.blocked = nil
	c.parked.Store(nil)
	c.srv.stats.blocked.Add(-1)
	return b
}

// unblockWait asks c, if it is parked in a WAIT, to end that wait as if it
// timed out (asError: with the UNBLOCKED error instead of nil). It runs on
// the caller's goroutine, so it only hands the request to c's own loop or
// goroutine, and reports whether c was parked when asked. A lease handed to
// c before its wait ends is delivered all the same, as at a timeout.
func (c *conn) unblockWait(asError bool) bool {
	b := c.parked.Load()
	if b == nil {
		return false
	}
	if l := c.loop; l != nil {
		return l.post(func() { l.unblock(c, b, asError) })
	}
	select {
	case b.unblock <- asError:
	default: // already asked; the first request decides
	}
	return true
}

// cancelWait ends c's wait before its time: a single wait handed its lease
// in the meantime takes it; a multi-lock gives back what it took.
func (c *conn) cancelWait() waitOutcome {
	b := c.blocked
	var out waitOutcome
	if b.replicated != nil {
		return c.cancelReplicated(b)
	}
	if b.multi == nil {
		out.token, out.granted = c.srv.lockTable().CancelWait(b.wait)
	} else {
		c.srv.lockTable().CancelAll(b.multi)
	}
	return out
}

// resumeWait carries c's wait on after a Notify (token is a single wait's
// grant, 0 when an owner's retry superseded it) and reports whether the
// wait ended, and how.
func (c *conn) resumeWait(token uint64) (out waitOutcome, done bool) {
	b := c.blocked
	if b.multi == nil {
		return waitOutcome{granted: token != 0, token: token}, true
	}
	tokens, granted := c.srv.lockTable().ContinueAll(b.multi)
	return waitOutcome{granted: granted, tokens: tokens, err: b.multi.Err()}, !b.multi.Waiting()
}

// timeoutWait ends c's wait at its deadline, as cancelWait does.
func (c *conn) timeoutWait() waitOutcome {
	out := c.cancelWait()
	if !out.granted {
		c.srv.stats.waitTimeouts.Add(1)
	}
	return out
}

// abandonWait ends c's wait without a reply, its connection gone: nothing is
// granted to a closed connection.
func (c *conn) abandonWait() {
	b := c.unpark()
	if b.replicated != nil {
		c.abandonReplicated(b)
		return
	}
	if b.multi != nil {
		c.srv.lockTable().CancelAll(b.multi)
		return
	}
	if token, granted := c.srv.lockTable().CancelWait(b.wait); granted {
		c.srv.lockTable().GiveBack([]byte(b.key), token)
	}
}

// giveBack releases a grant that cannot be delivered. An ACQUIRE's lease is
// left alone if its owner's retry on another connection was answered with
// it meanwhile (locker.Table.GiveBack); a MACQUIRE's are released, as its
// keys were renewed when the last was taken.
func (c *conn) giveBack(b *blockState, out waitOutcome) {
	if !out.granted {
		return
	}
	if b.replicated != nil {
		// Its cancel gives the leases back, through the log, unless the
		// owner's retry was answered with them meanwhile (the FSM's claim):
		// not a RELEASE of the token, which would end that lease too.
		c.proposeCancel(b)
		return
	}
	if b.multi == nil {
		c.srv.lockTable().GiveBack([]byte(b.key), out.token)
		return
	}
	for j, k := range b.keys {
		c.srv.lockTable().Release(k, out.tokens[j])
	}
}

// endWait ends c's wait with its outcome and writes the reply.
func (c *conn) endWait(out waitOutcome) {
	b := c.unpark()
	c.lastRead = c.srv.monotonic() // the idle clock restarts when the wait ends
	if st := c.srv.hot; st != nil && !b.all() {
		st.Waited(b.key, time.Duration(c.lastRead-b.since), out.granted)
	}
	switch {
	case out.unblockedErr && !out.granted:
		c.writeErr(protocol.ErrUnblocked)
	case out.err != nil && !out.granted:
		c.writeErr(out.err)
	case !b.all():
		if out.granted {
			c.srv.ties.granted(c, []byte(b.key), out.token, b.ephemeral)
		}
		protocol.WriteToken(c.wr, out.token, out.granted)
	default:
		if out.granted {
			c.tieAll(b.keys, out.tokens, b.ephemeral)
		}
		protocol.WriteTokens(c.wr, out.tokens)
	}
	c.unflushed = true
}

// tieAll records MACQUIRE's grants for EPHEMERAL.
func (c *conn) tieAll(keys [][]byte, tokens []uint64, ephemeral bool) {
	for j, k := range keys {
		c.srv.ties.granted(c, k, tokens[j], ephemeral)
	}
}

// waitTimer is one parked connection's deadline in its loop's timer heap.
type waitTimer struct {
	deadline int64
	c        *conn
	b        *blockState
}

// waitTimers is a min-heap of deadlines. Each blockState knows its index, so
// a wait that ends early (granted, connection closed) leaves the heap at once
// rather than pinning its connection until the deadline.
type waitTimers []waitTimer

func (h waitTimers) Len() int           { return len(h) }
func (h waitTimers) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h waitTimers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].b.timer, h[j].b.timer = i, j
}
func (h *waitTimers) Push(x any) {
	t := x.(waitTimer)
	t.b.timer = len(*h)
	*h = append(*h, t)
}
func (h *waitTimers) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = waitTimer{}
	*h = old[:len(old)-1]
	x.b.timer = -1
	return x
}

func (h *waitTimers) add(c *conn, b *blockState) {
	heap.Push(h, waitTimer{deadline: b.deadline, c: c, b: b})
}

// disarm takes b's deadline out of the heap, if it is there.
func (h *waitTimers) disarm(b *blockState) {
	if b.timer >= 0 && b.timer < len(*h) && (*h)[b.timer].b == b {
		heap.Remove(h, b.timer)
	}
}
