package server

import (
	"bytes"
	"encoding/binary"
	"sync"
	"time"

	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
)

// ACQUIRE ... WAIT in cluster mode. The wait queue is the replicated
// table's (lockfsm's OpWait): it survives a change of leader, and the lock
// is handed to the head of its queue inside the apply of the entry that
// frees it, alike on every replica. The node the client is connected to
// keeps the client: it names the wait (waiter: its client id and a number),
// registers it before proposing, and is told of the hand-off by the state
// machine's OnGrant, which reports every waiter on every replica and which
// this node passes on to its own waiters only. When the client's wait
// times out, or it hangs up, or the server stops, the node proposes
// OpCancelWait: that dequeues the wait, or gives back a lease handed to it
// meanwhile, so no grant is left to a client that will never hear of it.

// waiters are the waits of this node's clients, by waiter id.
type waiters struct {
	mu sync.Mutex
	m  map[string]chan uint64
}

// add registers waiter; its channel takes the one OnGrant for it.
func (w *waiters) add(waiter []byte) chan uint64 {
	ch := make(chan uint64, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = make(map[string]chan uint64)
	}
	w.m[string(waiter)] = ch
	w.mu.Unlock()
	return ch
}

func (w *waiters) remove(waiter []byte) {
	w.mu.Lock()
	delete(w.m, string(waiter))
	w.mu.Unlock()
}

// granted is the FSM's OnGrant: it hands token to waiter if it is one of
// this node's, and never blocks (the state machine's apply calls it).
func (w *waiters) granted(waiter, _ []byte, token uint64) {
	w.mu.Lock()
	ch := w.m[string(waiter)]
	w.mu.Unlock()
	if ch != nil {
		select {
		case ch <- token:
		default: // one hand-off per wait; a second cannot happen
		}
	}
}

// clusterAcquireWaiting is ACQUIRE ... WAIT in cluster mode: its reply is
// written before it returns, since it blocks this connection's goroutine.
func clusterAcquireWaiting(c *conn, req protocol.AcquireRequest) error {
	if err := c.checkWait(req.Wait); err != nil {
		return err
	}
	deadline := time.Now().Add(req.Wait)
	c.runProposals() // the replies before this one
	r := c.srv.replica
	c.waitSeq++
	waiter := binary.BigEndian.AppendUint64(bytes.Clone(c.clusterClientID()), c.waitSeq)
	granted := r.waiters.add(waiter)
	defer r.waiters.remove(waiter)
	res, err := r.propose(c.proposalTag(), []lockfsm.Command{{
		Op: lockfsm.OpWait, Key: req.Key, TTL: req.TTL, Owner: c.scopedOwner(req.Owner), Shared: req.Shared,
		Priority: req.Priority, Waiter: waiter, Wait: req.Wait,
	}})
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
		if res[0].Granted {
			c.srv.ties.granted(c, req.Key, res[0].Token, req.Ephemeral)
		}
		protocol.WriteToken(c.wr, res[0].Token, res[0].Granted)
		return nil
	}
	key := cloneBytes(req.Key)
	// CLIENT UNBLOCK finds the wait here (conn.unblockWait).
	parked := &blockState{since: c.srv.monotonic(), unblock: make(chan bool, 1)}
	c.parkedAt = parked.since // SLOWLOG times the command until it queued
	// LOCKSTATS counts the wait on the node that served it.
	waited := func(granted bool) {
		if st := c.srv.hot; st != nil {
			st.Waited(string(key), time.Duration(c.srv.monotonic()-parked.since), granted)
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
	handedOver := func(token uint64) error {
		if token == 0 { // ended ungranted: its deadline, or its owner's later WAIT
			c.srv.stats.waitTimeouts.Add(1)
			waited(false)
			c.wr.WriteNull()
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
		c.srv.ties.granted(c, key, token, req.Ephemeral)
		protocol.WriteToken(c.wr, token, true)
		return nil
	}
	select {
	case token := <-granted:
		return handedOver(token)
	case asError := <-parked.unblock:
		// As on one node, a lease handed over already is the client's.
		select {
		case token := <-granted:
			if token != 0 {
				return handedOver(token)
			}
		default:
		}
		// The cancel also gives back a lease handed over meanwhile.
		c.cancelClusterWait(waiter)
		waited(false)
		if asError {
			return protocol.ErrUnblocked
		}
		c.wr.WriteNull()
		return nil
	case <-timer.C:
		c.srv.stats.waitTimeouts.Add(1)
		waited(false)
		c.cancelClusterWait(waiter)
		c.wr.WriteNull()
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
// back a lease handed to it meanwhile. If the proposal fails, the wait ends
// at its deadline through the leader, and a lease handed to it by its ttl.
func (c *conn) cancelClusterWait(waiter []byte) {
	if _, err := c.srv.replica.propose(c.proposalTag(), []lockfsm.Command{{Op: lockfsm.OpCancelWait, Waiter: waiter}}); err != nil {
		c.log.Warn().Err(err).Msg("could not cancel a wait: it ends at its deadline, and a lease it was given by its ttl")
	}
}
