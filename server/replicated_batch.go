package server

import (
	"errors"
	"github.com/leasehold/leasehold/internal/cmdstats"

	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
)

// A connection's changes in cluster mode are proposed one log entry per
// round, not one per command: the handlers of the commands that change the
// table queue their commands and the replies to write once the entry is
// applied (queueProposal), and the queue runs as one entry when the round
// ends (flush), before any command that must see those changes runs
// (dispatch of any command that is not a lock change, or a WAIT), or when
// it is full; an error reply meanwhile queues behind them (writeErr). A
// client that pipelines 16 ACQUIREs waits for one commit, not 16.
//
// On the goroutine transport the connection's goroutine waits for the
// entry (runProposals). On an event loop the entry is proposed without
// waiting (startProposals, replica.ProposeAsync): the connection runs no
// command meanwhile (inFlight), and the loop writes the replies once the
// answer is posted back (ioLoop.answered), then serves the connection
// again, beginning with the command that had to wait (deferred).

// proposalBatch is a connection's queue of changes not yet proposed.
type proposalBatch struct {
	cmds    []lockfsm.Command
	replies []pendingReply
}

// pendingReply writes the reply of n commands of a batch from their
// results, or from the batch's error.
type pendingReply struct {
	n     int
	reply lockReply
	// The command that queued it, counted (cmdstats.go) once its outcome
	// is known: its index in protocol.Commands (counted is false when it
	// was queued outside a dispatch), when it began, and how long it ran
	// until it was queued (-1 until its dispatch ends). As for a WAIT, the
	// commit is no command's time: Redis's latencystats leave out an
	// fsync of appendfsync always alike.
	counted  bool
	cmd      int
	start, d int64
}

// dispatchNote is what dispatch tells a proposal its command queues.
type dispatchNote struct {
	active bool  // a command is being dispatched
	cmd    int   // its index in protocol.Commands
	start  int64 // monotonic ns it began at
	queued bool  // it queued a proposal: its count waits for the answer
}

// timed sets how long the command that queued the last reply ran; if the
// reply was already written (a full batch ran at once), it was counted
// then.
func (b *proposalBatch) timed(d int64) {
	if n := len(b.replies); n > 0 && b.replies[n-1].counted && b.replies[n-1].d < 0 {
		b.replies[n-1].d = d
	}
}

// maxBatchCommands bounds one entry: a pipeline longer than this takes
// several.
const maxBatchCommands = 512

// queueProposal queues cmds, to be proposed with the rest of the round's,
// and reply, to write their reply from their results. The commands' byte
// slices are copied: the reader reuses its buffers for the next command.
func (c *conn) queueProposal(reply lockReply, cmds []lockfsm.Command) {
	b := &c.proposals
	for _, cmd := range cmds {
		b.cmds = append(b.cmds, cloneCommand(cmd))
	}
	p := pendingReply{n: len(cmds), reply: reply}
	if dn := &c.dispatching; dn.active && !dn.queued {
		dn.queued = true
		p.counted, p.cmd, p.start, p.d = true, dn.cmd, dn.start, -1
	}
	b.replies = append(b.replies, p)
	if len(b.cmds) >= maxBatchCommands {
		c.proposeQueued()
	}
}

// queueError queues err as a reply behind the queued ones: its command
// ran (and is counted) already.
func (c *conn) queueError(err error) {
	c.proposals.replies = append(c.proposals.replies, pendingReply{reply: lockReply{write: replyQueuedError, err: err}})
}

// replyQueuedError is queueError's reply.
func replyQueuedError(_ *conn, r lockReply, _ []lockfsm.Command, _ []lockfsm.Result) error {
	return r.err
}

// proposeQueued proposes the queued commands, waiting for their answer on
// the goroutine transport, not on an event loop.
func (c *conn) proposeQueued() {
	if c.loop != nil {
		c.startProposals()
	} else {
		c.runProposals()
	}
}

// takeProposals empties the queue and returns what it held.
func (c *conn) takeProposals() ([]lockfsm.Command, []pendingReply) {
	b := &c.proposals
	cmds, replies := b.cmds, b.replies
	b.cmds, b.replies = nil, nil
	return cmds, replies
}

// runProposals proposes the queued commands as one entry and writes their
// replies, in order.
func (c *conn) runProposals() {
	if len(c.proposals.replies) == 0 {
		return
	}
	cmds, replies := c.takeProposals()
	var res []lockfsm.Result
	var err error
	if len(cmds) > 0 {
		res, err = c.srv.replica.Propose(c.proposalTag(), cmds)
	}
	c.writeReplies(cmds, replies, res, err)
}

// startProposals is runProposals on an event loop: the entry is proposed
// without waiting, and the replies are written when its answer comes back
// to the loop. c runs no command meanwhile.
func (c *conn) startProposals() {
	if len(c.proposals.replies) == 0 || c.inFlight {
		return
	}
	cmds, replies := c.takeProposals()
	if len(cmds) == 0 {
		c.writeReplies(cmds, replies, nil, nil)
		return
	}
	c.proposeAsync(cmds, func(res []lockfsm.Result, err error) { c.writeReplies(cmds, replies, res, err) })
}

// proposeAsync proposes cmds as c's next batch and runs then with the
// answer on c's loop, which then serves c again (ioLoop.answered). c runs
// no command until then. If the loop has stopped by then, its shutdown
// has closed c: the answer reaches nobody.
func (c *conn) proposeAsync(cmds []lockfsm.Command, then func([]lockfsm.Result, error)) {
	l := c.loop
	c.inFlight = true
	c.srv.replica.ProposeAsync(c.proposalTag(), cmds, func(res []lockfsm.Result, err error) {
		l.post(func() { l.answered(c, then, res, err) })
	})
}

// mustWait is the event loop's step, in cluster mode, before it dispatches
// args, which must see what c has queued (any command but a lock change),
// or, a read of the table, needs its leader check: that goes first,
// without blocking the loop, and args waits for it, deferred (runCommands
// runs it first once c is answered). It reports whether args waits.
func (c *conn) mustWait(args [][]byte) bool {
	i := protocol.LookupIndex(args[0])
	switch {
	case len(c.proposals.replies) > 0 && (i < 0 || !lockWriteCommands[i]):
		if c.startProposals(); !c.inFlight {
			return false // replies of no change (queued errors): written at once
		}
		c.deferred = cloneKeys(args)
		return true
	case i >= 0 && readCommands[i] && !c.staleReads && !(c.linearized && c.rd.Consumed() <= c.linearizedTo) &&
		c.user != nil && c.srv.replica.SettingsMismatch() == "":
		c.deferred = cloneKeys(args)
		c.linearizeFirst()
		return true
	}
	return false
}

// linearizeFirst makes the leader check of c's round's reads
// (replica.Replica.Linearize) without blocking the loop: c runs no command
// until its outcome is posted back. A failure is the reply of the read
// that waited, once dispatched (replicatedApplier.admit). The check serves
// the reads received before it began, not those the loop reads after.
func (c *conn) linearizeFirst() {
	l := c.loop
	c.inFlight = true
	c.linearized = false
	c.linearizedTo = c.rd.Consumed() + int64(c.rd.Buffered())
	c.srv.replica.LinearizeAsync(func(err error) {
		l.post(func() {
			l.answered(c, func([]lockfsm.Result, error) {
				c.linearized, c.linearizeErr = err == nil, err
			}, nil, err)
		})
	})
}

// writeReplies writes the replies of a batch from its results, or from
// the batch's error, in order, and counts their commands.
func (c *conn) writeReplies(cmds []lockfsm.Command, replies []pendingReply, res []lockfsm.Result, err error) {
	at := 0
	for _, p := range replies {
		var ferr error
		if err != nil && p.n > 0 { // a reply of no command (queueError's) is its own
			ferr = err
			if p.reply.wait != nil {
				c.abandonReplicated(p.reply.wait) // it may be queued, to be granted to nobody
			}
		} else {
			ferr = p.reply.write(c, p.reply, cmds[at:at+p.n], res[at:at+p.n])
		}
		if ferr != nil {
			c.writeReplyErr(ferr)
		}
		if p.counted {
			c.countAnswered(p, ferr)
		}
		at += p.n
	}
}

// countAnswered counts the command that queued p, now that its reply is
// known: refused if it was answered TRYAGAIN (nothing ran, as Redis counts
// a cluster redirection), failed for any other error (UNCERTAIN, or its
// own error from the state machine).
func (c *conn) countAnswered(p pendingReply, err error) {
	out := cmdstats.OK
	switch {
	case errors.Is(err, protocol.ErrTryAgain):
		out = cmdstats.Rejected
	case err != nil:
		out = cmdstats.Failed
	}
	d := p.d
	if d < 0 {
		// Answered within its own dispatch: a full batch, or a WAIT on the
		// goroutine transport, which ran until it parked (dispatch).
		end := c.parkedAt
		if end == 0 {
			end = c.srv.monotonic()
		}
		d = end - p.start
	}
	c.tally.Record(c.counters, p.cmd, out, d)
}

// cloneCommand copies cmd's byte slices.
func cloneCommand(cmd lockfsm.Command) lockfsm.Command {
	cmd.Key = cloneBytes(cmd.Key)
	cmd.Owner = cloneBytes(cmd.Owner)
	cmd.Scope = cloneBytes(cmd.Scope)
	if cmd.Keys != nil {
		cmd.Keys = cloneKeys(cmd.Keys)
	}
	return cmd
}

// cloneKeys copies keys and their bytes, which may alias the reader's
// buffer.
func cloneKeys(keys [][]byte) [][]byte {
	out := make([][]byte, len(keys))
	for j, k := range keys {
		out[j] = cloneBytes(k)
	}
	return out
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
