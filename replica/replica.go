package replica

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
	"github.com/rs/zerolog"
)

// NodeConfig is the Raft member's configuration: its id, addresses, data
// directory, how it joins, its timeouts and log store (see cluster.Config).
// Its FSM, Handler, Logger, TLS and Seed are set by Open.
type NodeConfig = cluster.Config

// Options are what Open needs besides the node's configuration.
type Options struct {
	Node NodeConfig
	// TLS, when set, makes every connection between nodes mutual TLS.
	TLS *TLSConfig
	// Locker is the lock table's configuration, as a single node's: every
	// replica's table is built from it, in replicated mode.
	Locker locker.Config
	// RestartGrace is what each leader gives every live lease when its
	// term begins (lockfsm.OpGrace); 0 for nothing.
	RestartGrace time.Duration
	// Announce returns the RESP address clients reach this node at, for
	// the leader's address that followers ask for (LeaderRESP).
	Announce func() string
	Log      zerolog.Logger
}

// Replica is this node's member of the Raft group and the state machine it
// drives. Its methods may be called from any goroutine.
type Replica struct {
	node   *cluster.Node
	fsm    *lockfsm.FSM
	duties *lockfsm.Duties
	// combiner proposes this node's batches, and the batches followers
	// forward, combining those that wait at the same time into one entry.
	combiner *lockfsm.Combiner
	tls      *nodeTLS // nil without TLS between nodes
	log      zerolog.Logger
	// opened is closed once node and duties are set: the node may be asked
	// to handle a forwarded request (handleForward) while Open runs.
	opened  chan struct{}
	waiters waiters    // this node's clients' waits (waiters.go)
	leader  leaderAddr // the leader's RESP address (forward.go)
	// stopC is closed by Close: proposals stop waiting out elections.
	// inFlight counts ProposeAsync's goroutines, which Close waits for;
	// none starts once closed is set (both guarded by mu).
	stopC    chan struct{}
	mu       sync.Mutex
	closed   bool
	inFlight sync.WaitGroup
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

// Open opens the Raft member of o.Node over a new state machine built from
// o.Locker (in replicated mode, its tokens counted from the floor each
// leader's term raises). A data directory that holds a single node's data
// becomes the first state of a new group (migrate.go); its files are then
// moved aside.
func Open(o Options) (*Replica, error) {
	cfg := o.Node
	r := &Replica{log: o.Log, opened: make(chan struct{}), stopC: make(chan struct{})}
	r.leader.announcing = o.Announce
	if o.TLS != nil {
		var err error
		if r.tls, cfg.TLS, err = newNodeTLS(*o.TLS); err != nil {
			return nil, err
		}
		cfg.AllowedPeer = o.TLS.allowedPeer()
	}
	migrating, err := prepareMigration(&cfg, o.Locker, o.Log)
	if err != nil {
		return nil, err
	}
	lockerCfg := o.Locker
	lockerCfg.FirstToken = 1 // the same on every replica; OpTerm raises it
	lockerCfg.Journal = nil
	log := o.Log
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
	r.duties = lockfsm.StartDuties(node, fsm, lockerCfg.Tick, o.RestartGrace, log)
	r.combiner = lockfsm.NewCombiner(node, proposalsInFlight, proposeTimeout, maxLinger)
	close(r.opened)
	if migrating {
		to, err := moveSingleNodeFiles(cfg.DataDir, time.Now())
		if err != nil {
			r.Close()
			return nil, err
		}
		log.Info().Str("moved_to", to).Msg("the single node's files are kept aside, imported")
	}
	return r, nil
}

// Close stops the duties, hands the leadership over if this node has it,
// ends the proposals in flight (TRYAGAIN or UNCERTAIN, as the node's
// closing leaves them) and waits for their callbacks, and leaves the Raft
// group's state on disk.
func (r *Replica) Close() error {
	r.duties.Stop()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	close(r.stopC)
	err := r.node.Close()
	r.combiner.Stop()
	r.inFlight.Wait()
	r.fsm.Table().Close()
	return err
}

// Table is this replica's lock table as of the last entry applied: read it
// again rather than keeping it (a snapshot's restore replaces it).
func (r *Replica) Table() *locker.Table { return r.fsm.Table() }

// Ready reports whether this node may propose: it is the leader and its
// term has begun (lockfsm.Duties): until then its tokens could fall below
// the term's floor.
func (r *Replica) Ready() bool {
	term := r.duties.Term()
	return term != 0 && term == r.node.Term() && r.node.IsLeader()
}

// IsFollower reports whether another node leads, or may: this node is not
// the leader, in its term or not.
func (r *Replica) IsFollower() bool { return !r.node.IsLeader() }

// SettingsMismatch returns the leader's lock-table settings if they differ
// from this node's ("" if not): its answers, and its table if it became
// the leader, would not be the group's, so lock commands are refused.
func (r *Replica) SettingsMismatch() string { return r.fsm.SettingsMismatch() }

// Settings are this node's lock-table settings, as the leader's are compared.
func (r *Replica) Settings() string { return r.fsm.Settings() }

// LeaderKnown reports whether this node knows a leader to propose through.
func (r *Replica) LeaderKnown() bool {
	id, _ := r.node.Leader()
	return id != ""
}

// Propose runs cmds through the log as one entry, tagged with tag (none if
// its Client is empty), and returns their results, one per command: on the
// leader itself, or forwarded to it. Its errors are wire errors: TRYAGAIN
// when nothing was done, UNCERTAIN when the entry may or may not have been
// applied. Within retryBudget it waits out an election, and a tagged batch
// whose outcome is unknown is sent again (to the next leader): its tag
// makes sure it applies once, and the retry gets the results of the first
// if it did apply. It blocks until then.
func (r *Replica) Propose(tag lockfsm.Tag, cmds []lockfsm.Command) ([]lockfsm.Result, error) {
	// A new buffer each time: raft keeps the entry's bytes in its log cache.
	entry := lockfsm.AppendTaggedEntry(nil, tag, cmds)
	deadline := time.Now().Add(retryBudget)
	uncertain := false
	for {
		var res []lockfsm.Result
		var err error
		switch {
		case r.Ready():
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
		if time.Now().After(deadline) || uncertain && len(tag.Client) == 0 || !r.pause() {
			if uncertain {
				return nil, protocol.ErrUncertain
			}
			return nil, protocol.ErrTryAgain
		}
	}
}

// pause waits retryPause between two tries, and reports false if Close
// began meanwhile: there is nothing to wait for then.
func (r *Replica) pause() bool {
	t := time.NewTimer(retryPause)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopC:
		return false
	}
}

// LinearizeAsync is Linearize without the wait: done is called with its
// result on a goroutine the replica owns (Close waits for it).
func (r *Replica) LinearizeAsync(done func(error)) {
	r.async(func() { done(r.Linearize()) }, func() { done(protocol.ErrTryAgain) })
}

// async runs fn on a goroutine Close waits for, or closed instead, at
// once, if Close has begun.
func (r *Replica) async(fn, closed func()) {
	r.mu.Lock()
	stopped := r.closed
	if !stopped {
		r.inFlight.Add(1)
	}
	r.mu.Unlock()
	if stopped {
		closed()
		return
	}
	go func() {
		defer r.inFlight.Done()
		fn()
	}()
}

// ProposeAsync is Propose without the wait, as hashicorp/raft's Apply
// returns an ApplyFuture: it returns at once, and done, if not nil, is
// called with Propose's results once they are known, on a goroutine the
// replica owns (Close waits for it). An event loop's connection parks its
// replies until then rather than block the loop.
//
// On the leader the entry goes to the combiner at once, and done is called
// by the goroutine that proposed it; only when that fails, or on a
// follower (forwarding is a blocking call), a goroutine runs Propose.
func (r *Replica) ProposeAsync(tag lockfsm.Tag, cmds []lockfsm.Command, done func([]lockfsm.Result, error)) {
	if done == nil {
		done = func([]lockfsm.Result, error) {}
	}
	viaPropose := func() { r.async(func() { done(r.Propose(tag, cmds)) }, func() { done(nil, protocol.ErrTryAgain) }) }
	if !r.Ready() {
		viaPropose()
		return
	}
	// A new buffer each time: raft keeps the entry's bytes in its log cache.
	entry := lockfsm.AppendTaggedEntry(nil, tag, cmds)
	r.combiner.ApplyAsync(entry, func(out any, err error) {
		res, err := r.decodeResults(out, err, len(cmds))
		switch {
		case err == protocol.ErrTryAgain, err == protocol.ErrUncertain && len(tag.Client) > 0:
			viaPropose() // waits out an election, and sends a tagged batch again
		default:
			done(res, err)
		}
	})
}

// proposeHere proposes entry, of n commands, on this node, the leader.
func (r *Replica) proposeHere(entry []byte, n int) ([]lockfsm.Result, error) {
	out, err := r.combiner.Apply(entry)
	return r.decodeResults(out, err, n)
}

// decodeResults reads the combiner's answer to an entry of n commands, as
// Propose answers: TRYAGAIN if it was not applied, UNCERTAIN if the
// outcome is unknown.
func (r *Replica) decodeResults(out any, err error, n int) ([]lockfsm.Result, error) {
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
		return nil, fmt.Errorf("replica: %d results for %d commands", len(results), n)
	}
	return results, nil
}

// Linearize returns once the table this node reads holds every change a
// quorum had committed when it was called, with the leader confirmed by a
// quorum meanwhile (cluster.Node.ReadIndex, asked of the leader from a
// follower), so that a read after it sees every write acknowledged before
// it began. Within retryBudget it waits out an election; then it returns
// protocol.ErrTryAgain.
func (r *Replica) Linearize() error {
	deadline := time.Now().Add(retryBudget)
	for {
		index, err := r.node.ReadIndex(time.Until(deadline))
		if err == nil {
			if r.node.WaitApplied(index, time.Until(deadline)) != nil {
				return protocol.ErrTryAgain
			}
			return nil
		}
		if time.Now().After(deadline) || !r.pause() {
			return protocol.ErrTryAgain
		}
	}
}

// ID is this node's id in the group.
func (r *Replica) ID() string { return r.node.ID() }

// RaftAddr is the address this node's Raft listener is bound to.
func (r *Replica) RaftAddr() string { return r.node.Addr() }

// AppliedIndex is the index of the last entry this node applied.
func (r *Replica) AppliedIndex() uint64 { return r.node.AppliedIndex() }

// CommitIndex is the index of the last entry this node knows committed.
func (r *Replica) CommitIndex() uint64 { return r.node.CommitIndex() }

// AddNode adds a member to the group (CLUSTER ADDNODE), through the leader.
func (r *Replica) AddNode(id, raftAddr string) error { return r.node.Join(id, raftAddr) }

// Forget removes a member from the group (CLUSTER FORGET).
func (r *Replica) Forget(id string) error { return r.node.RemoveServer(id) }

// Snapshot takes a snapshot of the state machine now, and compacts the log
// up to it (CLUSTER SNAPSHOT).
func (r *Replica) Snapshot() error { return r.node.Snapshot() }
