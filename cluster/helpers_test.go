package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/rs/zerolog"
)

// Every test of the package calls t.Parallel, and so do most subtests that
// each make a group: a test's nodes listen on ports of their own, keep their
// data in its t.TempDir, and share no variable with another test's, and
// most of a test's time is spent waiting for elections and heartbeats. The
// rounds of TestOneWayPartitionOfBusyLeader do not: each floods its leader,
// and four floods at once on a loaded machine delayed a new leader's
// heartbeats past its 400 ms lease.

// Test timing. Short enough for a quick suite, long enough that a shared
// 2-core machine under -race does not lose leaders to scheduling stalls.
const (
	// Long enough that a loaded CI machine under the race detector does
	// not lose leaders the tests expect to keep.
	testHeartbeat = 500 * time.Millisecond
	testLease     = 400 * time.Millisecond
	testCommit    = 20 * time.Millisecond
	// settle bounds every wait for the cluster to reach a state.
	settle = 15 * time.Second
)

// historyFSM records every command in the order applied; its snapshots are
// the whole history, so a restored replica must equal the others exactly.
type historyFSM struct {
	mu      sync.Mutex // guards history
	history []string
}

func (f *historyFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.history = append(f.history, string(l.Data))
	return len(f.history)
}

func (f *historyFSM) Snapshot() (raft.FSMSnapshot, error) {
	return historySnapshot(f.History()), nil
}

func (f *historyFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var h []string
	if err := json.NewDecoder(rc).Decode(&h); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.history = h
	return nil
}

func (f *historyFSM) History() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.history)
}

type historySnapshot []string

func (s historySnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]string(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (historySnapshot) Release() {}

// faultNet decides which RPCs get through: a node it isolates can neither
// send to nor receive from any other (every node's transport asks it
// before sending), as a network partition would.
type faultNet struct {
	mu       sync.Mutex // guards isolated, muted
	isolated map[raft.ServerAddress]bool
	muted    map[raft.ServerAddress]bool // can receive, cannot send
}

var errPartitioned = errors.New("test: partitioned")

func newFaultNet() *faultNet {
	return &faultNet{isolated: map[raft.ServerAddress]bool{}, muted: map[raft.ServerAddress]bool{}}
}

// mute cuts addr one way: its RPCs (and so its answers to nothing, as
// raft's answers ride on the caller's connection) fail, RPCs to it pass.
func (f *faultNet) mute(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.muted[raft.ServerAddress(addr)] = true
}

func (f *faultNet) isolate(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.isolated[raft.ServerAddress(addr)] = true
}

func (f *faultNet) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.isolated)
	clear(f.muted)
}

func (f *faultNet) cut(from, to raft.ServerAddress) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.isolated[from] || f.isolated[to] || f.muted[from]
}

// faultTransport drops (fails) every RPC its faultNet cuts.
type faultTransport struct {
	netTransport
	net *faultNet
}

func (t *faultTransport) check(target raft.ServerAddress) error {
	if t.net.cut(t.LocalAddr(), target) {
		return errPartitioned
	}
	return nil
}

func (t *faultTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if err := t.check(target); err != nil {
		return err
	}
	return t.netTransport.AppendEntries(id, target, args, resp)
}

func (t *faultTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := t.check(target); err != nil {
		return err
	}
	return t.netTransport.RequestVote(id, target, args, resp)
}

func (t *faultTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := t.check(target); err != nil {
		return err
	}
	return t.netTransport.RequestPreVote(id, target, args, resp)
}

func (t *faultTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if err := t.check(target); err != nil {
		return err
	}
	return t.netTransport.InstallSnapshot(id, target, args, resp, data)
}

func (t *faultTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if err := t.check(target); err != nil {
		return err
	}
	return t.netTransport.TimeoutNow(id, target, args, resp)
}

func (t *faultTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if err := t.check(target); err != nil {
		return nil, err
	}
	p, err := t.netTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &faultPipeline{AppendPipeline: p, t: t, target: target}, nil
}

type faultPipeline struct {
	raft.AppendPipeline
	t      *faultTransport
	target raft.ServerAddress
}

func (p *faultPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if err := p.t.check(p.target); err != nil {
		return nil, err
	}
	return p.AppendPipeline.AppendEntries(args, resp)
}

// member is one node of a test cluster, across restarts: its config (and
// so its data dir and address) stays, its *Node changes.
type member struct {
	cfg  Config
	fsm  *historyFSM // replaced on each start; read by the test goroutine only
	net  *faultNet
	node atomic.Pointer[Node] // nil while down
}

func newMember(t testing.TB, net *faultNet, log *testutil.TestLog, id string, bootstrap bool, opts ...func(*Config)) *member {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Bootstrap = bootstrap
	cfg.Logger = zerolog.New(log).Level(zerolog.InfoLevel).With().Str("node", id).Logger()
	cfg.HeartbeatTimeout = testHeartbeat
	cfg.ElectionTimeout = testHeartbeat
	cfg.LeaderLeaseTimeout = testLease
	cfg.CommitTimeout = testCommit
	cfg.TransferTimeout = 2 * time.Second
	cfg.CatchUpTimeout = 10 * time.Second
	for _, o := range opts {
		o(&cfg)
	}
	m := &member{cfg: cfg, net: net}
	m.start(t)
	t.Cleanup(func() { m.stop(t) })
	return m
}

// start opens the node with a new, empty FSM, as a new process would have;
// after the first start it listens on the same address, which the others
// have in their configuration.
func (m *member) start(t testing.TB) {
	t.Helper()
	m.fsm = &historyFSM{}
	m.cfg.FSM = m.fsm
	n, err := open(m.cfg, testHooks{
		wrapTransport: func(inner netTransport) netTransport {
			return &faultTransport{netTransport: inner, net: m.net}
		},
	})
	if err != nil {
		t.Fatalf("open %s: %v", m.cfg.NodeID, err)
	}
	m.cfg.RaftAddr = n.Addr()
	m.node.Store(n)
}

// stop closes the node gracefully (leadership transfer included).
func (m *member) stop(t testing.TB) {
	t.Helper()
	if n := m.node.Swap(nil); n != nil {
		if err := n.Close(); err != nil {
			t.Errorf("close %s: %v", m.cfg.NodeID, err)
		}
	}
}

// kill stops the node as a crash would: no leadership transfer.
func (m *member) kill(t testing.TB) {
	t.Helper()
	n := m.node.Swap(nil)
	n.closeOnce.Do(func() { n.closeErr = n.shutdown() })
	if n.closeErr != nil {
		t.Errorf("kill %s: %v", m.cfg.NodeID, n.closeErr)
	}
}

func (m *member) id() string { return m.cfg.NodeID }

// startCluster bootstraps the first of size members and joins the others
// through the leader, as non-voters first.
func startCluster(t testing.TB, size int, opts ...func(*Config)) (*faultNet, []*member) {
	t.Helper()
	net, log := newFaultNet(), testutil.NewTestLog(t)
	ms := []*member{newMember(t, net, log, "n1", true, opts...)}
	waitLeader(t, ms)
	for i := 2; i <= size; i++ {
		m := newMember(t, net, log, fmt.Sprintf("n%d", i), false, opts...)
		if err := joinThroughLeader(t, ms, m.id(), m.cfg.RaftAddr); err != nil {
			t.Fatalf("join %s: %v", m.id(), err)
		}
		ms = append(ms, m)
	}
	return net, ms
}

// joinThroughLeader asks whichever of ms leads to join id at addr, and
// returns how the join ended. A leader that steps down meanwhile (a loaded
// machine delays a heartbeat past the 400 ms lease) is waited out, and the
// join asked again of the next one, within settle: the tests test how a
// join ends, not the lease. Join is idempotent for a member already added.
func joinThroughLeader(t testing.TB, ms []*member, id, addr string) error {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		err := waitLeader(t, ms).node.Load().Join(id, addr)
		if !errors.Is(err, ErrNotLeader) || time.Now().After(deadline) {
			return err
		}
		t.Logf("join %s: %v; again, through the next leader", id, err)
	}
}

// waitLeader waits until exactly one running member of ms is leader and
// every running member names it, and returns it.
func waitLeader(t testing.TB, ms []*member) *member {
	t.Helper()
	var leader *member
	testutil.Eventually(t, settle, "one leader that every node knows", func() bool {
		leader = nil
		for _, m := range ms {
			if n := m.node.Load(); n != nil && n.IsLeader() {
				if leader != nil {
					return false
				}
				leader = m
			}
		}
		if leader == nil {
			return false
		}
		for _, m := range ms {
			if n := m.node.Load(); n != nil {
				if id, _ := n.Leader(); id != leader.id() {
					return false
				}
			}
		}
		return true
	})
	return leader
}

// apply applies count commands prefix-0, prefix-1, ... each through
// whichever member of ms leads when it is sent, and returns them. Under
// load a leader steps down now and then (its 400 ms lease runs out while
// it is starved), and the tests are about what the cluster keeps, not about
// who leads it: a command raft certainly did not take (ErrNotApplied) is
// sent again to the next leader; one whose outcome is unknown
// (ErrOutcomeUnknown: written to the old leader's log, perhaps committed)
// is looked for in the next leader's history once a barrier has applied all
// that leader holds, and sent again only if it is not there, so that it is
// in the history exactly once either way.
func apply(t *testing.T, ms []*member, prefix string, count int) []string {
	t.Helper()
	var cmds []string
	for i := range count {
		cmd := fmt.Sprintf("%s-%d", prefix, i)
		deadline := time.Now().Add(settle)
		for !applyOnce(t, ms, cmd, deadline) {
			// applyOnce fails the test once deadline has passed.
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// applyOnce tries cmd through the current leader and reports whether it is
// now applied; it fails the test on an error of neither kind, or once
// deadline has passed.
func applyOnce(t *testing.T, ms []*member, cmd string, deadline time.Time) bool {
	t.Helper()
	if time.Now().After(deadline) {
		t.Fatalf("apply %s: not applied within %v", cmd, settle)
	}
	leader := waitLeader(t, ms)
	_, err := leader.node.Load().Apply([]byte(cmd), time.Second)
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrNotApplied):
		t.Logf("apply %s on %s: %v; again through the next leader", cmd, leader.id(), err)
		return false
	case !errors.Is(err, ErrOutcomeUnknown):
		t.Fatalf("apply %s on %s: %v", cmd, leader.id(), err)
	}
	t.Logf("apply %s on %s: %v; looking for it at the next leader", cmd, leader.id(), err)
	// The leader's barrier commits every entry its log holds; an entry
	// it does not hold can no longer commit (Raft's leader completeness).
	for time.Now().Before(deadline) {
		next := waitLeader(t, ms)
		if err := next.node.Load().Barrier(time.Second); err != nil {
			t.Logf("barrier on %s: %v", next.id(), err)
			continue
		}
		return slices.Contains(next.fsm.History(), cmd)
	}
	t.Fatalf("apply %s: outcome still unknown after %v", cmd, settle)
	return false
}

// waitSameHistory waits until every running member's FSM holds the same
// history, at least want long, and returns it.
func waitSameHistory(t *testing.T, ms []*member, want int) []string {
	t.Helper()
	var h []string
	testutil.Eventually(t, settle, "identical FSM histories on every node", func() bool {
		h = nil
		first := true
		for _, m := range ms {
			if m.node.Load() == nil {
				continue
			}
			mh := m.fsm.History()
			if first {
				h, first = mh, false
			} else if !slices.Equal(h, mh) {
				return false
			}
		}
		return len(h) >= want
	})
	return h
}

// requireSameHistory fails unless every running member's history is
// identical, showing where the first two that differ diverge.
func requireSameHistory(t *testing.T, ms []*member) {
	t.Helper()
	var ref *member
	for _, m := range ms {
		if m.node.Load() == nil {
			continue
		}
		if ref == nil {
			ref = m
			continue
		}
		a, b := ref.fsm.History(), m.fsm.History()
		if !slices.Equal(a, b) {
			i := 0
			for i < len(a) && i < len(b) && a[i] == b[i] {
				i++
			}
			t.Fatalf("%s and %s diverge at entry %d of %d/%d: %q vs %q", ref.id(), m.id(), i, len(a), len(b),
				a[i:min(len(a), i+3)], b[i:min(len(b), i+3)])
		}
	}
}

// requireSameHistoryOnceApplied is requireSameHistory for members whose raft
// has handed their FSMs every entry there will be (AppliedIndex at the
// leader's commit index, the writers stopped). AppliedIndex counts an entry
// once it is queued for the FSM goroutine, before the FSM applies it, so a
// member's history may still be short of it: this first waits, up to
// settle, for every running member's history to be as long as the others'.
// Histories that never match, in length or in content, fail the check,
// which shows where they part.
func requireSameHistoryOnceApplied(t *testing.T, ms []*member) {
	t.Helper()
	sameLength := func() bool {
		n := -1
		for _, m := range ms {
			if m.node.Load() == nil {
				continue
			}
			if l := len(m.fsm.History()); n == -1 {
				n = l
			} else if l != n {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(settle); !sameLength() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	requireSameHistory(t, ms)
}

// zerologFor logs to t.Log for the rest of the test.
func zerologFor(t testing.TB) zerolog.Logger {
	return zerolog.New(testutil.NewTestLog(t)).Level(zerolog.InfoLevel)
}
