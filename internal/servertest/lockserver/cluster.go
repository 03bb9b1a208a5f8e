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

// StartCluster starts a Raft group of n nodes, n1 to nN, each over a
// directory of t's: n1 bootstraps, the others join through CLUSTER ADDNODE
// on it, and StartCluster returns once n1 leads a group of n. adjust
// changes each node's cluster.Config after cluster.TestingTimeouts. The
// test's cleanup closes every node.
func StartCluster(t testing.TB, n int, adjust ...func(*cluster.Config)) []*Node {
	t.Helper()
	nodes := []*Node{StartNode(t, "n1", t.TempDir(), true, adjust...)}
	if _, err := WaitLeader(nodes...); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= n; i++ {
		node := StartNode(t, fmt.Sprintf("n%d", i), t.TempDir(), false, adjust...)
		if err := addNode(nodes, node); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, node)
	}
	return nodes
}

// addNode adds node to the group of nodes through its leader, again on the
// next leader if the leadership was lost meanwhile (short timeouts on a
// busy machine), for up to 30s.
func addNode(nodes []*Node, node *Node) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, err := WaitLeader(nodes...)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		rdb := redis.NewClient(&redis.Options{Addr: leader.Addr, MaxRetries: -1})
		err = rdb.Do(ctx, "CLUSTER", "ADDNODE", node.ID, node.Server.Server.RaftAddr()).Err()
		rdb.Close()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CLUSTER ADDNODE %s: %w", node.ID, err)
		}
	}
}

// StartNode starts node id over dir, the first member of a new group when
// bootstrap is set, with cluster.TestingTimeouts and then adjust.
func StartNode(t testing.TB, id, dir string, bootstrap bool, adjust ...func(*cluster.Config)) *Node {
	t.Helper()
	cc := cluster.DefaultConfig()
	cc.NodeID, cc.RaftAddr, cc.DataDir, cc.Bootstrap = id, "127.0.0.1:0", dir, bootstrap
	cluster.TestingTimeouts(&cc)
	for _, f := range adjust {
		f(&cc)
	}
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
