package server

import (
	"bytes"
	"encoding/binary"

	"github.com/leasehold/leasehold/lockfsm"
)

// ACQUIRE or MACQUIRE ... WAIT in cluster mode on an event loop: the same
// protocol as cluster_wait.go's (a waiter registered before its OpWait is
// proposed, the hand-off reported by the replica, OpCancelWait when the
// wait ends otherwise), driven by the loop instead of a blocked goroutine.
// The OpWait goes in the connection's batch, as its last command; its
// answer parks the connection (blockState.replicated) unless it granted at
// once; the hand-off, the wait's deadline (the loop's timers) and CLIENT
// UNBLOCK are posted to or run on the loop, as for a single node's wait.
// A wait that ends otherwise than by its hand-off is cancelled through the
// log before the connection runs anything more (ioLoop.endReplicatedWait);
// one whose connection closes, or whose server stops, is cancelled
// without waiting for the answer.

// replicatedWait is the state of a WAIT in cluster mode on an event loop.
type replicatedWait struct {
	cw     clusterWait
	waiter []byte
	forget func() // stops the replica's hand-off report
	parked bool   // its OpWait was answered Queued
	handed bool   // the hand-off came before that answer, with early
	early  []uint64
}

// clusterWaitOnLoop serves w on c's event loop.
func (c *conn) clusterWaitOnLoop(w clusterWait) error {
	l := c.loop
	c.waitSeq++
	waiter := binary.BigEndian.AppendUint64(bytes.Clone(c.clusterClientID()), c.waitSeq)
	w.keys = cloneKeys(w.keys)
	rw := &replicatedWait{cw: w, waiter: waiter}
	b := &blockState{timer: -1, replicated: rw, deadline: c.srv.monotonic() + int64(w.cmd.Wait), ephemeral: w.ephemeral, keys: w.keys}
	if w.cmd.Op == lockfsm.OpWait {
		b.key = string(w.keys[0])
	}
	rw.forget = c.srv.replica.Await(waiter, func(tokens []uint64) {
		l.post(func() { l.handedOver(c, b, tokens) })
	})
	cmd := w.cmd
	cmd.Waiter = waiter
	c.queueProposal(lockReply{write: replyQueuedWait, wait: b}, []lockfsm.Command{cmd})
	c.startProposals()
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
		if rw.early == nil {
			c.srv.stats.waitTimeouts.Add(1)
		}
		rw.cw.reply(c, rw.early)
		return nil
	}
	rw.parked = true
	c.park(b, nil)
	return nil
}

// abandonQueuedWait takes back a WAIT whose OpWait's outcome is unknown: it
// may be queued, to be granted to nobody.
func (c *conn) abandonQueuedWait(b *blockState) {
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

// handedOver delivers the hand-off of b's wait (tokens; nil: it ended
// ungranted, at its deadline through the leader, or taken over by its
// owner's later WAIT); it runs on the loop.
func (l *ioLoop) handedOver(c *conn, b *blockState, tokens []uint64) {
	rw := b.replicated
	if c.fd < 0 || l.stopping {
		return // closeConn or the shutdown cancelled it
	}
	if c.blocked != b {
		if !rw.parked {
			rw.handed, rw.early = true, tokens // before its OpWait's answer
		}
		return // else it ended meanwhile, and its cancel gives the grant back
	}
	l.waitTimers.disarm(b)
	if tokens == nil {
		c.srv.stats.waitTimeouts.Add(1)
	}
	out := waitOutcome{granted: tokens != nil, tokens: tokens}
	if tokens != nil {
		out.token = tokens[0]
	}
	c.endWait(out)
	l.serveReadable(c)
}

// endReplicatedWait ends c's parked wait b before its hand-off: at its
// deadline, or by CLIENT UNBLOCK (asError: answered UNBLOCKED). Its
// OpCancelWait, which also gives back a lease handed to it meanwhile, is
// applied before c runs anything more, and its reply goes then.
func (l *ioLoop) endReplicatedWait(c *conn, b *blockState, unblocked, asError bool) {
	b.replicated.forget()
	if !unblocked {
		c.srv.stats.waitTimeouts.Add(1)
	}
	c.endWait(waitOutcome{unblockedErr: asError})
	log := c.log
	c.proposeAsync([]lockfsm.Command{{Op: lockfsm.OpCancelWait, Waiter: b.replicated.waiter}}, func(_ []lockfsm.Result, err error) {
		if err != nil {
			log.Warn().Err(err).Msg("could not cancel a wait: it ends at its deadline, and a lease it was given by its ttl")
		}
	})
	l.rewatch(c)
}
