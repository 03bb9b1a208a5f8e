package lockserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/server"
	"github.com/redis/go-redis/v9"
)

// Node is one member of a test cluster: a leasehold server in cluster mode
// on free loopback ports (RESP and Raft).
type Node struct {
	*Server
	ID string
}

// ClusterTimeouts shortens Raft's timeouts so that an election takes a
// fraction of a second.
func ClusterTimeouts(c *cluster.Config) {
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 150 * time.Millisecond
	c.TransferTimeout = time.Second
}

// StartCluster starts a Raft group of n nodes, n1 to nN, each over a
// directory of t's: n1 bootstraps, the others join through CLUSTER ADDNODE
// on it, and StartCluster returns once n1 leads a group of n. The test's
// cleanup closes every node.
func StartCluster(t testing.TB, n int) []*Node {
	t.Helper()
	nodes := []*Node{StartNode(t, "n1", t.TempDir(), true)}
	if _, err := WaitLeader(nodes...); err != nil {
		t.Fatal(err)
	}
	first := nodes[0].Client()
	for i := 2; i <= n; i++ {
		node := StartNode(t, fmt.Sprintf("n%d", i), t.TempDir(), false)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := first.Do(ctx, "CLUSTER", "ADDNODE", node.ID, node.Server.Server.RaftAddr()).Err()
		cancel()
		if err != nil {
			t.Fatalf("CLUSTER ADDNODE %s: %v", node.ID, err)
		}
		nodes = append(nodes, node)
	}
	return nodes
}

// StartNode starts node id over dir, the first member of a new group when
// bootstrap is set, with ClusterTimeouts.
func StartNode(t testing.TB, id, dir string, bootstrap bool) *Node {
	t.Helper()
	cc := cluster.DefaultConfig()
	cc.NodeID, cc.RaftAddr, cc.DataDir, cc.Bootstrap = id, "127.0.0.1:0", dir, bootstrap
	ClusterTimeouts(&cc)
	return &Node{Server: Start(t, func(c *server.Config) { c.Cluster = &cc }), ID: id}
}

// Role is the node's cluster_role in CLUSTER INFO: "leader" once its term
// has begun, "leader-starting", "follower" or "candidate"; "" when it does
// not answer.
func (n *Node) Role() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
	defer rdb.Close()
	text, err := rdb.Do(ctx, "CLUSTER", "INFO").Text()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(text, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cluster_role:"); ok {
			return v
		}
	}
	return ""
}

// WaitLeader waits up to 10s until one of nodes leads with its term begun
// (it takes writes), and returns it.
func WaitLeader(nodes ...*Node) (*Node, error) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.Role() == "leader" {
				return n, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("no leader among %d nodes within 10s", len(nodes))
}
