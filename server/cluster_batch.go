package server

import (
	"errors"

	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
)

// A connection's changes in cluster mode are proposed one log entry per
// round, not one per command: the handlers of the commands that change the
// table queue their commands and the replies to write once the entry is
// applied (queueProposal), and the queue runs as one entry when the round
// ends (flush), before any reply that must come after those replies is
// written (writeErr, and dispatch of any other command), or when it is
// full. A client that pipelines 16 ACQUIREs waits for one commit, not 16.

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
		c.runProposals()
	}
}

// runProposals proposes the queued commands as one entry and writes their
// replies, in order.
func (c *conn) runProposals() {
	b := &c.proposals
	if len(b.replies) == 0 {
		return
	}
	cmds, replies := b.cmds, b.replies
	b.cmds, b.replies = nil, nil // a finish may queue nothing, but be safe
	var res []lockfsm.Result
	var err error
	if len(cmds) > 0 {
		res, err = c.srv.replica.Propose(c.proposalTag(), cmds)
	}
	at := 0
	for _, p := range replies {
		var ferr error
		if err != nil {
			ferr = err
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
	out := cmdOK
	switch {
	case errors.Is(err, protocol.ErrTryAgain):
		out = cmdRejected
	case err != nil:
		out = cmdFailed
	}
	d := p.d
	if d < 0 { // answered within its own dispatch: a full batch
		d = c.srv.monotonic() - p.start
	}
	c.tally.record(c.counters, p.cmd, out, d)
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
