//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterConfig says how to run the nodes.
type ClusterConfig struct {
	Bin   string // the leasehold binary
	Nodes int    // 1: a single durable server (serve --data-dir); more: serve --cluster
	Dir   string // data directories and logs go here
	// Net, when set, holds one namespace per node; else every node listens
	// on 127.0.0.1 and network faults are not available.
	Net   *Network
	Extra []string // more serve flags for every node
	// Peers starts a cluster with a static --peers list on every node; else
	// the first node bootstraps and the leader adds the others (CLUSTER
	// ADDNODE), as docs/cluster.md starts one.
	Peers bool
	// DiskSize, when set, puts each node's data directory on a tmpfs of
	// this many bytes (root), which the disk-full fault fills.
	DiskSize int64
}

// Cluster is a set of leasehold processes under test.
type Cluster struct {
	cfg   ClusterConfig
	Nodes []*Node
}

// Node is one leasehold process, started and stopped by the Cluster.
type Node struct {
	Index   int
	ID      string
	Addr    string // RESP
	Raft    string // cluster mode only
	DataDir string
	Log     string

	mounted bool // DataDir is a tmpfs of its own (ClusterConfig.DiskSize)

	mu     sync.Mutex // guards cmd, done, paused
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
}

// ErrNotYet is returned by the hooks for faults the server does not support yet.
var ErrNotYet = errors.New("chaos: not supported by this server yet")

// NewCluster lays out the nodes; Start runs them.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	c := &Cluster{cfg: cfg}
	for i := 0; i < cfg.Nodes; i++ {
		n := &Node{Index: i, ID: fmt.Sprintf("n%d", i+1), DataDir: filepath.Join(cfg.Dir, fmt.Sprintf("n%d", i+1)), Log: filepath.Join(cfg.Dir, fmt.Sprintf("n%d.log", i+1))}
		host, resp, raft := "127.0.0.1", 0, 0
		if cfg.Net != nil {
			host, resp, raft = cfg.Net.IP(i), 7379, 7400
		} else {
			p, err := freePorts(2)
			if err != nil {
				return nil, err
			}
			resp, raft = p[0], p[1]
		}
		n.Addr = fmt.Sprintf("%s:%d", host, resp)
		n.Raft = fmt.Sprintf("%s:%d", host, raft)
		if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
			return nil, err
		}
		if cfg.DiskSize > 0 {
			if err := MountSmallDisk(n.DataDir, cfg.DiskSize); err != nil {
				c.unmount()
				return nil, err
			}
			n.mounted = true
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

// Clustered reports whether the nodes run serve --cluster.
func (c *Cluster) Clustered() bool { return c.cfg.Nodes > 1 }

// Addrs lists the nodes' RESP addresses.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

func (c *Cluster) args(n *Node) []string {
	a := []string{"serve", "--addr", n.Addr, "--data-dir", n.DataDir, "--protected-mode", "no", "--log-format", "console"}
	if c.Clustered() {
		a = append(a, "--cluster", "--node-id", n.ID, "--raft-addr", n.Raft)
		switch {
		case c.cfg.Peers:
			var peers []string
			for _, p := range c.Nodes {
				peers = append(peers, p.ID+"="+p.Raft)
			}
			a = append(a, "--peers", strings.Join(peers, ","))
		case n.Index == 0:
			a = append(a, "--bootstrap")
		}
	}
	return append(a, c.cfg.Extra...)
}

// Start starts node i (again) and waits until it answers PING.
func (c *Cluster) Start(ctx context.Context, i int) error {
	n := c.Nodes[i]
	n.mu.Lock()
	if n.cmd != nil {
		n.mu.Unlock()
		return nil
	}
	logf, err := os.OpenFile(n.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	fmt.Fprintf(logf, "=== chaos: start %s at %s\n", n.ID, time.Now().UTC().Format(time.RFC3339Nano))
	name, args := c.cfg.Bin, c.args(n)
	if c.cfg.Net != nil {
		// ip netns exec execs the binary in place: the pid is the server's.
		name, args = "ip", append([]string{"netns", "exec", c.cfg.Net.Namespace(i), c.cfg.Bin}, args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		n.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	n.cmd, n.done, n.paused = cmd, done, false
	n.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	return c.waitUp(ctx, n, done)
}

func (c *Cluster) waitUp(ctx context.Context, n *Node, done chan struct{}) error {
	rc := redis.NewClient(&redis.Options{Addr: n.Addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		if err := rc.Ping(ctx).Err(); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("chaos: %s exited at start; see %s", n.ID, n.Log)
		case <-ctx.Done():
			return fmt.Errorf("chaos: %s does not answer PING: %w; see %s", n.ID, ctx.Err(), n.Log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StartAll starts every node: concurrently, since a cluster node may wait for
// its peers before it answers.
func (c *Cluster) StartAll(ctx context.Context) error {
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i := range c.Nodes {
		wg.Add(1)
		go func(i int) { defer wg.Done(); errs[i] = c.Start(ctx, i) }(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil || !c.Clustered() {
		return err
	}
	if !c.cfg.Peers {
		for i := 1; i < len(c.Nodes); i++ {
			if err := c.AddVoter(ctx, i); err != nil {
				return err
			}
		}
	}
	return c.waitVoters(ctx)
}

// waitVoters waits until the leader counts every node as a voter.
func (c *Cluster) waitVoters(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if l := c.Leader(ctx); l >= 0 {
			rc := redis.NewClient(&redis.Options{Addr: c.Nodes[l].Addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
			s, err := rc.Do(ctx, "CLUSTER", "NODES").Text()
			rc.Close()
			voters := 0
			for _, line := range strings.Split(s, "\n") {
				for _, f := range strings.Fields(line) {
					for _, flag := range strings.Split(f, ",") {
						if flag == "voter" {
							voters++
						}
					}
				}
			}
			if err == nil && voters == len(c.Nodes) {
				return nil
			}
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return fmt.Errorf("chaos: the cluster did not get %d voters: %w", len(c.Nodes), ctx.Err())
		}
	}
}

// Kill sends SIGKILL to node i and waits for it to be gone.
func (c *Cluster) Kill(i int) {
	n := c.Nodes[i]
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd, n.paused = nil, false
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Exited reports whether node i, started and not killed by the harness,
// has exited on its own.
func (c *Cluster) Exited(i int) bool {
	n := c.Nodes[i]
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// CatchUp waits until node i has applied every entry the leader had
// committed when it was called.
func (c *Cluster) CatchUp(ctx context.Context, i int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	index := func(j int, field string) (uint64, error) {
		info, err := clusterInfo(ctx, c.Nodes[j].Addr)
		if err != nil {
			return 0, err
		}
		return strconv.ParseUint(info[field], 10, 64)
	}
	var target uint64
	for {
		if target == 0 {
			if l := c.Leader(ctx); l >= 0 {
				target, _ = index(l, "cluster_commit_index")
			}
		}
		if target > 0 {
			if got, err := index(i, "cluster_applied_index"); err == nil && got >= target {
				return nil
			}
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return fmt.Errorf("chaos: %s did not apply the leader's commit index %d in %v", c.Nodes[i].ID, target, timeout)
		}
	}
}

// Pause stops node i with SIGSTOP; Resume continues it.
func (c *Cluster) Pause(i int) error { return c.signal(i, syscall.SIGSTOP, true) }

// Resume continues node i after Pause.
func (c *Cluster) Resume(i int) error { return c.signal(i, syscall.SIGCONT, false) }

func (c *Cluster) signal(i int, sig syscall.Signal, paused bool) error {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("chaos: %s is not running", n.ID)
	}
	n.paused = paused
	return n.cmd.Process.Signal(sig)
}

// Running reports whether node i is up (possibly paused).
func (c *Cluster) Running(i int) bool {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Leader returns the index of the node that says it leads (CLUSTER INFO),
// or -1; a single node leads itself.
func (c *Cluster) Leader(ctx context.Context) int {
	if !c.Clustered() {
		return 0
	}
	for i, n := range c.Nodes {
		if !c.Running(i) {
			continue
		}
		info, err := clusterInfo(ctx, n.Addr)
		if err == nil && info["cluster_role"] == "leader" {
			return i
		}
	}
	return -1
}

func clusterInfo(ctx context.Context, addr string) (map[string]string, error) {
	rc := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond})
	defer rc.Close()
	s, err := rc.Do(ctx, "CLUSTER", "INFO").Text()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// AddVoter adds node i back as a member (CLUSTER ADDNODE on the leader: a
// non-voter until it has caught up); RemoveVoter removes it (CLUSTER FORGET).
func (c *Cluster) AddVoter(ctx context.Context, i int) error {
	return c.onLeader(ctx, "CLUSTER", "ADDNODE", c.Nodes[i].ID, c.Nodes[i].Raft)
}

// RemoveVoter: see AddVoter.
func (c *Cluster) RemoveVoter(ctx context.Context, i int) error {
	return c.onLeader(ctx, "CLUSTER", "FORGET", c.Nodes[i].ID)
}

// Snapshot makes node i take a snapshot of its state machine now.
func (c *Cluster) Snapshot(ctx context.Context, i int) error {
	if !c.Clustered() {
		return ErrNotYet
	}
	return c.do(ctx, i, "CLUSTER", "SNAPSHOT")
}

func (c *Cluster) do(ctx context.Context, i int, args ...interface{}) error {
	rc := redis.NewClient(&redis.Options{Addr: c.Nodes[i].Addr, Protocol: 2, DisableIdentity: true, MaxRetries: -1, DialTimeout: 300 * time.Millisecond, ReadTimeout: 5 * time.Second})
	defer rc.Close()
	err := rc.Do(ctx, args...).Err()
	if err != nil && strings.HasPrefix(err.Error(), "ERR unknown") {
		return fmt.Errorf("%w: %v", ErrNotYet, err)
	}
	return err
}

// onLeader sends a command to the leader, retrying through elections for up
// to ten seconds.
func (c *Cluster) onLeader(ctx context.Context, args ...interface{}) error {
	if !c.Clustered() {
		return ErrNotYet
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		err := errors.New("chaos: no leader")
		if l := c.Leader(ctx); l >= 0 {
			if err = c.do(ctx, l, args...); err == nil || errors.Is(err, ErrNotYet) {
				return err
			}
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return fmt.Errorf("chaos: %v: %w", args, err)
		}
	}
}

// Close resumes, kills and waits for every node, and heals the network.
func (c *Cluster) Close() {
	for i := range c.Nodes {
		c.Kill(i)
	}
	if c.cfg.Net != nil {
		_ = c.cfg.Net.Heal()
	}
	c.unmount()
}

func (c *Cluster) unmount() {
	for _, n := range c.Nodes {
		if n.mounted {
			if err := UnmountSmallDisk(n.DataDir); err == nil {
				n.mounted = false
			}
		}
	}
}
