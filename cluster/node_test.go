package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/internal/testutil"
)

func TestThreeNodesReplicateInOrder(t *testing.T) {
	t.Parallel()
	_, ms := startCluster(t, 3)
	leader := waitLeader(t, ms)

	servers, err := leader.node.Load().Servers()
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 3 {
		t.Fatalf("servers = %+v, want 3", servers)
	}
	for _, s := range servers {
		if !s.Voter {
			t.Errorf("%s is not a voter after Join", s.ID)
		}
		if s.Leader != (s.ID == leader.id()) {
			t.Errorf("%s: Leader = %v", s.ID, s.Leader)
		}
	}

	var want []string
	for i := range 50 {
		cmd := fmt.Sprintf("c-%d", i)
		resp, err := leader.node.Load().Apply([]byte(cmd), time.Second)
		if err != nil {
			t.Fatalf("apply %s: %v", cmd, err)
		}
		want = append(want, cmd)
		if resp != len(want) {
			t.Fatalf("apply %s: response %v, want the FSM's %d", cmd, resp, len(want))
		}
	}
	if got := waitSameHistory(t, ms, len(want)); !slices.Equal(got, want) {
		t.Fatalf("history = %q, want %q", got, want)
	}

	stats := leader.node.Load().Stats()
	for k, v := range map[string]string{"state": "Leader", "node_id": leader.id(), "leader_id": leader.id(), "num_peers": "2"} {
		if stats[k] != v {
			t.Errorf("Stats()[%q] = %q, want %q", k, stats[k], v)
		}
	}
	if leader.node.Load().CommitIndex() < uint64(len(want)) {
		t.Errorf("CommitIndex %d < %d commands", leader.node.Load().CommitIndex(), len(want))
	}
}

func TestFollowerRefusesWithNotApplied(t *testing.T) {
	t.Parallel()
	_, ms := startCluster(t, 3)
	leader := waitLeader(t, ms)
	var follower *member
	for _, m := range ms {
		if m != leader {
			follower = m
		}
	}
	f := follower.node.Load()

	_, err := f.Apply([]byte("x"), time.Second)
	if !errors.Is(err, ErrNotLeader) || !errors.Is(err, ErrNotApplied) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Apply on a follower: %v, want ErrNotLeader and ErrNotApplied", err)
	}
	if !errors.Is(err, raft.ErrNotLeader) {
		t.Errorf("Apply on a follower: %v does not wrap raft.ErrNotLeader", err)
	}
	for name, err := range map[string]error{
		"VerifyLeader": f.VerifyLeader(),
		"Barrier":      f.Barrier(time.Second),
		"Join":         f.Join("n9", "127.0.0.1:1"),
		"RemoveServer": f.RemoveServer("n9"),
	} {
		if !errors.Is(err, ErrNotLeader) {
			t.Errorf("%s on a follower: %v, want ErrNotLeader", name, err)
		}
	}
	if err := leader.node.Load().VerifyLeader(); err != nil {
		t.Errorf("VerifyLeader on the leader: %v", err)
	}
	if err := leader.node.Load().Barrier(time.Second); err != nil {
		t.Errorf("Barrier on the leader: %v", err)
	}
	if got := waitSameHistory(t, ms, 0); slices.Contains(got, "x") {
		t.Errorf("the refused command was applied: %q", got)
	}
}

func TestCommandErrorKinds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cause      error
		dispatched bool
		want       []error
		notWant    error
	}{
		{raft.ErrNotLeader, false, []error{ErrNotApplied, ErrNotLeader, raft.ErrNotLeader}, ErrOutcomeUnknown},
		{raft.ErrLeadershipTransferInProgress, false, []error{ErrNotApplied, ErrNotLeader}, ErrOutcomeUnknown},
		{raft.ErrEnqueueTimeout, false, []error{ErrNotApplied, raft.ErrEnqueueTimeout}, ErrOutcomeUnknown},
		{raft.ErrRaftShutdown, false, []error{ErrNotApplied, ErrClosed}, ErrOutcomeUnknown},
		{raft.ErrLeadershipLost, true, []error{ErrOutcomeUnknown, raft.ErrLeadershipLost}, ErrNotApplied},
		{raft.ErrRaftShutdown, true, []error{ErrOutcomeUnknown}, ErrNotApplied},
		{errors.New("disk full"), true, []error{ErrOutcomeUnknown}, ErrNotApplied},
	} {
		t.Run(fmt.Sprintf("%v/dispatched=%v", tc.cause, tc.dispatched), func(t *testing.T) {
			err := commandError(tc.cause, tc.dispatched)
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("%v: not %v", err, w)
				}
			}
			if errors.Is(err, tc.notWant) {
				t.Errorf("%v: is %v", err, tc.notWant)
			}
		})
	}
}

func TestKilledLeaderLosesNothingAndCatchesUp(t *testing.T) {
	t.Parallel()
	for _, store := range []string{LogStoreBolt, LogStoreWAL} {
		t.Run(store, func(t *testing.T) {
			t.Parallel() // a group of its own
			testKilledLeaderLosesNothing(t, store)
		})
	}
}

func testKilledLeaderLosesNothing(t *testing.T, store string) {
	_, ms := startCluster(t, 3, func(c *Config) { c.LogStore = store })
	acked := apply(t, ms, "before", 20)
	waitSameHistory(t, ms, len(acked))
	old := waitLeader(t, ms)

	old.kill(t)
	leader := waitLeader(t, ms)
	if leader == old {
		t.Fatal("the killed node is still leader")
	}
	acked = append(acked, apply(t, ms, "after", 20)...)
	if got := waitSameHistory(t, ms, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("survivors' history = %q, want %q", got, acked)
	}

	old.start(t)
	if got := waitSameHistory(t, ms, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("history after restart = %q, want %q", got, acked)
	}
	// The restarted node is a full voter again: it can be elected.
	if l := waitLeader(t, ms); l == nil {
		t.Fatal("no leader")
	}
}

func TestCloseOfLeaderTransfersLeadership(t *testing.T) {
	t.Parallel()
	_, ms := startCluster(t, 3)
	acked := apply(t, ms, "c", 10)
	old := waitLeader(t, ms)
	term := old.node.Load().raft.CurrentTerm()

	n := old.node.Load()
	old.stop(t)
	if n.transferErr != nil {
		t.Fatalf("Close did not transfer leadership: %v", n.transferErr)
	}
	leader := waitLeader(t, ms)
	if leader == old {
		t.Fatal("the closed node is still leader")
	}
	// A transfer is an election the target starts at once: one term more.
	if got := leader.node.Load().raft.CurrentTerm(); got != term+1 {
		t.Errorf("term after transfer = %d, want %d", got, term+1)
	}
	acked = append(acked, apply(t, ms, "d", 10)...)
	if got := waitSameHistory(t, ms, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("history = %q, want %q", got, acked)
	}
}

func TestSnapshotInstallOnRestartedNode(t *testing.T) {
	t.Parallel()
	// Keep few entries behind a snapshot, so that compaction happens. On
	// bolt: raft-wal compacts a segment only once it is sealed (64 MiB), and
	// serves the entries of its tail segment below its first index still,
	// so the leader would send the node those entries, not its snapshot.
	_, ms := startCluster(t, 3, func(c *Config) { c.TrailingLogs, c.LogStore = 5, LogStoreBolt })
	acked := apply(t, ms, "a", 100)
	waitSameHistory(t, ms, len(acked))
	leader := waitLeader(t, ms)
	// Every node snapshots and compacts its log: the restarted one must
	// come back from its own snapshot.
	for _, m := range ms {
		if err := m.node.Load().Snapshot(); err != nil {
			t.Fatalf("snapshot on %s: %v", m.id(), err)
		}
	}

	var down *member
	for _, m := range ms {
		if m != leader {
			down = m
		}
	}
	downIndex := down.node.Load().AppliedIndex()
	down.kill(t)

	// While it is down the leader moves on and compacts past everything the
	// node has: it can only be caught up by an InstallSnapshot.
	acked = append(acked, apply(t, ms, "b", 50)...)
	leader = waitLeader(t, ms)
	if err := leader.node.Load().Snapshot(); err != nil {
		t.Fatalf("snapshot on the leader: %v", err)
	}
	first, err := leader.node.Load().store.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= downIndex {
		t.Fatalf("leader's log starts at %d, not past the down node's %d: no snapshot install would be needed", first, downIndex)
	}

	down.start(t)
	if got := waitSameHistory(t, ms, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("history after snapshot install = %q, want %q", got, acked)
	}
	// raft restores the FSM before it records the snapshot as its last: the
	// history can be there a moment before the statistic.
	var idx uint64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if idx, _ = strconv.ParseUint(down.node.Load().Stats()["last_snapshot_index"], 10, 64); idx > downIndex {
			break
		}
	}
	if idx <= downIndex {
		t.Errorf("restarted node's last_snapshot_index = %d, want past %d (the leader's snapshot)", idx, downIndex)
	}
	// The FSM knows the index of the snapshot it was restored from, so a
	// linearizable read on the node does not wait for a write to come.
	idx, err = down.node.Load().ReadIndex(5 * time.Second)
	if err != nil {
		t.Fatalf("ReadIndex on the restored node: %v", err)
	}
	if err := down.node.Load().WaitApplied(idx, 5*time.Second); err != nil {
		t.Fatalf("WaitApplied(%d) on the restored node: %v", idx, err)
	}
}

func TestJoinWaitsForCatchUp(t *testing.T) {
	t.Parallel()
	catchUp := func(c *Config) { c.CatchUpTimeout = 2 * time.Second }
	net, ms := startCluster(t, 1, catchUp)
	leader := ms[0]
	apply(t, ms, "a", 10)

	m := newMember(t, net, testutil.NewTestLog(t), "n2", false, catchUp)
	net.isolate(m.cfg.RaftAddr)
	err := leader.node.Load().Join(m.id(), m.cfg.RaftAddr)
	if !errors.Is(err, ErrCatchUpTimeout) {
		t.Fatalf("Join of an unreachable server: %v, want ErrCatchUpTimeout", err)
	}
	servers, _ := leader.node.Load().Servers()
	if i := slices.IndexFunc(servers, func(s Server) bool { return s.ID == "n2" }); i < 0 || servers[i].Voter {
		t.Fatalf("servers = %+v, want n2 as a non-voter", servers)
	}

	net.heal()
	if err := leader.node.Load().Join(m.id(), m.cfg.RaftAddr); err != nil {
		t.Fatalf("Join after healing: %v", err)
	}
	servers, _ = leader.node.Load().Servers()
	if i := slices.IndexFunc(servers, func(s Server) bool { return s.ID == "n2" }); i < 0 || !servers[i].Voter {
		t.Fatalf("servers = %+v, want n2 as a voter", servers)
	}
	ms = append(ms, m)
	waitSameHistory(t, ms, 10)
	if err := leader.node.Load().Join(m.id(), m.cfg.RaftAddr); err != nil {
		t.Errorf("Join of a voter again: %v, want nil", err)
	}
	if err := leader.node.Load().Join("n3", m.cfg.RaftAddr); !errors.Is(err, ErrServerConflict) {
		t.Errorf("Join of another ID at n2's address: %v, want ErrServerConflict", err)
	}

	if err := leader.node.Load().RemoveServer(m.id()); err != nil {
		t.Fatalf("RemoveServer: %v", err)
	}
	servers, _ = leader.node.Load().Servers()
	if len(servers) != 1 {
		t.Fatalf("servers after RemoveServer = %+v", servers)
	}
}

// TestPartitionHealKeepsLogsIdentical drives hashicorp/raft #695's trigger:
// a node (the leader or a follower) is cut off while writers keep applying,
// a new leader is elected if it was the leader, and the partition heals
// while the writes go on; the healed node then handles the new leader's
// AppendEntries and heartbeats at the same time. Afterwards every FSM must
// hold the same sequence, with every acknowledged write exactly once.
func TestPartitionHealKeepsLogsIdentical(t *testing.T) {
	t.Parallel()
	net, ms := startCluster(t, 3)
	waitLeader(t, ms)

	w := startWriters(t, ms, 2)
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		leader := waitLeader(t, ms)
		victim := leader
		if round%2 == 1 {
			for _, m := range ms {
				if m != leader {
					victim = m
				}
			}
		}
		before := w.ackedCount()
		net.isolate(victim.cfg.RaftAddr)
		// The majority keeps (or resumes) committing without the victim.
		testutil.Eventually(t, settle, "writes acknowledged during the partition", func() bool {
			return w.ackedCount() >= before+20
		})
		if victim == leader {
			testutil.Eventually(t, settle, "a new leader in the majority", func() bool {
				for _, m := range ms {
					if m != victim && m.node.Load().IsLeader() {
						return true
					}
				}
				return false
			})
		}
		during := w.ackedCount()
		net.heal()
		testutil.Eventually(t, settle, "writes acknowledged after healing", func() bool {
			return w.ackedCount() >= during+20
		})
		waitLeader(t, ms)
	}
	acked, unknown := w.stop()
	if len(acked) == 0 {
		t.Fatal("no write acknowledged")
	}

	leader := waitLeader(t, ms)
	if err := leader.node.Load().Barrier(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	commit := leader.node.Load().CommitIndex()
	testutil.Eventually(t, settle, "every node applied the leader's commit index", func() bool {
		for _, m := range ms {
			if m.node.Load().AppliedIndex() < commit {
				return false
			}
		}
		return true
	})
	requireSameHistoryOnceApplied(t, ms)

	seen := map[string]int{}
	for _, cmd := range ms[0].fsm.History() {
		seen[cmd]++
	}
	for cmd, n := range seen {
		if n > 1 {
			t.Errorf("%s applied %d times", cmd, n)
		}
		if !acked[cmd] && !unknown[cmd] {
			t.Errorf("%s applied but never acknowledged nor in doubt", cmd)
		}
	}
	for cmd := range acked {
		if seen[cmd] != 1 {
			t.Errorf("acknowledged %s applied %d times", cmd, seen[cmd])
		}
	}
	t.Logf("%d rounds: %d writes acknowledged, %d in doubt, %d entries applied", rounds, len(acked), len(unknown), len(seen))
}

// TestOneWayPartitionOfBusyLeader aims at #695's race more narrowly: the
// leader (given a lease longer than the others' heartbeat timeout, so it
// stays leader) can no longer send, but still receives. The others elect a
// new leader, whose heartbeats of a newer term reach the old leader while
// a flood of proposals keeps its main goroutine dispatching entries. With
// the heartbeat fast path the term can change under that goroutine's feet
// (between its leader check and dispatchLogs reading the term, PR #701's
// interleaving). The window is microseconds wide: with the workaround
// turned off, 52 rounds of this test and the one above showed no
// divergence, so these tests are a net over the trigger, not a
// reproduction; the workaround rests on reading raft.go.
func TestOneWayPartitionOfBusyLeader(t *testing.T) {
	t.Parallel()
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			net, log := newFaultNet(), testutil.NewTestLog(t)
			old := newMember(t, net, log, "n1", true, func(c *Config) {
				c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, time.Second
			})
			ms := []*member{old}
			waitLeader(t, ms)
			for _, id := range []string{"n2", "n3"} {
				m := newMember(t, net, log, id, false)
				if err := old.node.Load().Join(id, m.cfg.RaftAddr); err != nil {
					t.Fatal(err)
				}
				ms = append(ms, m)
			}
			f := startFlood(t, old.node.Load())
			testutil.Eventually(t, settle, "writes before the partition", func() bool { return old.node.Load().CommitIndex() >= 50 })

			net.mute(old.cfg.RaftAddr)
			testutil.Eventually(t, settle, "a new leader among the others", func() bool {
				return ms[1].node.Load().IsLeader() || ms[2].node.Load().IsLeader()
			})
			testutil.Eventually(t, settle, "the old leader steps down", func() bool { return !old.node.Load().IsLeader() })
			net.heal()
			acked, unknown := f.stop()

			leader := waitLeader(t, ms)
			if err := leader.node.Load().Barrier(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			commit := leader.node.Load().CommitIndex()
			testutil.Eventually(t, settle, "every node applied the leader's commit index", func() bool {
				for _, m := range ms {
					if m.node.Load().AppliedIndex() < commit {
						return false
					}
				}
				return true
			})
			requireSameHistoryOnceApplied(t, ms)
			for cmd := range acked {
				if !slices.Contains(old.fsm.History(), cmd) {
					t.Errorf("acknowledged %s lost", cmd)
				}
			}
			t.Logf("%d writes acknowledged, %d in doubt", len(acked), len(unknown))
		})
	}
}

// flood proposes commands to one node without waiting for each, so that
// raft's main goroutine is always dispatching; bounded in count.
type flood struct {
	stopC    chan struct{}
	stopOnce sync.Once
	doneC    chan struct{}
	cmds     []string
	futures  []raft.ApplyFuture
}

func startFlood(t *testing.T, n *Node) *flood {
	f := &flood{stopC: make(chan struct{}), doneC: make(chan struct{})}
	go func() {
		defer close(f.doneC)
		for i := range maxWritesPerWriter {
			select {
			case <-f.stopC:
				return
			default:
			}
			cmd := fmt.Sprintf("f-%d", i)
			f.cmds = append(f.cmds, cmd)
			f.futures = append(f.futures, n.raft.Apply([]byte(cmd), 100*time.Millisecond))
		}
	}()
	t.Cleanup(func() { f.stop() })
	return f
}

// stop ends the flood and sorts its commands by outcome; it waits for every
// future, which raft answers at the latest when the node steps down.
func (f *flood) stop() (acked, unknown map[string]bool) {
	f.stopOnce.Do(func() { close(f.stopC) })
	<-f.doneC
	acked, unknown = map[string]bool{}, map[string]bool{}
	for i, fu := range f.futures {
		err := fu.Error()
		switch {
		case err == nil:
			acked[f.cmds[i]] = true
		case fu.Index() != 0:
			unknown[f.cmds[i]] = true
		}
	}
	return acked, unknown
}

// writers apply unique commands through whichever node takes them, each
// goroutine bounded in count, until stopped.
type writers struct {
	stopC    chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	mu      sync.Mutex // guards acked, unknown
	acked   map[string]bool
	unknown map[string]bool
}

const maxWritesPerWriter = 20000

func startWriters(t *testing.T, ms []*member, count int) *writers {
	w := &writers{stopC: make(chan struct{}), acked: map[string]bool{}, unknown: map[string]bool{}}
	t.Cleanup(func() { w.stop() })
	for g := range count {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for i := 0; i < maxWritesPerWriter; {
				select {
				case <-w.stopC:
					return
				default:
				}
				cmd := fmt.Sprintf("w%d-%d", g, i)
				applied := false
				for _, m := range ms {
					n := m.node.Load()
					if n == nil {
						continue
					}
					_, err := n.Apply([]byte(cmd), 100*time.Millisecond)
					if errors.Is(err, ErrNotApplied) {
						continue
					}
					w.mu.Lock()
					if err == nil {
						w.acked[cmd] = true
					} else {
						w.unknown[cmd] = true
					}
					w.mu.Unlock()
					applied = true
					break
				}
				if applied {
					i++
					continue
				}
				// No node took it (an election): wait a little before the
				// next round of tries.
				select {
				case <-w.stopC:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			t.Errorf("writer %d reached its bound of %d writes", g, maxWritesPerWriter)
		}()
	}
	return w
}

func (w *writers) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func (w *writers) stop() (acked, unknown map[string]bool) {
	w.stopOnce.Do(func() { close(w.stopC) })
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.unknown
}
