package server

import (
	"github.com/leasehold/leasehold/lockfsm"
)

// ACQUIRE or MACQUIRE ... WAIT in cluster mode on an event loop
// (replicated_wait.go): the hand-off, the wait's deadline (the loop's
// timers) and CLIENT UNBLOCK are posted to or run on the loop, as for a
// single node's wait. A wait that ends otherwise than by its hand-off is
// cancelled through the log before the connection runs anything more
// (endReplicatedWait); one whose connection closes, or whose server stops,
// is cancelled without waiting for the answer.

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
	c.endWait(c.handedOverOutcome(tokens))
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
