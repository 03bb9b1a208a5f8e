package server

import (
	"bytes"
	"encoding/binary"
	"time"

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
// the server stops, the node proposes
// OpCancelWait: that dequeues the wait, or gives back a lease handed to it
// meanwhile, so no grant is left to a client that will never hear of it.

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

// clusterWaiting serves w: its reply is written before it returns, since
// it blocks this connection's goroutine.
func (c *conn) clusterWaiting(w clusterWait) error {
	deadline := time.Now().Add(w.cmd.Wait)
	c.runProposals() // the replies before this one
	r := c.srv.replica
	c.waitSeq++
	waiter := binary.BigEndian.AppendUint64(bytes.Clone(c.clusterClientID()), c.waitSeq)
	granted := make(chan []uint64, 1) // one hand-off per wait
	forget := r.Await(waiter, func(tokens []uint64) { granted <- tokens })
	defer forget()
	cmd := w.cmd
	cmd.Waiter = waiter
	res, err := r.Propose(c.proposalTag(), []lockfsm.Command{cmd})
	if err == protocol.ErrUncertain {
		// It may be queued, to be granted to nobody: take it back.
		c.cancelClusterWait(waiter)
	}
	if err != nil {
		return err
	}
	if res[0].Err != nil {
		return res[0].Err
	}
	if !res[0].Queued {
		w.reply(c, grantedTokens(res[0]))
		return nil
	}
	w.keys = cloneKeys(w.keys)
	// CLIENT UNBLOCK finds the wait here (conn.unblockWait).
	parked := &blockState{since: c.srv.monotonic(), unblock: make(chan bool, 1)}
	c.parkedAt = parked.since // SLOWLOG times the command until it queued
	// LOCKSTATS counts an ACQUIRE's wait on the node that served it (a
	// MACQUIRE's, as on one node, not).
	waited := func(granted bool) {
		if st := c.srv.hot; st != nil && cmd.Op == lockfsm.OpWait {
			st.Waited(string(w.keys[0]), time.Duration(c.srv.monotonic()-parked.since), granted)
		}
	}
	if c.unflushed {
		c.flush() // earlier pipelined replies should not wait with us
	}
	c.nc.SetReadDeadline(time.Time{}) // the idle timeout does not apply while waiting
	hangup, stopWatch := watchHangup(c.nc)
	defer stopWatch()
	c.srv.stats.blocked.Add(1)
	defer c.srv.stats.blocked.Add(-1)
	c.parked.Store(parked)
	defer c.parked.Store(nil)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	handedOver := func(tokens []uint64) error {
		if tokens == nil { // ended ungranted: its deadline, or its owner's later WAIT
			c.srv.stats.waitTimeouts.Add(1)
			waited(false)
			w.reply(c, nil)
			return nil
		}
		if peerClosed(c.nc) {
			// Nobody to hand it to: give it back through the wait's cancel,
			// not a RELEASE of the token, which would also end the lease if
			// the client's retry with the same OWNER, through another node,
			// was answered with it meanwhile (the FSM's claim keeps it then).
			c.cancelClusterWait(waiter)
			c.quit = true
			return nil
		}
		waited(true)
		w.reply(c, tokens)
		return nil
	}
	select {
	case tokens := <-granted:
		return handedOver(tokens)
	case asError := <-parked.unblock:
		// As on one node, a lease handed over already is the client's.
		select {
		case tokens := <-granted:
			if tokens != nil {
				return handedOver(tokens)
			}
		default:
		}
		// The cancel also gives back a lease handed over meanwhile.
		c.cancelClusterWait(waiter)
		waited(false)
		if asError {
			return protocol.ErrUnblocked
		}
		w.reply(c, nil)
		return nil
	case <-timer.C:
		c.srv.stats.waitTimeouts.Add(1)
		waited(false)
		c.cancelClusterWait(waiter)
		w.reply(c, nil)
		return nil
	case <-hangup:
		c.cancelClusterWait(waiter)
		c.quit = true
		return nil
	case <-c.srv.closing:
		c.cancelClusterWait(waiter)
		return protocol.ErrShutdown
	}
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
