package server

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// clusterNode is one member of a test cluster: a real server on random
// loopback ports (RESP and Raft).
type clusterNode struct {
	*testServer
	id string
}

// testClusterTimeouts are Raft's timeouts in these tests: shorter than the
// defaults, so that an election takes a fraction of a second.
func testClusterTimeouts(c *cluster.Config) {
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 150 * time.Millisecond
	c.TransferTimeout = time.Second
}

// startClusterNode starts node id over dir, the first member of a new group
// when bootstrap is set.
func startClusterNode(t *testing.T, id, dir string, bootstrap bool) *clusterNode {
	t.Helper()
	cc := cluster.DefaultConfig()
	cc.NodeID, cc.RaftAddr, cc.DataDir, cc.Bootstrap = id, "127.0.0.1:0", dir, bootstrap
	testClusterTimeouts(&cc)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Str("node", id).Logger()
	ts := startServerLogging(t, log, func(c *Config) { c.Cluster = &cc })
	return &clusterNode{testServer: ts, id: id}
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
			if n.replica.ready() {
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
func startCluster(t *testing.T, n int) []*clusterNode {
	t.Helper()
	nodes := []*clusterNode{startClusterNode(t, "n1", t.TempDir(), true)}
	first := waitLeader(t, nodes[0])
	for i := 2; i <= n; i++ {
		node := startClusterNode(t, "n"+string(rune('0'+i)), t.TempDir(), false)
		if err := first.client().Do(ctx(t), "CLUSTER", "ADDNODE", node.id, node.RaftAddr()).Err(); err != nil {
			t.Fatalf("CLUSTER ADDNODE %s: %v", node.id, err)
		}
		nodes = append(nodes, node)
	}
	return nodes
}

func TestClusterLeaseSurvivesLeaderLoss(t *testing.T) {
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
	if n, _ := clusterInfo(t, lc)["cluster_known_nodes"]; n != "3" {
		t.Fatalf("cluster_known_nodes %q, want 3", n)
	}

	var rest []*clusterNode
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
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
	cfg := testConfig(t)
	cfg.Cluster = &cluster.Config{}
	cfg.Persist.Dir = t.TempDir()
	if _, err := New(cfg, zerolog.Nop()); err == nil {
		t.Fatal("New accepted a data directory for persist in cluster mode")
	}
}
