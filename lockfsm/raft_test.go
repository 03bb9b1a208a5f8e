package lockfsm_test

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/rs/zerolog"
)

// node is one member of a test group: a cluster.Node over a lock FSM with
// the system clock.
type node struct {
	n   *cluster.Node
	fsm *lockfsm.FSM

	mu     sync.Mutex
	grants []string // OnGrant's calls, "waiter key token"
}

func openNode(t *testing.T, id string, bootstrap bool) *node {
	t.Helper()
	lcfg := locker.DefaultConfig()
	lcfg.Shards, lcfg.FirstToken = 8, 1
	nd := &node{}
	f, err := lockfsm.New(lcfg, lockfsm.OnGrant(func(waiter, key []byte, tokens []uint64) {
		token := uint64(0) // ended ungranted
		if len(tokens) > 0 {
			token = tokens[0]
		}
		nd.mu.Lock()
		nd.grants = append(nd.grants, fmt.Sprintf("%s %s %d", waiter, key, token))
		nd.mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := cluster.DefaultConfig()
	cfg.NodeID, cfg.RaftAddr, cfg.DataDir, cfg.Bootstrap, cfg.FSM = id, "127.0.0.1:0", t.TempDir(), bootstrap, f
	cfg.Logger = zerolog.New(testutil.NewTestLog(t)).Level(zerolog.WarnLevel).With().Str("node", id).Logger()
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = 300*time.Millisecond, 300*time.Millisecond
	cfg.LeaderLeaseTimeout, cfg.CommitTimeout = 200*time.Millisecond, 20*time.Millisecond
	n, err := cluster.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nd.n, nd.fsm = n, f
	t.Cleanup(func() { n.Close(); f.Table().Close() })
	return nd
}

// propose applies cmds through nd, which must lead, and returns the results.
func (nd *node) propose(t *testing.T, cmds ...lockfsm.Command) []lockfsm.Result {
	t.Helper()
	out, err := nd.n.Apply(lockfsm.AppendEntry(nil, cmds), 5*time.Second)
	if err != nil {
		t.Fatalf("Apply %+v: %v", cmds, err)
	}
	res, ok := out.([]lockfsm.Result)
	if !ok {
		t.Fatalf("Apply %+v answered %T %v", cmds, out, out)
	}
	return res
}

// beginTerm is what a new leader does first: its term and token floor.
func (nd *node) beginTerm(t *testing.T) uint64 {
	t.Helper()
	term, err := strconv.ParseUint(nd.n.Stats()["term"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	nd.propose(t, lockfsm.Command{Op: lockfsm.OpTerm, Term: term, Floor: locker.BootEpochToken(time.Now())})
	return term
}

func leaderOf(t *testing.T, nodes []*node) *node {
	t.Helper()
	var leader *node
	testutil.Eventually(t, 15*time.Second, "a leader", func() bool {
		for _, nd := range nodes {
			if nd.n.IsLeader() {
				leader = nd
				return true
			}
		}
		return false
	})
	return leader
}

// TestLeaseSurvivesFailover: three nodes replicate a lease; the leader goes
// away; the lease outlives its holder's deadline on the new leader (no
// replica ends it early), ends only when the new leader fires it, and the
// next grant's token is higher than every token before.
func TestLeaseSurvivesFailover(t *testing.T) {
	n1 := openNode(t, "n1", true)
	leaderOf(t, []*node{n1})
	nodes := []*node{n1}
	for i := 2; i <= 3; i++ {
		nd := openNode(t, fmt.Sprintf("n%d", i), false)
		if err := n1.n.Join(nd.n.ID(), nd.n.Addr()); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, nd)
	}
	n1.beginTerm(t)

	const ttl = 500 * time.Millisecond
	sent := time.Now()
	res := n1.propose(t, lockfsm.Command{Op: lockfsm.OpAcquire, Key: []byte("job"), TTL: ttl, Owner: []byte("w1")})
	if !res[0].Granted {
		t.Fatalf("ACQUIRE = %+v", res[0])
	}
	first := res[0].Token
	testutil.Eventually(t, 10*time.Second, "every replica holds the lease", func() bool {
		for _, nd := range nodes {
			if !nd.fsm.Table().Verify([]byte("job"), first) {
				return false
			}
		}
		return true
	})

	n1.n.Close() // hands leadership to another voter
	leader := leaderOf(t, nodes[1:])
	term := leader.beginTerm(t)
	if res := leader.propose(t, lockfsm.Command{Op: lockfsm.OpAcquire, Key: []byte("job"), TTL: ttl, Owner: []byte("w2")}); res[0].Granted {
		t.Fatal("the new leader granted a lock whose lease had not been fired")
	}

	// The new leader's clock decides: fire what it finds due until the
	// lease is gone, never before the holder's own deadline (sent + ttl).
	var fired time.Time
	testutil.Eventually(t, 10*time.Second, "the lease fired", func() bool {
		due := leader.fsm.Table().CollectDue(16)
		if len(due) == 0 {
			return false
		}
		if leader.propose(t, lockfsm.Command{Op: lockfsm.OpFire, Term: term, Due: due})[0].N == 0 {
			return false
		}
		fired = time.Now()
		return true
	})
	if held := fired.Sub(sent); held < ttl {
		t.Fatalf("the lease ended %s after its ACQUIRE was sent, before its ttl %s", held, ttl)
	}
	res = leader.propose(t, lockfsm.Command{Op: lockfsm.OpAcquire, Key: []byte("job"), TTL: ttl, Owner: []byte("w2")})
	if !res[0].Granted || res[0].Token <= first {
		t.Fatalf("ACQUIRE after the fire = %+v, want a token above %d", res[0], first)
	}
	for _, nd := range nodes[1:] {
		testutil.Eventually(t, 10*time.Second, "the replicas agree", func() bool {
			return nd.fsm.Table().Verify([]byte("job"), res[0].Token) && !nd.fsm.Table().Verify([]byte("job"), first)
		})
	}
}

// TestDutiesBeginTermsAndExpire: with each node running the leader's
// duties, the leader begins its term (tokens then start above its boot-epoch
// floor) and leases expire by themselves through the log, on every replica,
// never before their ttl; after the leader goes, the next one does the same.
func TestDutiesBeginTermsAndExpire(t *testing.T) {
	n1 := openNode(t, "n1", true)
	nodes := []*node{n1}
	leaderOf(t, nodes)
	for i := 2; i <= 3; i++ {
		nd := openNode(t, fmt.Sprintf("n%d", i), false)
		if err := n1.n.Join(nd.n.ID(), nd.n.Addr()); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, nd)
	}
	duties := map[*node]*lockfsm.Duties{}
	for _, nd := range nodes {
		d := lockfsm.StartDuties(nd.n, nd.fsm, 10*time.Millisecond, 0, zerolog.New(testutil.NewTestLog(t)).Level(zerolog.WarnLevel))
		duties[nd] = d
		t.Cleanup(func() {
			if duties[nd] != nil {
				d.Stop()
			}
		})
	}

	var last uint64
	expireOnce := func(leader *node, others []*node) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, "the leader's term begun", func() bool { return duties[leader].Term() == leader.n.Term() })
		const ttl = 300 * time.Millisecond
		sent := time.Now()
		res := leader.propose(t, lockfsm.Command{Op: lockfsm.OpAcquire, Key: []byte("job"), TTL: ttl})
		if !res[0].Granted || res[0].Token <= last || res[0].Token < locker.BootEpochToken(sent.Add(-time.Minute)) {
			t.Fatalf("ACQUIRE = %+v, want a token above %d and above the term's floor", res[0], last)
		}
		last = res[0].Token
		testutil.Eventually(t, 10*time.Second, "the lease expired on every replica", func() bool {
			for _, nd := range append([]*node{leader}, others...) {
				if nd.fsm.Table().Verify([]byte("job"), last) {
					return false
				}
			}
			return true
		})
		if held := time.Since(sent); held < ttl {
			t.Fatalf("the lease ended %s after its ACQUIRE was sent, before its ttl %s", held, ttl)
		}
	}
	expireOnce(n1, nodes[1:])
	oldTerm := n1.n.Term()
	duties[n1].Stop()
	delete(duties, n1)
	n1.n.Close()
	leader := leaderOf(t, nodes[1:])
	if leader.n.Term() <= oldTerm {
		t.Fatalf("new leader's term %d, want above %d", leader.n.Term(), oldTerm)
	}
	var follower *node
	for _, nd := range nodes[1:] {
		if nd != leader {
			follower = nd
		}
	}
	expireOnce(leader, []*node{follower})
}

func (nd *node) granted() []string {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return slices.Clone(nd.grants)
}

// TestWaitsAcrossFailover: waits queued through one leader are handed off
// by the next, with the nodes' duties running: the lease they wait for
// expires through the new leader's OpFire, the head of the queue gets it
// on every replica with the same token, and a wait whose client is gone
// (nobody cancels it) is ended at its deadline by the leader.
func TestWaitsAcrossFailover(t *testing.T) {
	n1 := openNode(t, "n1", true)
	nodes := []*node{n1}
	leaderOf(t, nodes)
	for i := 2; i <= 3; i++ {
		nd := openNode(t, fmt.Sprintf("n%d", i), false)
		if err := n1.n.Join(nd.n.ID(), nd.n.Addr()); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, nd)
	}
	duties := map[*node]*lockfsm.Duties{}
	for _, nd := range nodes {
		duties[nd] = lockfsm.StartDuties(nd.n, nd.fsm, 10*time.Millisecond, 0, zerolog.New(testutil.NewTestLog(t)).Level(zerolog.WarnLevel))
	}
	t.Cleanup(func() {
		for _, d := range duties {
			d.Stop()
		}
	})
	testutil.Eventually(t, 10*time.Second, "n1's term begun", func() bool { return duties[n1].Term() == n1.n.Term() })

	const ttl = 400 * time.Millisecond
	holder := n1.propose(t, lockfsm.Command{Op: lockfsm.OpAcquire, Key: []byte("job"), TTL: ttl})[0]
	res := n1.propose(t,
		lockfsm.Command{Op: lockfsm.OpWait, Key: []byte("job"), TTL: time.Minute, Waiter: []byte("n2/c1/1"), Wait: time.Minute},
		lockfsm.Command{Op: lockfsm.OpWait, Key: []byte("job"), TTL: time.Minute, Waiter: []byte("n3/c4/1"), Wait: 2 * time.Second})
	if !holder.Granted || !res[0].Queued || !res[1].Queued {
		t.Fatalf("ACQUIRE %+v, WAITs %+v", holder, res)
	}

	duties[n1].Stop()
	delete(duties, n1)
	n1.n.Close()
	rest := nodes[1:]
	leaderOf(t, rest)
	var first string
	for _, nd := range rest {
		testutil.Eventually(t, 10*time.Second, "the head of the queue granted on "+nd.n.ID(), func() bool {
			return len(nd.granted()) >= 1
		})
		got := nd.granted()[0]
		var token uint64
		if _, err := fmt.Sscanf(got, "n2/c1/1 job %d", &token); err != nil || token <= holder.Token {
			t.Fatalf("%s: %q, want n2/c1/1 granted first, a token above %d", nd.n.ID(), got, holder.Token)
		}
		if first == "" {
			first = got
		} else if got != first {
			t.Fatalf("the replicas handed the lock over differently: %q and %q", first, got)
		}
	}
	// The second waiter's node never cancels: the leader ends its wait.
	for _, nd := range rest {
		testutil.Eventually(t, 10*time.Second, "the second wait ended at its deadline on "+nd.n.ID(), func() bool {
			return slices.Contains(nd.granted(), "n3/c4/1 job 0")
		})
	}
	if st, _ := rest[0].fsm.Table().Status([]byte("job")); st.Waiters != 0 {
		t.Fatalf("%d waiters left", st.Waiters)
	}
}
