package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// ReadIndex returns the log index a linearizable read must wait for
// (WaitApplied) before reading this node's FSM: every command committed
// before ReadIndex was called is at or below it.
//
// On the leader: once an entry of the leader's current term has committed
// (raft commits a no-op at the start of each term; until then a Barrier
// is run, once per term), the commit index is captured and the leader
// confirms with a quorum that it still leads (VerifyLeader, plus answers
// to requests sent after the capture, see quorumHeardSince). Callers that
// arrive while a confirmation is in flight share the next one, so a burst
// of reads costs one round trip to the followers, not one each. On a
// follower: the same is asked of the leader over the RPC, one round trip
// more.
//
// Errors (nothing is changed by a failed ReadIndex; retry it): ErrNoLeader
// (none known), ErrNotLeader (this node, or the one asked, is no longer
// the leader), ErrTimeout, ErrClosed, or an RPC failure (wrapping
// ErrNotDelivered or ErrOutcomeUnknown).
func (n *Node) ReadIndex(timeout time.Duration) (uint64, error) {
	deadline := time.Now().Add(timeout)
	addr, id := n.raft.LeaderWithID()
	switch {
	case n.isClosed():
		return 0, notDelivered(ErrClosed)
	case string(id) == n.cfg.NodeID:
		return n.leaderReadIndex(deadline)
	case addr == "":
		return 0, notDelivered(ErrNoLeader)
	}
	body := binary.BigEndian.AppendUint64(nil, uint64(max(time.Until(deadline), 0)))
	f, err := n.client.call(string(addr), kindReadIndex, body, deadline, n.closeC)
	if err != nil {
		return 0, err
	}
	if f.kind != statusOK {
		return 0, fmt.Errorf("cluster: read index from %s: %w", id, decodeError(f.body))
	}
	if len(f.body) != 8 {
		return 0, fmt.Errorf("cluster: read index from %s: malformed reply", id)
	}
	return binary.BigEndian.Uint64(f.body), nil
}

// leaderReadIndex is ReadIndex on the leader.
func (n *Node) leaderReadIndex(deadline time.Time) (uint64, error) {
	term := n.raft.CurrentTerm()
	if err := n.ensureTermCommitted(term, deadline); err != nil {
		return 0, err
	}
	began := time.Now()
	index := n.lastCommandAt(n.raft.CommitIndex())
	// VerifyLeader may succeed on answers to requests sent before it was
	// called (replication.go, updateLastAppended); an answer delayed past
	// an election and a commit elsewhere would then confirm a deposed
	// leader. So the read also needs a quorum to have answered, in this
	// term, requests sent after it began: the heartbeats each round sends.
	for {
		if err := n.verify.verify(deadline, n.closeC); err != nil {
			return 0, err
		}
		if n.raft.CurrentTerm() != term {
			return 0, &outcomeError{kinds: []error{ErrNotLeader}, cause: raft.ErrLeadershipLost}
		}
		if n.quorumHeardSince(term, began) {
			return index, nil
		}
	}
}

// quorumHeardSince reports whether this node and enough voters to make a
// quorum with it answered, in term, requests this node sent at or after
// t.
func (n *Node) quorumHeardSince(term uint64, t time.Time) bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	voters, acks := 0, 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.ID == raft.ServerID(n.cfg.NodeID) || n.trans.progress.heardSince(s.ID, term, t) {
			acks++
		}
	}
	return acks > voters/2
}

// ensureTermCommitted returns once an entry of term is known committed:
// until then a new leader's commit index may lag behind entries an older
// leader had committed. The cheap test reads the entry at the commit
// index; only if that is of an older term does a Barrier (one at a time)
// settle it.
func (n *Node) ensureTermCommitted(term uint64, deadline time.Time) error {
	if n.termCommitted.Load() == term {
		return nil
	}
	if n.entryTerm(n.raft.CommitIndex()) == term {
		n.markTermCommitted(term)
		return nil
	}
	n.barrierMu.Lock()
	defer n.barrierMu.Unlock()
	if n.termCommitted.Load() == term {
		return nil
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return &outcomeError{kinds: []error{ErrTimeout}, cause: errors.New("no entry of the leader's term committed yet")}
	}
	if err := n.wait(n.raft.Barrier(wait)); err != nil {
		if errors.Is(err, raft.ErrEnqueueTimeout) {
			return &outcomeError{kinds: []error{ErrTimeout}, cause: err}
		}
		return leaderError(err)
	}
	if n.raft.CurrentTerm() != term {
		return &outcomeError{kinds: []error{ErrNotLeader}, cause: raft.ErrLeadershipLost}
	}
	n.markTermCommitted(term)
	return nil
}

// markTermCommitted records that an entry of term has committed; terms
// only rise, so a late caller of an older term must not lower it.
func (n *Node) markTermCommitted(term uint64) {
	for {
		old := n.termCommitted.Load()
		if old >= term || n.termCommitted.CompareAndSwap(old, term) {
			return
		}
	}
}

// entryTerm is the term of the entry at index in this node's log, 0 if it
// has none there.
func (n *Node) entryTerm(index uint64) uint64 {
	var l raft.Log
	if index == 0 || n.logs.GetLog(index, &l) != nil {
		return 0
	}
	return l.Term
}

// lastCommandAt returns the index of the last entry at or below index that
// reaches the FSM: a run of no-op and barrier entries on top of the log
// does not change the FSM's state, and appliedFSM never sees them, so
// WaitApplied on their index would wait for the next command. An entry
// missing from the log was compacted into a snapshot, which the FSM holds.
func (n *Node) lastCommandAt(index uint64) uint64 {
	for i := index; i > 0; i-- {
		var l raft.Log
		if n.logs.GetLog(i, &l) != nil {
			return i
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return i
		}
	}
	return 0
}

// verifier runs VerifyLeader for ReadIndex, one round at a time. A caller
// joins the next round to start: the one it starts itself if none is in
// flight, else the one that starts when the current ends, shared with
// everyone who arrives meanwhile. A round a caller waits on thus always
// starts after the caller captured its commit index, which is what makes
// the captured index safe to read at.
type verifier struct {
	verifyLeader func() error
	wg           *sync.WaitGroup // the Node's; counts the round goroutine

	mu      sync.Mutex // guards running, next
	running bool
	next    *verifyRound
}

type verifyRound struct {
	done chan struct{}
	err  error
}

func (v *verifier) verify(deadline time.Time, stop <-chan struct{}) error {
	v.mu.Lock()
	if v.next == nil {
		v.next = &verifyRound{done: make(chan struct{})}
	}
	r := v.next
	if !v.running {
		v.running, v.next = true, nil
		v.wg.Add(1)
		go v.run(r)
	}
	v.mu.Unlock()

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-r.done:
		return r.err
	case <-timer.C:
		return &outcomeError{kinds: []error{ErrTimeout}, cause: errors.New("leadership not confirmed in time")}
	case <-stop:
		return ErrClosed
	}
}

// run runs rounds until no caller waits for another. VerifyLeader returns
// at the latest when raft shuts down.
func (v *verifier) run(r *verifyRound) {
	defer v.wg.Done()
	for r != nil {
		r.err = v.verifyLeader()
		close(r.done)
		v.mu.Lock()
		r, v.next = v.next, nil
		if r == nil {
			v.running = false
		}
		v.mu.Unlock()
	}
}
