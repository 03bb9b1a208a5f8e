package server

import (
	"bytes"
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
	// combiner proposes this node's batches, and the batches followers
	// forward, combining those that wait at the same time into one entry.
	combiner *lockfsm.Combiner
	log      zerolog.Logger
	// opened is closed once node and duties are set: the node may be asked
	// to handle a forwarded request (handleForward) while Open runs.
	opened  chan struct{}
	waiters waiters    // this node's clients' waits (cluster_wait.go)
	leader  leaderAddr // the leader's RESP address (cluster_redirect.go)
}

// proposalsInFlight is how many entries of the combiner may be in flight at
// once. One makes the largest groups: on 2 cores, with 50 clients each
// waiting for its answer, 1 gave 3,400 lock cycles a second, 2 gave 3,000
// and 4 gave 2,500 (raft-boltdb; docs/benchmarks-log.md, 2026-11-24),
// since the cost per entry, not the wait for one, is the limit there.
const proposalsInFlight = 1

// maxLinger bounds how long the combiner holds a group back for the
// clients of the group it answered last, which come back a round trip
// later (lockfsm.Combiner.linger): on 2 cores, 50 clients come back within
// about 1.5 ms, and 2 ms gave the same lock cycles a second as 5 ms. It
// never holds a group back for longer than the last commit took.
const maxLinger = 2 * time.Millisecond

// proposeTimeout bounds the wait to hand a command to Raft; once handed
// over, a proposal ends when it is applied or the leadership is lost, which
// a leader cut off from its quorum learns within its lease timeout.
const proposeTimeout = 2 * time.Second

// retryBudget bounds how long a command waits for a leader (an election)
// before it is answered TRYAGAIN, or goes on retrying a batch whose outcome
// is unknown before it is answered UNCERTAIN: below the 3 s read timeout
// that go-redis and redis-py default to.
const retryBudget = 2 * time.Second

// retryPause is the wait between two tries: an election takes hundreds of
// milliseconds at least.
const retryPause = 25 * time.Millisecond

// openReplica opens the Raft member of cfg over a new state machine built
// from lockerCfg (in replicated mode, its tokens counted from the floor each
// leader's term raises).
func openReplica(cfg cluster.Config, lockerCfg locker.Config, grace time.Duration, log zerolog.Logger) (*replica, error) {
	lockerCfg.FirstToken = 1 // the same on every replica; OpTerm raises it
	lockerCfg.Journal = nil
	r := &replica{log: log, opened: make(chan struct{})}
	fsm, err := lockfsm.New(lockerCfg, lockfsm.OnGrant(r.waiters.granted),
		lockfsm.OnSettingsMismatch(func(own, leader string) {
			log.Error().Str("own", own).Str("leader", leader).
				Msg("this node's lock-table settings differ from the leader's: it refuses lock commands until it is restarted with the same flags as the others")
		}))
	if err != nil {
		return nil, err
	}
	r.fsm = fsm
	cfg.FSM = fsm
	cfg.Logger = log
	cfg.Handler = r.handleForward
	node, err := cluster.Open(cfg)
	if err != nil {
		fsm.Table().Close()
		return nil, err
	}
	r.node = node
	// The node takes part in elections from now on, so its leader's duties
	// (nothing on a follower) begin with it.
	r.duties = lockfsm.StartDuties(node, fsm, lockerCfg.Tick, grace, log)
	r.combiner = lockfsm.NewCombiner(node, proposalsInFlight, proposeTimeout, maxLinger)
	close(r.opened)
	return r, nil
}

// close stops the duties, hands the leadership over if this node has it,
// and leaves the Raft group's state on disk.
func (r *replica) close() error {
	r.duties.Stop()
	err := r.node.Close()
	r.combiner.Stop()
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
// its Client is empty), and returns their results, one per command: on the
// leader itself, or forwarded to it. Its errors are wire errors: TRYAGAIN
// when nothing was done, UNCERTAIN when the entry may or may not have been
// applied. Within retryBudget it waits out an election, and a tagged batch
// whose outcome is unknown is sent again (to the next leader): its tag
// makes sure it applies once, and the retry gets the results of the first
// if it did apply.
func (r *replica) propose(tag lockfsm.Tag, cmds []lockfsm.Command) ([]lockfsm.Result, error) {
	// A new buffer each time: raft keeps the entry's bytes in its log cache.
	entry := lockfsm.AppendTaggedEntry(nil, tag, cmds)
	deadline := time.Now().Add(retryBudget)
	uncertain := false
	for {
		var res []lockfsm.Result
		var err error
		switch {
		case r.ready():
			res, err = r.proposeHere(entry, len(cmds))
		case r.node.IsLeader():
			err = protocol.ErrTryAgain // its term has not begun yet
		default:
			res, err = r.forward(entry, len(cmds), time.Until(deadline))
		}
		switch {
		case err == nil:
			return res, nil
		case err == protocol.ErrUncertain:
			uncertain = true
		case err != protocol.ErrTryAgain:
			return nil, err
		}
		if time.Now().After(deadline) || uncertain && len(tag.Client) == 0 {
			if uncertain {
				return nil, protocol.ErrUncertain
			}
			return nil, protocol.ErrTryAgain
		}
		time.Sleep(retryPause)
	}
}

// proposeHere proposes entry, of n commands, on this node, the leader.
func (r *replica) proposeHere(entry []byte, n int) ([]lockfsm.Result, error) {
	out, err := r.combiner.Apply(entry)
	switch {
	case err == nil:
	case errors.Is(err, cluster.ErrNotApplied), err == lockfsm.ErrCombinerStopped:
		return nil, protocol.ErrTryAgain
	default:
		r.log.Warn().Err(err).Msg("a proposal's outcome is unknown")
		return nil, protocol.ErrUncertain
	}
	if err, ok := out.(error); ok {
		return nil, err
	}
	results, _ := out.([]lockfsm.Result)
	if len(results) != n {
		return nil, fmt.Errorf("server: %d results for %d commands", len(results), n)
	}
	return results, nil
}

// A forwarded request is a kind byte and its body; its answer a status
// byte and, for forwardOK, the results (lockfsm.AppendResults).
const (
	forwardPropose byte = 'P' // body: a tagged entry, to propose as it is
)

// The status of a forwarded request's answer.
const (
	forwardOK        byte = iota // the results follow
	forwardTryAgain              // nothing was done: the receiver cannot propose
	forwardUncertain             // proposed, outcome unknown
	forwardRefused               // a request the receiver does not understand
)

// forward sends entry, of n commands, to the leader to propose.
func (r *replica) forward(entry []byte, n int, timeout time.Duration) ([]lockfsm.Result, error) {
	req := append([]byte{forwardPropose}, entry...)
	answer, err := r.node.Forward(req, max(timeout, retryPause)+proposeTimeout)
	switch {
	case err == nil:
	case errors.Is(err, cluster.ErrNotDelivered):
		return nil, protocol.ErrTryAgain
	default:
		r.log.Warn().Err(err).Msg("a forwarded proposal's outcome is unknown")
		return nil, protocol.ErrUncertain
	}
	if len(answer) == 0 {
		return nil, fmt.Errorf("server: an empty answer to a forwarded proposal")
	}
	switch answer[0] {
	case forwardOK:
		results, err := lockfsm.DecodeResults(answer[1:])
		if err != nil {
			return nil, err
		}
		if len(results) != n {
			return nil, fmt.Errorf("server: %d results for %d forwarded commands", len(results), n)
		}
		return results, nil
	case forwardTryAgain:
		return nil, protocol.ErrTryAgain
	case forwardUncertain:
		return nil, protocol.ErrUncertain
	default:
		return nil, fmt.Errorf("server: the leader refused a forwarded proposal (status %d)", answer[0])
	}
}

// handleForward is the node's cluster.Config.Handler: it proposes what a
// follower forwarded, once, and answers with the results. It never forwards
// further: a node that is not a leader ready to propose answers TRYAGAIN.
func (r *replica) handleForward(req []byte) []byte {
	select {
	case <-r.opened:
	default:
		return []byte{forwardTryAgain}
	}
	if len(req) == 1 && req[0] == forwardAddr {
		return r.answerAddr()
	}
	if len(req) == 0 || req[0] != forwardPropose {
		return []byte{forwardRefused}
	}
	entry := bytes.Clone(req[1:]) // raft keeps it; the request's buffer is not ours
	_, cmds, err := lockfsm.DecodeTaggedEntry(entry)
	if err != nil {
		return []byte{forwardRefused}
	}
	if !r.ready() {
		return []byte{forwardTryAgain}
	}
	res, err := r.proposeHere(entry, len(cmds))
	switch {
	case err == nil:
		return lockfsm.AppendResults([]byte{forwardOK}, res)
	case err == protocol.ErrTryAgain:
		return []byte{forwardTryAgain}
	case err == protocol.ErrUncertain:
		return []byte{forwardUncertain}
	default:
		r.log.Error().Err(err).Msg("a forwarded proposal failed")
		return []byte{forwardRefused}
	}
}

// linearize returns once the table this node reads holds every change a
// quorum had committed when it was called, with the leader confirmed by a
// quorum meanwhile (cluster.Node.ReadIndex, asked of the leader from a
// follower), so that a read after it sees every write acknowledged before
// it began. Within retryBudget it waits out an election.
func (r *replica) linearize() error {
	deadline := time.Now().Add(retryBudget)
	for {
		index, err := r.node.ReadIndex(time.Until(deadline))
		if err == nil {
			if r.node.WaitApplied(index, time.Until(deadline)) != nil {
				return protocol.ErrTryAgain
			}
			return nil
		}
		if time.Now().After(deadline) {
			return protocol.ErrTryAgain
		}
		time.Sleep(retryPause)
	}
}

// proposalTag tags c's next batch of changes: c's client id and the
// batch's number, so that the batch applies once however often it is sent.
func (c *conn) proposalTag() lockfsm.Tag {
	c.proposalSeq++
	return lockfsm.Tag{Client: c.clusterClientID(), Seq: c.proposalSeq}
}

// clusterClientID names c across the cluster: this node, this run of the
// server (a client id must not come back after a restart, with numbers
// starting over), and the connection.
func (c *conn) clusterClientID() []byte {
	if c.clientID == nil {
		id := append([]byte(c.srv.replica.node.ID()), 0)
		id = append(id, c.srv.owners.run[:]...)
		c.clientID = binary.BigEndian.AppendUint64(id, c.id)
	}
	return c.clientID
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
