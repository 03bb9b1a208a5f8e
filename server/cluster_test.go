package server

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/keyslot"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/internal/tlstest"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/persist"
	"github.com/leasehold/leasehold/replica"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// The cluster tests call t.Parallel, but for TestClusterFullRestartAndRecover,
// which brings its nodes back on ports it let go: each starts a group of
// its own, on ports the system picks and in directories of its own, and
// spends most of its time waiting for elections and commits, little of it
// on the CPU. Those the transport passes run (transport_test.go) run in
// parallel there too.

// clusterNode is one member of a test cluster: a real server on random
// loopback ports (RESP and Raft).
type clusterNode struct {
	*testServer
	id string
}

// startClusterNode starts node id over dir, the first member of a new group
// when bootstrap is set.
func startClusterNode(t *testing.T, id, dir string, bootstrap bool, opts ...option) *clusterNode {
	t.Helper()
	return startClusterNodeAt(t, id, dir, "127.0.0.1:0", bootstrap, opts...)
}

// startClusterNodeAt is startClusterNode with the Raft address raftAddr,
// for a node that must come back at the same address.
func startClusterNodeAt(t *testing.T, id, dir, raftAddr string, bootstrap bool, opts ...option) *clusterNode {
	t.Helper()
	cc := cluster.DefaultConfig()
	cc.NodeID, cc.RaftAddr, cc.DataDir, cc.Bootstrap = id, raftAddr, dir, bootstrap
	cluster.TestingTimeouts(&cc)
	log := zerolog.New(testutil.NewTestLog(t)).Level(zerolog.WarnLevel).With().Str("node", id).Logger()
	ts := startServerLogging(t, log, append([]option{func(c *Config) { c.Cluster = &cc }}, opts...)...)
	return &clusterNode{testServer: ts, id: id}
}

// others is nodes but one.
func others(nodes []*clusterNode, one *clusterNode) []*clusterNode {
	var rest []*clusterNode
	for _, n := range nodes {
		if n != one {
			rest = append(rest, n)
		}
	}
	return rest
}

// clusterInfo is a node's CLUSTER INFO as a map.
func clusterInfo(t *testing.T, rc *redis.Client) map[string]string {
	t.Helper()
	text, err := rc.Do(ctx(t), "CLUSTER", "INFO").Text()
	if err != nil {
		t.Fatalf("CLUSTER INFO: %v", err)
	}
	info := map[string]string{}
	for _, line := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			info[k] = v
		}
	}
	return info
}

// waitLeader waits until one of nodes leads with its term begun, and
// returns it.
func waitLeader(t *testing.T, nodes ...*clusterNode) *clusterNode {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.replica.Ready() {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no leader within 10s")
	return nil
}

// startCluster starts a group of n nodes: the first bootstraps, the others
// join through CLUSTER ADDNODE on it.
func startCluster(t *testing.T, n int, opts ...func(id string) option) []*clusterNode {
	t.Helper()
	optsOf := func(id string) []option {
		var os []option
		for _, o := range opts {
			os = append(os, o(id))
		}
		return os
	}
	nodes := []*clusterNode{startClusterNode(t, "n1", t.TempDir(), true, optsOf("n1")...)}
	waitLeader(t, nodes[0])
	for i := 2; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		node := startClusterNode(t, id, t.TempDir(), false, optsOf(id)...)
		addNode(t, nodes, node)
		nodes = append(nodes, node)
	}
	return nodes
}

// addNode adds node to the group of members through its leader, again on
// the next leader if a loaded machine loses the leader meanwhile (adding
// the same node twice is a no-op).
func addNode(t *testing.T, members []*clusterNode, node *clusterNode) {
	t.Helper()
	var err error
	for range 3 {
		leader := waitLeader(t, members...)
		if err = leader.client().Do(ctx(t), "CLUSTER", "ADDNODE", node.id, node.RaftAddr()).Err(); err == nil {
			return
		}
	}
	t.Fatalf("CLUSTER ADDNODE %s: %v", node.id, err)
}

func TestClusterLeaseSurvivesLeaderLoss(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes...)
	lc := leader.client()
	c := ctx(t)

	token, err := lc.Do(c, "ACQUIRE", "job", 60000, "OWNER", "w1").Uint64()
	if err != nil {
		t.Fatalf("ACQUIRE on the leader: %v", err)
	}
	if err := lc.Do(c, "EXTEND", "job", token, 60000).Err(); err != nil {
		t.Fatalf("EXTEND: %v", err)
	}
	info := clusterInfo(t, lc)
	if n := info["cluster_known_nodes"]; n != "3" {
		t.Fatalf("cluster_known_nodes %q, want 3", n)
	}
	// The ACQUIRE and the EXTEND, each a round of its own, went in an
	// entry each.
	entries, _ := strconv.Atoi(info["cluster_proposed_entries"])
	batches, _ := strconv.Atoi(info["cluster_proposed_batches"])
	if entries < 2 || batches < entries {
		t.Fatalf("cluster_proposed_entries %q and _batches %q, want at least 2, and batches at least entries",
			info["cluster_proposed_entries"], info["cluster_proposed_batches"])
	}

	rest := others(nodes, leader)
	if err := leader.Close(); err != nil {
		t.Logf("closing the leader: %v", err)
	}
	next := waitLeader(t, rest...)
	nc := next.client()
	if ok, err := nc.Do(c, "VERIFY", "job", token).Int(); err != nil || ok != 1 {
		t.Fatalf("VERIFY on the new leader = %d, %v; want the lease kept", ok, err)
	}
	if err := nc.Do(c, "ACQUIRE", "job", 1000).Err(); err != redis.Nil {
		t.Fatalf("ACQUIRE of a held lock on the new leader: %v, want nil", err)
	}
	// The same owner gets its lease back, with its token.
	if again, err := nc.Do(c, "ACQUIRE", "job", 60000, "OWNER", "w1").Uint64(); err != nil || again != token {
		t.Fatalf("ACQUIRE by the holder's owner = %d, %v; want %d", again, err, token)
	}
	if ok, err := nc.Do(c, "RELEASE", "job", token).Int(); err != nil || ok != 1 {
		t.Fatalf("RELEASE = %d, %v", ok, err)
	}
	next2, err := nc.Do(c, "ACQUIRE", "job", 1000).Uint64()
	if err != nil || next2 <= token {
		t.Fatalf("ACQUIRE after the failover = %d, %v; want a token above %d", next2, err, token)
	}
}

func TestClusterModeNeedsNoPersist(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Cluster = &cluster.Config{}
	cfg.Persist.Dir = t.TempDir()
	if _, err := New(cfg, zerolog.Nop()); err == nil {
		t.Fatal("New accepted a data directory for persist in cluster mode")
	}
}

// A pipeline's changes go to the log together, but every reply keeps its
// place: errors found before proposing, reads, and results.
func TestClusterPipelineKeepsReplyOrder(t *testing.T) {
	t.Parallel()
	node := startCluster(t, 1)[0]
	c := ctx(t)
	before := node.replica.AppliedIndex()
	pipe := node.client().Pipeline()
	var acquires []*redis.Cmd
	for i := range 40 {
		acquires = append(acquires, pipe.Do(c, "ACQUIRE", fmt.Sprintf("k%d", i), 60000))
	}
	badTTL := pipe.Do(c, "ACQUIRE", "k0", "soon")
	again := pipe.Do(c, "ACQUIRE", "k0", 60000)
	verify := pipe.Do(c, "VERIFY", "k1", 0) // a read between changes
	release := pipe.Do(c, "RELEASE", "k2", 0)
	create := pipe.Do(c, "CREATE", "sem", "LIMIT", 2)
	unknown := pipe.Do(c, "NOSUCHCOMMAND")
	mrelease := pipe.Do(c, "MRELEASE", "k3", 1, "k4", 1)
	if _, err := pipe.Exec(c); err == nil {
		t.Fatal("the pipeline's errors were not reported")
	}
	// One pipeline, read at once, is a handful of entries, not one per
	// change (the read and the unknown command split the round's batch).
	if entries := node.replica.AppliedIndex() - before; entries > 8 {
		t.Errorf("the pipeline's 44 changes took %d log entries", entries)
	}
	var tokens []uint64
	for i, cmd := range acquires {
		tok, err := cmd.Uint64()
		if err != nil {
			t.Fatalf("ACQUIRE k%d: %v", i, err)
		}
		tokens = append(tokens, tok)
	}
	if err := badTTL.Err(); err == nil || !strings.Contains(err.Error(), "syntax") {
		t.Errorf("ACQUIRE with a bad ttl: %v", err)
	}
	if err := again.Err(); err != redis.Nil {
		t.Errorf("ACQUIRE of a held lock: %v, want nil", err)
	}
	if v, err := verify.Int(); err != nil || v != 0 {
		t.Errorf("VERIFY with token 0 = %d, %v", v, err)
	}
	if v, err := release.Int(); err != nil || v != 0 {
		t.Errorf("RELEASE with token 0 = %d, %v", v, err)
	}
	if v, err := create.Int(); err != nil || v != 1 {
		t.Errorf("CREATE = %d, %v", v, err)
	}
	if err := unknown.Err(); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("unknown command: %v", err)
	}
	if v, err := mrelease.Int(); err != nil || v != 0 {
		t.Errorf("MRELEASE of wrong tokens = %d, %v", v, err)
	}
	// The tokens are real: each VERIFYs, and RELEASE ends it.
	for i, tok := range tokens[:5] {
		if v, err := node.client().Do(c, "VERIFY", fmt.Sprintf("k%d", i), tok).Int(); err != nil || v != 1 {
			t.Errorf("VERIFY k%d %d = %d, %v", i, tok, v, err)
		}
	}
}

// waitFor polls cond every 10 ms for up to 5 s: replication to a follower
// has no event a test can wait on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A follower forwards changes to the leader and checks with it before a
// read, answers READONLY reads from its own replica, and publishes every
// change, in order, to its subscribers.
func TestClusterFollowerReadsAndEvents(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes...)
	follower := others(nodes, leader)[0]
	c := ctx(t)
	sub := follower.client().Subscribe(c, "__lock__:job")
	if _, err := sub.Receive(c); err != nil {
		t.Fatal(err)
	}
	fc := follower.client()
	token, err := leader.client().Do(c, "ACQUIRE", "job", 60000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.client().Do(c, "RELEASE", "job", token).Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"acquired", "released"} {
		msg, err := sub.ReceiveMessage(c)
		if err != nil {
			t.Fatalf("follower's subscriber: %v", err)
		}
		if !strings.HasPrefix(msg.Payload, want) {
			t.Fatalf("follower's event %q, want %s first", msg.Payload, want)
		}
	}
	token, err = leader.client().Do(c, "ACQUIRE", "job", 60000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	other, err := fc.Do(c, "ACQUIRE", "other", 60000).Uint64()
	if err != nil {
		t.Fatalf("ACQUIRE on a follower: %v", err)
	}
	// Linearizable: the follower's read sees the change it just forwarded,
	// and the leader's.
	for key, tok := range map[string]uint64{"other": other, "job": token} {
		if v, err := fc.Do(c, "VERIFY", key, tok).Int(); err != nil || v != 1 {
			t.Errorf("VERIFY %s on the follower = %d, %v", key, v, err)
		}
	}
	ro := follower.client()
	if err := ro.Do(c, "READONLY").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the follower's READONLY VERIFY", func() bool {
		v, err := ro.Do(c, "VERIFY", "job", token).Int()
		return err == nil && v == 1
	})
	if err := ro.Do(c, "READWRITE").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := ro.Do(c, "RELEASE", "job", token).Int(); err != nil || v != 1 {
		t.Errorf("RELEASE on the follower = %d, %v", v, err)
	}
	if v, err := ro.Do(c, "VERIFY", "job", token).Int(); err != nil || v != 0 {
		t.Errorf("VERIFY on the follower after its RELEASE = %d, %v", v, err)
	}
}

// An EPHEMERAL lease ends, through the log, when its connection closes.
func TestClusterEphemeralEndsWithItsConnection(t *testing.T) {
	t.Parallel()
	node := startCluster(t, 1)[0]
	c := ctx(t)
	holder := node.client()
	token, err := holder.Do(c, "ACQUIRE", "job", 60000, "EPHEMERAL").Uint64()
	if err != nil {
		t.Fatal(err)
	}
	holder.Close()
	waitFor(t, "the EPHEMERAL lease's release", func() bool {
		v, err := node.client().Do(c, "VERIFY", "job", token).Int()
		return err == nil && v == 0
	})
}

// With cluster TLS, the nodes talk mutual TLS: a group forms and forwards
// as over plain TCP. (Strangers are refused in the handshake: cluster's
// tests.)
func TestClusterMutualTLS(t *testing.T) {
	t.Parallel()
	files := tlstest.New(t, t.TempDir())
	withNodeCert := func(id string) option {
		cert, key := files.NodeCert(t, id)
		return func(c *Config) {
			c.ClusterTLS = &replica.TLSConfig{CertFile: cert, KeyFile: key, CACertFile: files.CACert, AllowedCNs: []string{"n1", "n2", "n3"}}
		}
	}
	nodes := startCluster(t, 3, withNodeCert)
	c := ctx(t)
	leader := waitLeader(t, nodes...)
	for _, n := range nodes {
		if n == leader {
			continue
		}
		if _, err := n.client().Do(c, "ACQUIRE", "via-"+n.id, 60000).Uint64(); err != nil {
			t.Fatalf("ACQUIRE forwarded over mutual TLS from %s: %v", n.id, err)
		}
	}
}

// ACQUIRE ... WAIT queues in the replicated table: a waiter on a follower
// gets the lock when its holder on the leader releases it, a wait that
// times out answers nil and leaves nothing queued, and the order of the
// queue is the order of the WAITs.
func TestClusterWait(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes...)
	followers := others(nodes, leader)
	c := ctx(t)
	token, err := leader.client().Do(c, "ACQUIRE", "job", 60000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	// A wait that runs out answers nil.
	if err := followers[0].client().Do(c, "ACQUIRE", "job", 60000, "WAIT", 200).Err(); err != redis.Nil {
		t.Fatalf("a wait that times out: %v, want nil", err)
	}
	type grant struct {
		token uint64
		err   error
	}
	// Clients that wait as long as the wait, and do not retry: a retry
	// after a read timeout would be answered by the lock, released by then.
	patient := func(o *redis.Options) { o.ReadTimeout, o.MaxRetries = 30*time.Second, -1 }
	// queue starts a 20 s wait through node, the queue's waiters-th.
	queue := func(node *clusterNode, waiters int) chan grant {
		ch := make(chan grant, 1)
		go func() {
			tok, err := node.run.Client(patient).Do(c, "ACQUIRE", "job", 60000, "WAIT", 20000).Uint64()
			ch <- grant{tok, err}
		}()
		waitFor(t, fmt.Sprintf("waiter %d queued", waiters), func() bool {
			st, err := leader.client().Do(c, "STATUS", "job").Slice()
			return err == nil && fmt.Sprint(statusField(st, "waiters")) == strconv.Itoa(waiters)
		})
		return ch
	}
	// handedAtRelease releases held and returns what waiter got: at the
	// release, not at the wait's deadline (20 s), with a token above held.
	handedAtRelease := func(held uint64, waiter chan grant, which string) grant {
		t.Helper()
		if err := leader.client().Do(c, "RELEASE", "job", held).Err(); err != nil {
			t.Fatal(err)
		}
		var g grant
		select {
		case g = <-waiter:
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s waiter was not handed the lock at its release", which)
		}
		if g.err != nil || g.token <= held {
			t.Fatalf("the %s waiter got %d, %v; want a token above %d", which, g.token, g.err, held)
		}
		return g
	}
	first := queue(followers[0], 1)
	second := queue(followers[1], 2)
	g := handedAtRelease(token, first, "first")
	select {
	case g2 := <-second:
		t.Fatalf("the second waiter got %d, %v while the first holds the lock", g2.token, g2.err)
	default:
	}
	handedAtRelease(g.token, second, "second")
}

// statusField is a STATUS reply's field.
func statusField(st []any, name string) any {
	for i := 0; i+1 < len(st); i += 2 {
		if st[i] == name {
			return st[i+1]
		}
	}
	return nil
}

// A single node's data directory becomes the first node of a cluster: its
// locks and leases come along, to the nodes that join later too, and no
// token goes back, even one above every token the cluster's clock would
// give (a single node whose boot clock ran ahead).
func TestClusterFromSingleNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ahead := locker.BootEpochToken(time.Now().Add(365 * 24 * time.Hour))
	single := startServer(t, func(c *Config) {
		c.Locker.FirstToken = ahead
		c.Persist.Dir = dir
		c.Persist.Fsync = persist.FsyncAlways
	})
	c := ctx(t)
	sc := single.client()
	held, err := sc.Do(c, "ACQUIRE", "held", 600000, "OWNER", "w1").Uint64()
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Do(c, "CREATE", "sem", "LIMIT", 3).Err(); err != nil {
		t.Fatal(err)
	}
	released, err := sc.Do(c, "ACQUIRE", "released", 600000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Do(c, "RELEASE", "released", released).Err(); err != nil {
		t.Fatal(err)
	}
	if err := single.Close(); err != nil {
		t.Fatal(err)
	}

	first := startClusterNode(t, "n1", dir, true)
	waitLeader(t, first)
	var nodes = []*clusterNode{first}
	for _, id := range []string{"n2", "n3"} {
		n := startClusterNode(t, id, t.TempDir(), false)
		addNode(t, nodes, n)
		nodes = append(nodes, n)
	}
	if err := first.Close(); err != nil {
		t.Logf("closing n1: %v", err)
	}
	leader := waitLeader(t, nodes[1:]...)
	lc := leader.client()
	if v, err := lc.Do(c, "VERIFY", "held", held).Int(); err != nil || v != 1 {
		t.Fatalf("VERIFY of the single node's lease on %s = %d, %v", leader.id, v, err)
	}
	if again, err := lc.Do(c, "ACQUIRE", "held", 600000, "OWNER", "w1").Uint64(); err != nil || again != held {
		t.Fatalf("its owner's ACQUIRE = %d, %v; want %d", again, err, held)
	}
	st, err := lc.Do(c, "STATUS", "sem").Slice()
	if err != nil || fmt.Sprint(statusField(st, "limit")) != "3" {
		t.Fatalf("STATUS of the semaphore: %v, %v", st, err)
	}
	next, err := lc.Do(c, "ACQUIRE", "released", 1000).Uint64()
	if err != nil || next <= released {
		t.Fatalf("ACQUIRE after the migration = %d, %v; want above %d", next, err, released)
	}
	other, err := lc.Do(c, "ACQUIRE", "new-key", 1000).Uint64()
	if err != nil || other <= held {
		t.Fatalf("ACQUIRE of a new key = %d, %v; want above every earlier token (%d)", other, err, held)
	}
	kept, err := filepath.Glob(filepath.Join(dir, replica.ImportedDir+"-*"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("the single node's files kept aside: %v, %v", kept, err)
	}
}

// freeRaftAddr is a loopback address whose port was free a moment ago.
func freeRaftAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The whole group stops and starts again on its data directories: a leader
// is elected, the leases are there, and tokens go on above the earlier
// ones. Then, with the majority gone for good, one node recovers alone
// (--recover) with what it has.
func TestClusterFullRestartAndRecover(t *testing.T) {
	ids := []string{"n1", "n2", "n3"}
	dirs := map[string]string{}
	addrs := map[string]string{}
	for _, id := range ids {
		dirs[id], addrs[id] = t.TempDir(), freeRaftAddr(t)
	}
	start := func(recover bool, only ...string) []*clusterNode {
		var nodes []*clusterNode
		for _, id := range only {
			nodes = append(nodes, startClusterNodeAt(t, id, dirs[id], addrs[id], false, func(c *Config) { c.Cluster.Recover = recover }))
		}
		return nodes
	}
	c := ctx(t)
	first := startClusterNodeAt(t, "n1", dirs["n1"], addrs["n1"], true)
	waitLeader(t, first)
	nodes := []*clusterNode{first}
	for _, n := range start(false, "n2", "n3") {
		addNode(t, nodes, n)
		nodes = append(nodes, n)
	}
	token, err := waitLeader(t, nodes...).client().Do(c, "ACQUIRE", "job", 600000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		n.Close()
	}

	nodes = start(false, ids...)
	leader := waitLeader(t, nodes...)
	if v, err := leader.client().Do(c, "VERIFY", "job", token).Int(); err != nil || v != 1 {
		t.Fatalf("VERIFY after a full restart = %d, %v", v, err)
	}
	other, err := leader.client().Do(c, "ACQUIRE", "other", 600000).Uint64()
	if err != nil || other <= token {
		t.Fatalf("ACQUIRE after a full restart = %d, %v; want above %d", other, err, token)
	}
	// n3 recovers with what it has: let it have everything first.
	committed := leader.replica.CommitIndex()
	waitFor(t, "n3 applying every entry", func() bool { return nodes[2].replica.AppliedIndex() >= committed })
	for _, n := range nodes {
		n.Close()
	}

	alone := start(true, "n3")[0]
	waitLeader(t, alone)
	ac := alone.client()
	for key, tok := range map[string]uint64{"job": token, "other": other} {
		if v, err := ac.Do(c, "VERIFY", key, tok).Int(); err != nil || v != 1 {
			t.Fatalf("VERIFY %s on the recovered node = %d, %v", key, v, err)
		}
	}
	if n, _ := clusterInfo(t, ac)["cluster_known_nodes"]; n != "1" {
		t.Errorf("cluster_known_nodes %q after --recover, want 1", n)
	}
}

// With --redirect, Redis Cluster's clients find the leader: CLUSTER SLOTS
// names it for every slot, a follower answers MOVED, and go-redis's
// ClusterClient and redis-cli -c follow.
func TestClusterRedirect(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, func(string) option { return func(c *Config) { c.Redirect = true } })
	leader := waitLeader(t, nodes...)
	follower := others(nodes, leader)[0]
	c := ctx(t)
	err := follower.client().Do(c, "ACQUIRE", "job", 60000).Err()
	want := fmt.Sprintf("MOVED %d %s", keyslot.Of([]byte("job")), leader.addr)
	if err == nil || err.Error() != want {
		t.Fatalf("ACQUIRE on a follower with --redirect: %v, want %s", err, want)
	}
	//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's ClusterClient reads
	slots, err := follower.client().ClusterSlots(c).Result()
	if err != nil || len(slots) != 1 || slots[0].Start != 0 || slots[0].End != keyslot.Slots-1 ||
		len(slots[0].Nodes) != 1 || slots[0].Nodes[0].Addr != leader.addr || slots[0].Nodes[0].ID != leader.id {
		t.Fatalf("CLUSTER SLOTS on a follower = %+v, %v; want every slot at %s", slots, err, leader.addr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{follower.addr}})
	defer cc.Close()
	token, err := cc.Do(c, "ACQUIRE", "job", 60000).Uint64()
	if err != nil {
		t.Fatalf("ACQUIRE through go-redis's ClusterClient: %v", err)
	}
	if v, err := cc.Do(c, "VERIFY", "job", token).Int(); err != nil || v != 1 {
		t.Fatalf("VERIFY through the ClusterClient = %d, %v", v, err)
	}
	host, port := follower.hostPort()
	out, err := exec.CommandContext(c, redisTool(t, "redis-cli"), "-c", "-h", host, "-p", port, "RELEASE", "job", strconv.FormatUint(token, 10)).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("redis-cli -c RELEASE on a follower: %q, %v", out, err)
	}
}

// A wait outlives the leader it was queued through: a client waiting on a
// follower gets the lock once the holder's lease runs out, the expiry
// decided by the next leader, with a token above the holder's.
func TestClusterWaitSurvivesLeaderLoss(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes...)
	followers := others(nodes, leader)
	c := ctx(t)
	held, err := leader.client().Do(c, "ACQUIRE", "job", 1500).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		token uint64
		err   error
	}
	waited := make(chan grant, 1)
	go func() {
		tok, err := followers[0].client().Do(c, "ACQUIRE", "job", 60000, "WAIT", 20000).Uint64()
		waited <- grant{tok, err}
	}()
	waitFor(t, "the waiter queued", func() bool {
		st, err := followers[1].client().Do(c, "STATUS", "job").Slice()
		return err == nil && fmt.Sprint(statusField(st, "waiters")) == "1"
	})
	if err := leader.Close(); err != nil {
		t.Logf("closing the leader: %v", err)
	}
	// Its WAIT bounds the test: a wait that ran out would answer nil.
	g := <-waited
	if g.err != nil || g.token <= held {
		t.Fatalf("the waiter got %d, %v; want a token above %d", g.token, g.err, held)
	}
}

// TestClusterClientUnblock: CLIENT UNBLOCK ends a cluster WAIT as on one
// node (nil, or UNBLOCKED with ERROR), and the wait leaves the replicated
// queue: the lock, once released, goes to nobody.
func TestClusterClientUnblock(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes...)
	follower := nodes[0]
	if follower == leader {
		follower = nodes[1]
	}
	c := ctx(t)
	token, err := leader.client().Do(c, "ACQUIRE", "job", 60000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		reason  []any
		wantErr string
	}{
		{nil, ""},
		{[]any{"TIMEOUT"}, ""},
		{[]any{"ERROR"}, "UNBLOCKED"},
	} {
		waiter := follower.client()
		id, err := waiter.Do(c, "CLIENT", "ID").Int64()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- waiter.Do(c, "ACQUIRE", "job", 60000, "WAIT", 30000).Err() }()
		waitFor(t, "the waiter queued", func() bool {
			st, err := leader.client().Do(c, "STATUS", "job").Slice()
			return err == nil && fmt.Sprint(statusField(st, "waiters")) == "1"
		})
		// The leader queues the wait before the follower's connection
		// parks on the answer: CLIENT UNBLOCK finds it once it has.
		waitBlocked(t, follower.client(), 1)
		n, err := follower.client().Do(c, append([]any{"CLIENT", "UNBLOCK", id}, tc.reason...)...).Int64()
		if err != nil || n != 1 {
			t.Fatalf("CLIENT UNBLOCK %d %v: %d, %v; want 1", id, tc.reason, n, err)
		}
		err = <-done
		switch {
		case tc.wantErr == "" && err != redis.Nil:
			t.Fatalf("the unblocked wait (%v) answered %v, want nil", tc.reason, err)
		case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
			t.Fatalf("the unblocked wait (%v) answered %v, want %s", tc.reason, err, tc.wantErr)
		}
		waitFor(t, "the wait gone from the queue", func() bool {
			st, err := leader.client().Do(c, "STATUS", "job").Slice()
			return err == nil && fmt.Sprint(statusField(st, "waiters")) == "0"
		})
	}
	if n, err := follower.client().Do(c, "CLIENT", "UNBLOCK", 999999).Int64(); err != nil || n != 0 {
		t.Fatalf("CLIENT UNBLOCK of nobody: %d, %v; want 0", n, err)
	}
	if err := leader.client().Do(c, "RELEASE", "job", token).Err(); err != nil {
		t.Fatal(err)
	}
	// Handed to none of the unblocked waiters: free for the next.
	if next, err := follower.client().Do(c, "ACQUIRE", "job", 60000).Uint64(); err != nil || next <= token {
		t.Fatalf("ACQUIRE after the release: %d, %v; want a token above %d", next, err, token)
	}
}

// TestClusterRefusesDifferentSettings: a node started with other lock-table
// settings than the leader's would apply entries otherwise; it learns so
// from the leader's OpSettings, refuses lock commands with an error that
// says why, and CLUSTER INFO names both. The others go on.
func TestClusterRefusesDifferentSettings(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, func(id string) option {
		return func(c *Config) {
			if id == "n3" {
				c.Locker.MaxTTL = time.Hour
			}
		}
	})
	odd := nodes[2]
	c := ctx(t)
	var err error
	waitFor(t, "n3 refusing lock commands", func() bool {
		err = odd.client().Do(c, "ACQUIRE", "job", 1000).Err()
		return err != nil && strings.Contains(err.Error(), "lock-table settings")
	})
	if !strings.Contains(err.Error(), "max-ttl=1h0m0s") || !strings.Contains(err.Error(), "max-ttl=24h0m0s") {
		t.Fatalf("the refusal %q does not name both settings", err)
	}
	if ready, why := odd.Ready(); ready || !strings.Contains(why, "settings") {
		t.Fatalf("Ready on n3: %v %q, want not ready for its settings", ready, why)
	}
	info := clusterInfo(t, odd.client())
	if !strings.Contains(info["cluster_settings_leader"], "max-ttl=24h0m0s") || !strings.Contains(info["cluster_settings"], "max-ttl=1h0m0s") {
		t.Fatalf("CLUSTER INFO: settings %q, leader's %q", info["cluster_settings"], info["cluster_settings_leader"])
	}
	for _, n := range nodes[:2] {
		if err := n.client().Do(c, "ACQUIRE", "job-"+n.id, 1000).Err(); err != nil {
			t.Fatalf("%s, with the leader's settings: %v", n.id, err)
		}
		if v, ok := clusterInfo(t, n.client())["cluster_settings_leader"]; ok {
			t.Fatalf("%s reports a mismatch: %q", n.id, v)
		}
	}
}

// TestClusterMAcquireWait: MACQUIRE ... WAIT queues in the replicated
// table through a follower, holding the keys before the one it waits for,
// and is granted every key when the holder on the leader releases; a wait
// that times out answers a nil array and gives back what it took; a wait
// whose leader stops is granted by the next one.
func TestClusterMAcquireWait(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes...)
	followers := others(nodes, leader)
	c := ctx(t)
	held, err := leader.client().Do(c, "ACQUIRE", "b", 60000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	// Times out: nil, and a (taken on the way) is free again.
	if v, err := followers[0].client().Do(c, "MACQUIRE", 60000, 2, "b", "a", "WAIT", 200).Slice(); err != redis.Nil {
		t.Fatalf("a MACQUIRE wait that times out: %v, %v; want a nil array", v, err)
	}
	waitFor(t, "a given back after the timeout", func() bool {
		st, err := leader.client().Do(c, "STATUS", "a").Slice()
		return err == redis.Nil || err == nil && fmt.Sprint(statusField(st, "state")) == "free"
	})

	type grant struct {
		tokens []any
		err    error
	}
	got := make(chan grant, 1)
	go func() {
		v, err := followers[0].client().Do(c, "MACQUIRE", 60000, 3, "c", "b", "a", "WAIT", 20000).Slice()
		got <- grant{v, err}
	}()
	waitFor(t, "the MACQUIRE queued for b, holding a", func() bool {
		st, err := leader.client().Do(c, "STATUS", "b").Slice()
		a, aerr := leader.client().Do(c, "STATUS", "a").Slice()
		return err == nil && aerr == nil && fmt.Sprint(statusField(st, "waiters")) == "1" && fmt.Sprint(statusField(a, "state")) == "held"
	})
	// The leader goes with the wait queued: the next leader hands b over.
	if err := leader.Close(); err != nil {
		t.Logf("closing the leader: %v", err)
	}
	next := waitLeader(t, followers...)
	if err := next.client().Do(c, "RELEASE", "b", held).Err(); err != nil {
		t.Fatalf("RELEASE through the new leader: %v", err)
	}
	g := <-got
	if g.err != nil || len(g.tokens) != 3 {
		t.Fatalf("the MACQUIRE wait got %v, %v; want three tokens", g.tokens, g.err)
	}
	for j, key := range []string{"c", "b", "a"} {
		tok, _ := g.tokens[j].(int64)
		if ok, err := next.client().Do(c, "VERIFY", key, tok).Bool(); err != nil || !ok {
			t.Fatalf("VERIFY %s %d: %v, %v", key, tok, ok, err)
		}
	}
	if tok, _ := g.tokens[1].(int64); uint64(tok) <= held {
		t.Fatalf("b's token %d is not above its last holder's %d", tok, held)
	}
}

// TestClusterForwardsManyClients: many clients of a follower at once, whose
// batches are forwarded at the same time, each get their own answers:
// every lock cycle grants and releases its own lease.
func TestClusterForwardsManyClients(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes...)
	follower := others(nodes, leader)[0]
	c := ctx(t)
	const clients, cycles = 16, 20
	errs := make(chan error, clients)
	for i := range clients {
		go func() {
			cl := follower.client()
			defer cl.Close()
			key := fmt.Sprintf("many-%d", i)
			var last uint64
			for range cycles {
				tok, err := cl.Do(c, "ACQUIRE", key, 60000).Uint64()
				if err != nil || tok <= last {
					errs <- fmt.Errorf("%s: ACQUIRE = %d, %v; want a token above %d", key, tok, err, last)
					return
				}
				if n, err := cl.Do(c, "RELEASE", key, tok).Int(); err != nil || n != 1 {
					errs <- fmt.Errorf("%s: RELEASE %d = %d, %v", key, tok, n, err)
					return
				}
				last = tok
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestClusterRestartGrace: with --restart-grace, a leader's term begins by
// giving every live lease at least the grace, so a lease that was about to
// run out while the election cut its holder off is still there after it.
func TestClusterRestartGrace(t *testing.T) {
	t.Parallel()
	const grace = 20 * time.Second
	nodes := startCluster(t, 3, func(string) option {
		return func(c *Config) { c.Persist.RestartGrace = grace }
	})
	leader := waitLeader(t, nodes...)
	c := ctx(t)
	token, err := leader.client().Do(c, "ACQUIRE", "job", 5000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	rest := others(nodes, leader)
	if err := leader.Close(); err != nil {
		t.Logf("closing the leader: %v", err)
	}
	next := waitLeader(t, rest...)
	st, err := next.client().Do(c, "STATUS", "job").Slice()
	if err != nil {
		t.Fatal(err)
	}
	ttl, _ := strconv.Atoi(fmt.Sprint(statusField(st, "ttl")))
	if fmt.Sprint(statusField(st, "token")) != strconv.FormatUint(token, 10) || time.Duration(ttl)*time.Millisecond < grace-5*time.Second {
		t.Fatalf("STATUS after the failover: %v; want the lease %d with about %s left", st, token, grace)
	}
}

// TestClusterCommandStats: a change proposed through Raft is counted once
// its answer is known: failed when the state machine refuses it,
// rejected when it is answered TRYAGAIN (nothing ran), and once either
// way, whether it went alone or in a pipeline.
func TestClusterCommandStats(t *testing.T) {
	t.Parallel()
	leader := waitLeader(t, startCluster(t, 1)...)
	lc := leader.client()
	c := ctx(t)
	if err := lc.Do(c, "ACQUIRE", "held", 60000).Err(); err != nil {
		t.Fatal(err)
	}
	// The table refuses it when the entry applies: the lock is held.
	if err := lc.Do(c, "CREATE", "held", "LIMIT", 3).Err(); err == nil || !strings.HasPrefix(err.Error(), "INUSE") {
		t.Fatalf("CREATE of a held lock: %v, want INUSE", err)
	}
	pipe := lc.Pipeline()
	for i := range 3 {
		pipe.Do(c, "ACQUIRE", fmt.Sprintf("p%d", i), 60000)
	}
	pipe.Do(c, "CREATE", "held", "LIMIT", 3)
	if _, err := pipe.Exec(c); err == nil {
		t.Fatal("the pipeline's CREATE of a held lock did not fail")
	}
	if st := commandStatsOf(leader.Server, "create"); st.Calls != 2 || st.Failed != 2 || st.Rejected != 0 {
		t.Errorf("create: %+v, want 2 calls, both failed", st)
	}
	if st := commandStatsOf(leader.Server, "acquire"); st.Calls != 4 || st.Failed != 0 || st.Rejected != 0 {
		t.Errorf("acquire: %+v, want 4 calls, none failed", st)
	}

	// A node that knows no leader answers TRYAGAIN once its retry budget
	// is spent.
	alone := startClusterNode(t, "alone", t.TempDir(), false)
	rc := alone.dial() // not go-redis, which tries TRYAGAIN again
	rc.send("ACQUIRE k 60000\r\n")
	if l := rc.line(); !strings.HasPrefix(l, "-TRYAGAIN") {
		t.Fatalf("ACQUIRE without a leader: %q, want TRYAGAIN", l)
	}
	if st := commandStatsOf(alone.Server, "acquire"); st.Calls != 0 || st.Rejected != 1 {
		t.Errorf("acquire without a leader: %+v, want 1 rejected", st)
	}
}

// A pipeline whose queued replies hold no change (FORCE-RELEASE of token
// 0 names no lease), followed by a command that must come after them, is
// answered whole without more input: on an event loop nothing is proposed,
// so nothing comes back to run the command that waited.
func TestClusterPipelineOfNoChangeIsAnswered(t *testing.T) {
	t.Parallel()
	node := startCluster(t, 1)[0]
	rc := node.dial()
	defer rc.Close()
	rc.SetReadDeadline(time.Now().Add(10 * time.Second))
	rc.send("FORCE-RELEASE k 0\r\nPING\r\nACQUIRE k 60000\r\nFORCE-RELEASE k 0\r\nECHO after\r\n")
	for _, want := range []string{":0", "+PONG"} {
		if got := rc.line(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if got := rc.line(); !strings.HasPrefix(got, ":") || got == ":0" {
		t.Fatalf("ACQUIRE = %q, want a token", got)
	}
	for _, want := range []string{":0", "$5", "after"} {
		if got := rc.line(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// On an event loop, a connection whose proposal is in flight keeps its
// input watched until input comes (ioLoop.rewatchAfter), and its answer
// reads the socket only if input came: what a client sends meanwhile, a
// command or the end of its input, is served once the answer is written.
func TestClusterLoopServesInputSentWhileInFlight(t *testing.T) {
	t.Parallel()
	node := startCluster(t, 1, func(string) option { return withIOLoops(1) })[0]
	rc := node.dial()
	defer rc.Close()
	// Three writes: the later two arrive while the first ACQUIRE's entry
	// commits (milliseconds), the last while the second's may.
	rc.send("ACQUIRE in-flight-a 60000\r\n")
	rc.send("ACQUIRE in-flight-b 60000\r\n")
	rc.send("PING\r\n")
	for i, want := range []string{":", ":", "+PONG"} {
		if got := rc.line(); !strings.HasPrefix(got, want) {
			t.Fatalf("reply %d = %q, want %s...", i, got, want)
		}
	}
	// A command, then the end of the input at once: answered, then closed.
	rc.send("ACQUIRE in-flight-c 60000\r\n")
	if err := rc.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got := rc.line(); !strings.HasPrefix(got, ":") {
		t.Fatalf("ACQUIRE before the end of the input = %q", got)
	}
	if !rc.closed() {
		t.Fatal("the connection stayed open after its input ended")
	}
	// Each was granted: the tokens are live.
	for _, key := range []string{"in-flight-a", "in-flight-b", "in-flight-c"} {
		if n, err := node.client().Do(ctx(t), "EXISTS", key).Int(); err != nil || n != 1 {
			t.Errorf("EXISTS %s = %d, %v", key, n, err)
		}
	}
}
