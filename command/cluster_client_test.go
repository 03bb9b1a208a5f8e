package command

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"
)

// clusterProc is one node of a cluster of serve --cluster processes, at
// Raft's default timeouts.
type clusterProc struct {
	*process
	id, addr, raftAddr string
	rdb                *redis.Client
}

// role is the node's cluster_role in CLUSTER INFO, "" when it does not
// answer.
func (n *clusterProc) role() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	text, err := n.rdb.Do(ctx, "CLUSTER", "INFO").Text()
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

// startClusterProcs starts n nodes as processes: n1 bootstraps, the others
// are added through CLUSTER ADDNODE on the leader.
func startClusterProcs(t *testing.T, n int) []*clusterProc {
	t.Helper()
	var nodes []*clusterProc
	for i := 1; i <= n; i++ {
		id, raftAddr := fmt.Sprintf("n%d", i), freeAddr(t)
		extra := []string{"--cluster", "--node-id", id, "--raft-addr", raftAddr, "--data-dir", t.TempDir()}
		if i == 1 {
			extra = append(extra, "--bootstrap")
		}
		p, addr := serveBinary(t, serveArgs(extra...))
		node := &clusterProc{process: p, id: id, addr: addr, raftAddr: raftAddr, rdb: client(t, addr)}
		if i > 1 {
			deadline := time.Now().Add(commandTimeout)
			for {
				leader := waitClusterLeader(t, nodes...)
				ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
				err := leader.rdb.Do(ctx, "CLUSTER", "ADDNODE", id, raftAddr).Err()
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("CLUSTER ADDNODE %s: %v", id, err)
				}
			}
		}
		nodes = append(nodes, node)
	}
	return nodes
}

// waitClusterLeader waits until one of nodes leads with its term begun.
func waitClusterLeader(t *testing.T, nodes ...*clusterProc) *clusterProc {
	t.Helper()
	var leader *clusterProc
	testutil.Eventually(t, commandTimeout, "a cluster leader", func() bool {
		for _, n := range nodes {
			if n.role() == "leader" {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

// clusterAddrList is the nodes' addresses, comma-separated, first first.
func clusterAddrList(first *clusterProc, nodes []*clusterProc) string {
	addrs := []string{first.addr}
	for _, n := range nodes {
		if n != first {
			addrs = append(addrs, n.addr)
		}
	}
	return strings.Join(addrs, ",")
}

// TestClusterRunKeepsLeaseThroughLeaderKill: leasehold run holds a lock on
// a 3-node cluster while its leader is killed (SIGKILL): the keep-alive's
// renewals go on through the next leader, the command is not stopped, the
// lease keeps its token, and run releases it at the end.
func TestClusterRunKeepsLeaseThroughLeaderKill(t *testing.T) {
	t.Parallel()
	nodes := startClusterProcs(t, 3)
	leader := waitClusterLeader(t, nodes...)
	dir := t.TempDir()
	const ttl = 4 * time.Second // renewed every 1.33s, lost 0.4s before its deadline
	p := start(t, []string{"LEASEHOLD_ADDR=" + clusterAddrList(leader, nodes), "DIR=" + dir},
		"run", "--ttl", ttl.String(), "k", "--", "sh", "-c",
		`echo "$LEASEHOLD_TOKEN" > "$DIR/token"; while [ ! -e "$DIR/stop" ]; do sleep 0.05; done`)
	testutil.Eventually(t, commandTimeout, "the command started", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "token"))
		return strings.HasSuffix(string(b), "\n")
	})
	b, _ := os.ReadFile(filepath.Join(dir, "token"))
	token := strings.TrimSpace(string(b))

	var rest []*clusterProc
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	killed := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	next := waitClusterLeader(t, rest...)
	t.Logf("%s leads %s after %s was killed", next.id, time.Since(killed).Round(time.Millisecond), leader.id)
	// Past the lease's deadline as it was at the kill: only renewals made
	// through the next leader keep it.
	testutil.Eventually(t, commandTimeout, "the lease's old deadline passed", func() bool { return time.Since(killed) > ttl+time.Second })
	select {
	case <-p.done:
		t.Fatalf("run ended through the failover: %v\nstderr: %s", p.err, p.stderr)
	default:
	}
	ctx := testCtx(t)
	st, err := next.rdb.Do(ctx, "STATUS", "k").Slice()
	if err != nil {
		t.Fatalf("STATUS k on the new leader: %v", err)
	}
	if got := fieldOf(st, "token"); got != token {
		t.Fatalf("STATUS k: token %q, want run's %s: %q", got, token, st)
	}
	if got := fieldOf(st, "last-token"); got != token {
		t.Fatalf("STATUS k: last-token %q, want %s: granted again", got, token)
	}

	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(commandTimeout):
		t.Fatalf("run did not exit after its command\nstderr: %s", p.stderr)
	}
	if p.err != nil {
		t.Fatalf("run: %v\nstderr: %s", p.err, p.stderr)
	}
	if ok, err := next.rdb.Do(ctx, "VERIFY", "k", token).Int(); err != nil || ok != 0 {
		t.Fatalf("VERIFY after run ended = %d, %v; want 0: released", ok, err)
	}
}

// fieldOf is a field of STATUS's flat field/value reply.
func fieldOf(pairs []any, name string) string {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i] == name {
			v, _ := pairs[i+1].(string)
			return v
		}
	}
	return ""
}

// TestClusterClientCommandsPassOverFollower: with a follower first in
// --addr, the client commands answer through the leader.
func TestClusterClientCommandsPassOverFollower(t *testing.T) {
	t.Parallel()
	nodes := startClusterProcs(t, 3)
	leader := waitClusterLeader(t, nodes...)
	var follower *clusterProc
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}
	env := []string{"LEASEHOLD_ADDR=" + clusterAddrList(follower, nodes)}
	stdout, stderr, exit := run(t, env, "acquire", "--ttl", "30s", "--owner", "me", "k")
	if exit != 0 {
		t.Fatalf("acquire: exit %d\n%s", exit, stderr)
	}
	token := strings.TrimSpace(stdout)
	for _, cmd := range [][]string{{"verify", "k", token}, {"extend", "--ttl", "30s", "k", token}, {"status", "k"}, {"release", "k", token}} {
		if _, stderr, exit := run(t, env, cmd...); exit != 0 {
			t.Errorf("%q: exit %d\n%s", cmd, exit, stderr)
		}
	}
}

// TestClusterAcquireUncertain: an acquire whose outcome stays unknown (every
// try answered UNCERTAIN, for the Go client's 10s of retries) exits 2 and
// says which --owner gets the lease back.
func TestClusterAcquireUncertain(t *testing.T) {
	t.Parallel()
	var acquires atomic.Int64
	addr := scriptedServer(t, func(conn redcon.Conn, cmd redcon.Command) {
		switch strings.ToUpper(string(cmd.Args[0])) {
		case "ACQUIRE":
			acquires.Add(1)
			conn.WriteError("UNCERTAIN the leader was lost before the outcome was known")
		default:
			conn.WriteError("ERR unknown command")
		}
	})
	_, stderr, exit := run(t, []string{"LEASEHOLD_ADDR=" + addr}, "acquire", "--ttl", "30s", "k")
	if exit != exitFailure {
		t.Fatalf("acquire: exit %d, want %d\n%s", exit, exitFailure, stderr)
	}
	m := regexp.MustCompile(`leasehold acquire --owner "([0-9a-f]{32})" "k"`).FindStringSubmatch(stderr)
	if m == nil || !strings.Contains(stderr, "outcome unknown") {
		t.Fatalf("stderr does not name the owner to acquire again with:\n%s", stderr)
	}
	if n := acquires.Load(); n < 2 {
		t.Errorf("%d ACQUIREs: not retried", n)
	}
}
