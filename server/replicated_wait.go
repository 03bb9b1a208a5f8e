package server

import (
	"bytes"
	"encoding/binary"

	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
)

// ACQUIRE ... WAIT in cluster mode. The wait queue is the replicated
// table's (lockfsm's OpWait): it survives a change of leader, and the lock
// is handed to the head of its queue inside the apply of the entry that
// frees it, alike on every replica. The node the client is connected to
// keeps the client: it names the wait (waiter: its client id and a
// number), registers it before proposing, and is told of the hand-off by
// the state machine's OnGrant, which reports every waiter on every replica
// and which the replica passes on to this node's own waiters only
// (replica.Await). When the client's wait times out, or it hangs up, or
// the server stops, the node proposes OpCancelWait: that dequeues the wait,
// or gives back a lease handed to it meanwhile, so no grant is left to a
// client that will never hear of it.
//
// Both transports run it alike (clusterWaiting): the OpWait goes in the
// connection's batch, and its answer parks the connection (conn.park), as
// a single node's wait parks, unless it granted at once. The goroutine
// transport's goroutine then waits in waitInline, for the hand-off on a
// channel; an event loop is posted the hand-off (replicated_wait_loop.go).

// clusterWait is an ACQUIRE or MACQUIRE with WAIT in cluster mode.
type clusterWait struct {
	cmd       lockfsm.Command // OpWait or OpWaitAll; the waiter is set by clusterWaiting
	keys      [][]byte        // the lock's key, or MACQUIRE's keys in order
	ephemeral bool
}

// reply writes w's reply: tokens, nil for none.
func (w *clusterWait) reply(c *conn, tokens []uint64) {
	if w.cmd.Op == lockfsm.OpWaitAll {
		if tokens != nil {
			c.tieAll(w.keys, tokens, w.ephemeral)
		}
		protocol.WriteTokens(c.wr, tokens)
		return
	}
	if tokens == nil {
		protocol.WriteToken(c.wr, 0, false)
		return
	}
	c.srv.ties.granted(c, w.keys[0], tokens[0], w.ephemeral)
	protocol.WriteToken(c.wr, tokens[0], true)
}

// grantedTokens is what r granted at once: its tokens, nil for none.
func grantedTokens(r lockfsm.Result) []uint64 {
	switch {
	case !r.Granted:
		return nil
	case r.Tokens != nil:
		return r.Tokens
	}
	return []uint64{r.Token}
}

// replicatedWait is the state of a WAIT in cluster mode.
type replicatedWait struct {
	cw     clusterWait
	waiter []byte
	forget func() // stops the replica's hand-off report
	// handoff carries the hand-off to the goroutine transport's wait
	// (waitInline); an event loop gets a posted task instead.
	handoff chan []uint64
	parked  bool // its OpWait was answered Queued
	handed  bool // on a loop, the hand-off came before that answer, with early
	early   []uint64
}

// clusterWaiting serves w, on either transport: it names the wait and
// registers it with the replica, then queues its OpWait as the last command
// of c's batch, which is proposed at once. The answer (replyQueuedWait)
// writes the reply if it granted at once, or parks c (conn.park) until the
// hand-off, the deadline or CLIENT UNBLOCK; on the goroutine transport c's
// goroutine waits in waitInline, on a loop the loop goes on.
func (c *conn) clusterWaiting(w clusterWait) error {
	c.waitSeq++
	waiter := binary.BigEndian.AppendUint64(bytes.Clone(c.clusterClientID()), c.waitSeq)
	w.keys = cloneKeys(w.keys)
	rw := &replicatedWait{cw: w, waiter: waiter}
	b := &blockState{timer: -1, replicated: rw, deadline: c.srv.monotonic() + int64(w.cmd.Wait), ephemeral: w.ephemeral, keys: w.keys}
	if w.cmd.Op == lockfsm.OpWait {
		b.key = string(w.keys[0])
	}
	if l := c.loop; l != nil {
		rw.forget = c.srv.replica.Await(waiter, func(tokens []uint64) {
			l.post(func() { l.handedOver(c, b, tokens) })
		})
	} else {
		rw.handoff = make(chan []uint64, 1) // one hand-off per wait
		rw.forget = c.srv.replica.Await(waiter, func(tokens []uint64) {
			select { // never block the state machine's apply
			case rw.handoff <- tokens:
			default:
			}
		})
	}
	cmd := w.cmd
	cmd.Waiter = waiter
	c.queueProposal(lockReply{write: replyQueuedWait, wait: b}, []lockfsm.Command{cmd})
	c.proposeQueued()
	return nil
}

// replyQueuedWait is the reply of a WAIT's OpWait: granted at once, or
// refused, it is written now; queued, the connection parks.
func replyQueuedWait(c *conn, r lockReply, _ []lockfsm.Command, res []lockfsm.Result) error {
	b := r.wait
	rw := b.replicated
	switch {
	case res[0].Err != nil:
		rw.forget()
		return res[0].Err
	case !res[0].Queued:
		rw.forget()
		rw.cw.reply(c, grantedTokens(res[0]))
		return nil
	case rw.handed:
		rw.cw.reply(c, c.handedOverOutcome(rw.early).tokens)
		return nil
	}
	rw.parked = true
	c.park(b, nil)
	return nil
}

// handedOverOutcome is the outcome of a replicated wait's hand-off: tokens,
// or nil when it ended ungranted (at its deadline through the leader, or
// taken over by its owner's later WAIT), which counts as a timeout.
func (c *conn) handedOverOutcome(tokens []uint64) waitOutcome {
	if tokens == nil {
		c.srv.stats.waitTimeouts.Add(1)
		return waitOutcome{}
	}
	return waitOutcome{granted: true, token: tokens[0], tokens: tokens}
}

// cancelReplicated ends b's replicated wait before its hand-off (cancelWait).
// A lease handed over already is the client's, as on one node; otherwise
// the wait's OpCancelWait, which also gives back a lease handed over
// meanwhile, is proposed: on the goroutine transport before the reply
// goes, on an event loop, which must not block, without waiting.
func (c *conn) cancelReplicated(b *blockState) waitOutcome {
	rw := b.replicated
	rw.forget()
	select {
	case tokens := <-rw.handoff: // nil on a loop: never ready
		if tokens != nil {
			return c.handedOverOutcome(tokens)
		}
	default:
	}
	c.proposeCancel(b)
	return waitOutcome{}
}

// proposeCancel proposes the end of b's wait, which also gives back a lease
// handed to it meanwhile: waiting for the answer on the goroutine
// transport, so that the reply follows it, and on an event loop not.
func (c *conn) proposeCancel(b *blockState) {
	if c.loop != nil {
		c.cancelReplicatedLater(b)
		return
	}
	c.cancelClusterWait(b.replicated.waiter)
}

// abandonReplicated takes back a WAIT nobody will hear the end of: one
// whose connection closed, or whose OpWait's outcome is unknown (it may be
// queued, to be granted to nobody). Its hand-off report stops, and its
// cancel is proposed without waiting.
func (c *conn) abandonReplicated(b *blockState) {
	b.replicated.forget()
	c.cancelReplicatedLater(b)
}

// cancelReplicatedLater proposes the end of b's wait, which also gives back
// a lease handed to it meanwhile, without waiting for the answer: for a
// connection that closed, or a server that stops. If the proposal fails,
// the wait ends at its deadline through the leader, and a lease handed to
// it by its ttl.
func (c *conn) cancelReplicatedLater(b *blockState) {
	log := c.log
	cancel := []lockfsm.Command{{Op: lockfsm.OpCancelWait, Waiter: b.replicated.waiter}}
	c.srv.replica.ProposeAsync(lockfsm.Tag{}, cancel, func(_ []lockfsm.Result, err error) {
		if err != nil {
			log.Warn().Err(err).Msg("could not cancel a wait: it ends at its deadline, and a lease it was given by its ttl")
		}
	})
}

// cancelClusterWait proposes the end of waiter's wait, which also gives
// back a lease handed to it meanwhile (a MACQUIRE's: every lease, and the
// keys it took on its way). If the proposal fails, the wait ends at its
// deadline through the leader, and a lease handed to it by its ttl.
func (c *conn) cancelClusterWait(waiter []byte) {
	if _, err := c.srv.replica.Propose(c.proposalTag(), []lockfsm.Command{{Op: lockfsm.OpCancelWait, Waiter: waiter}}); err != nil {
		c.log.Warn().Err(err).Msg("could not cancel a wait: it ends at its deadline, and a lease it was given by its ttl")
	}
}
