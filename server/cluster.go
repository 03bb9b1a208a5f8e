package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
	"github.com/rs/zerolog"
)

// Cluster mode (Config.Cluster): the lock table is a lockfsm.FSM that a
// cluster.Node replicates. A command that changes the table becomes a
// lockfsm.Command, proposed through Raft, and its client is answered from
// the Result every replica computes alike when the entry is applied; reads
// wait until the node has applied what a quorum had committed when they
// arrived (linearize). The handlers block while they do, so cluster mode
// serves every connection on a goroutine of its own (IOLoops 0).
//
// Only the leader proposes, once its term has begun (lockfsm.Duties): until
// then its tokens could fall below the term's floor. Any other node, or a
// leader whose term has not begun, answers TRYAGAIN: nothing ran.

// replica is the server's Raft member and the state machine it drives.
type replica struct {
	node   *cluster.Node
	fsm    *lockfsm.FSM
	duties *lockfsm.Duties
	log    zerolog.Logger
}

// proposeTimeout bounds the wait to hand a command to Raft; once handed
// over, a proposal ends when it is applied or the leadership is lost, which
// a leader cut off from its quorum learns within its lease timeout.
const proposeTimeout = 2 * time.Second

// readTimeout bounds a linearizable read's leader check and its wait for
// this node to apply up to the read index.
const readTimeout = 2 * time.Second

// openReplica opens the Raft member of cfg over a new state machine built
// from lockerCfg (in replicated mode, its tokens counted from the floor each
// leader's term raises).
func openReplica(cfg cluster.Config, lockerCfg locker.Config, log zerolog.Logger) (*replica, error) {
	lockerCfg.FirstToken = 1 // the same on every replica; OpTerm raises it
	lockerCfg.Journal = nil
	fsm, err := lockfsm.New(lockerCfg)
	if err != nil {
		return nil, err
	}
	cfg.FSM = fsm
	cfg.Logger = log
	node, err := cluster.Open(cfg)
	if err != nil {
		fsm.Table().Close()
		return nil, err
	}
	// The node takes part in elections from now on, so its leader's duties
	// (nothing on a follower) begin with it.
	duties := lockfsm.StartDuties(node, fsm, lockerCfg.Tick, log)
	return &replica{node: node, fsm: fsm, duties: duties, log: log}, nil
}

// close stops the duties, hands the leadership over if this node has it,
// and leaves the Raft group's state on disk.
func (r *replica) close() error {
	r.duties.Stop()
	err := r.node.Close()
	r.fsm.Table().Close()
	return err
}

// ready reports whether this node may propose: it is the leader and its
// term has begun.
func (r *replica) ready() bool {
	term := r.duties.Term()
	return term != 0 && term == r.node.Term() && r.node.IsLeader()
}

// propose runs cmds through the log as one entry, tagged with tag (none if
// its Client is empty), and returns their results, one per command. Its
// errors are wire errors: TRYAGAIN when nothing was done, UNCERTAIN when the
// entry may or may not have been applied.
func (r *replica) propose(tag lockfsm.Tag, cmds []lockfsm.Command) ([]lockfsm.Result, error) {
	if !r.ready() {
		return nil, protocol.ErrTryAgain
	}
	// A new buffer each time: raft keeps the entry's bytes in its log cache.
	out, err := r.node.Apply(lockfsm.AppendTaggedEntry(nil, tag, cmds), proposeTimeout)
	switch {
	case err == nil:
	case errors.Is(err, cluster.ErrNotApplied):
		return nil, protocol.ErrTryAgain
	default:
		r.log.Warn().Err(err).Msg("a proposal's outcome is unknown")
		return nil, protocol.ErrUncertain
	}
	if err, ok := out.(error); ok {
		return nil, err
	}
	results, _ := out.([]lockfsm.Result)
	if len(results) != len(cmds) {
		return nil, fmt.Errorf("server: %d results for %d commands", len(results), len(cmds))
	}
	return results, nil
}

// linearize returns once the table this node reads holds every change a
// quorum had committed when it was called, with the leader confirmed by a
// quorum meanwhile, so that a read after it sees every write acknowledged
// before it began.
func (r *replica) linearize() error {
	if !r.ready() {
		return protocol.ErrTryAgain
	}
	index := r.node.CommitIndex()
	if err := r.node.VerifyLeader(); err != nil {
		return protocol.ErrTryAgain
	}
	deadline := time.Now().Add(readTimeout)
	for r.node.AppliedIndex() < index {
		if time.Now().After(deadline) {
			return protocol.ErrTryAgain
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// proposalTag tags c's next batch of changes: c's client id (this node,
// this run of the server, the connection) and the batch's number, so that
// the batch applies once however often it is sent.
func (c *conn) proposalTag() lockfsm.Tag {
	if c.clientID == nil {
		id := append([]byte(c.srv.replica.node.ID()), 0)
		id = append(id, c.srv.owners.run[:]...)
		c.clientID = binary.BigEndian.AppendUint64(id, c.id)
	}
	c.proposalSeq++
	return lockfsm.Tag{Client: c.clientID, Seq: c.proposalSeq}
}

// endSession tells the state machine to forget c's batches (their results
// kept for retries) once c has closed. If it fails, the session table's
// bound forgets them in time.
func (c *conn) endSession() {
	if c.clientID == nil || c.srv.replica == nil {
		return
	}
	c.srv.replica.propose(lockfsm.Tag{}, []lockfsm.Command{{Op: lockfsm.OpEndSession, Client: c.clientID}})
}

// RaftAddr is the address this node's Raft listener is bound to, "" on a
// single node.
func (s *Server) RaftAddr() string {
	if s.replica == nil {
		return ""
	}
	return s.replica.node.Addr()
}
