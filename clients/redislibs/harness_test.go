//go:build unix

// Package redislibs_test runs Redis lock libraries, their own code unchanged,
// against leasehold (issue 26): redis-py's Lock (python/redispy_lock.py),
// go-redsync/redsync v4 and bsm/redislock (in this process), npm redlock 4,
// @sesamecare-oss/redlock and redis-semaphore's Mutex on ioredis
// (node/locks.js). Each library runs against one node and against a
// follower of a 3-node cluster, where the leader is lost while the library
// holds a lock.
//
// With LEASEHOLD_REDISLIBS_TARGET=redis the one-node tests run against a
// real redis-server instead (the cluster tests are skipped): the proof that
// the tests ask of leasehold what Redis does.
//
// The tests need python3 with Debian's python3-redis, node with
// node/node_modules (npm ci) and, for the redis target, redis-server:
// `make deps` installs them. Without one a test is skipped, and says so;
// with CI=true it fails instead.
package redislibs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// runTimeout bounds every process a test starts, and every test's wait for
// a library's call.
const runTimeout = 60 * time.Second

// targetEnv names the server the tests run against: leasehold (the default)
// or redis (a redis-server, for the one-node tests).
const targetEnv = "LEASEHOLD_REDISLIBS_TARGET"

// againstRedis reports whether the tests run against redis-server.
func againstRedis(t *testing.T) bool {
	t.Helper()
	switch v := os.Getenv(targetEnv); v {
	case "", "leasehold":
		return false
	case "redis":
		return true
	default:
		t.Fatalf("%s=%q: want leasehold or redis", targetEnv, v)
		return false
	}
}

// target is a server a library talks to: one leasehold node, a follower of
// a 3-node leasehold cluster, or a redis-server.
type target struct {
	// addr is the address the library connects to.
	addr string
	// nodes are the cluster's members, nil for one server; dead are those
	// the test has closed; follower is the node at addr.
	nodes    []*lockserver.Node
	dead     map[*lockserver.Node]bool
	follower *lockserver.Node
	// redis is set for a redis-server, whose holder is read with GET.
	redis bool
}

func (tg *target) cluster() bool { return tg.nodes != nil }

// eachTarget runs f as the parallel subtests "one" (one leasehold node, or
// redis-server) and "cluster" (a follower of a 3-node cluster; skipped
// against redis-server).
func eachTarget(t *testing.T, f func(t *testing.T, tg *target)) {
	t.Helper()
	t.Run("one", func(t *testing.T) {
		t.Parallel()
		if againstRedis(t) {
			f(t, startRedis(t))
			return
		}
		f(t, &target{addr: lockserver.Start(t).Addr})
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		if againstRedis(t) {
			t.Skipf("%s=redis: redis-server has no cluster of this kind", targetEnv)
		}
		f(t, startCluster(t))
	})
}

// startCluster starts a 3-node cluster and targets one of its followers.
// A leader being closed would hand its leadership over first, most often
// in time; with no time for that (TransferTimeout), the others elect one,
// as after a crash.
func startCluster(t *testing.T) *target {
	t.Helper()
	nodes := lockserver.StartCluster(t, 3, func(c *cluster.Config) { c.TransferTimeout = time.Nanosecond })
	tg := &target{nodes: nodes, dead: map[*lockserver.Node]bool{}}
	tg.pickFollower(t)
	return tg
}

// leader waits for the cluster's leader among the live nodes.
func (tg *target) leader(t *testing.T) *lockserver.Node {
	t.Helper()
	var live []*lockserver.Node
	for _, n := range tg.nodes {
		if !tg.dead[n] {
			live = append(live, n)
		}
	}
	l, err := lockserver.WaitLeader(live...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// pickFollower points the target at a node that follows now.
func (tg *target) pickFollower(t *testing.T) {
	t.Helper()
	leader := tg.leader(t)
	for _, n := range tg.nodes {
		if n != leader && !tg.dead[n] {
			tg.follower, tg.addr = n, n.Addr
			return
		}
	}
	t.Fatal("no live follower")
}

// client is a go-redis client of addr, closed at the test's end.
func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// status is the lock's state as a server tells it: STATUS on leasehold
// (on the leader in a cluster), GET and PTTL on redis-server. owner is ""
// when nobody holds it.
type status struct {
	owner string
	ttl   time.Duration
	token string // leasehold's fencing token; "" on redis-server
}

func (tg *target) statusOn(t *testing.T, addr, key string) status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := client(t, addr)
	if tg.redis {
		v, err := c.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return status{}
		}
		if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatalf("PTTL %s: %v", key, err)
		}
		return status{owner: v, ttl: ttl}
	}
	reply, err := c.Do(ctx, "STATUS", key).Slice()
	if errors.Is(err, redis.Nil) { // no such lock
		return status{}
	}
	if err != nil {
		t.Fatalf("STATUS %s: %v", key, err)
	}
	f := map[string]string{}
	for i := 0; i+1 < len(reply); i += 2 {
		f[fmt.Sprint(reply[i])] = fmt.Sprint(reply[i+1])
	}
	if f["state"] != "held" {
		return status{}
	}
	ms, err := time.ParseDuration(f["ttl"] + "ms")
	if err != nil {
		t.Fatalf("STATUS %s: ttl %q: %v", key, f["ttl"], err)
	}
	return status{owner: f["owner"], ttl: ms, token: f["token"]}
}

// status is statusOn the server, or on the cluster's leader.
func (tg *target) status(t *testing.T, key string) status {
	t.Helper()
	if tg.cluster() {
		return tg.statusOn(t, tg.leader(t).Addr, key)
	}
	return tg.statusOn(t, tg.addr, key)
}

// expectHeld fails t unless owner holds key, with a lease of up to ttl.
func (tg *target) expectHeld(t *testing.T, key, owner string, ttl time.Duration) status {
	t.Helper()
	st := tg.status(t, key)
	if st.owner != owner || st.ttl <= 0 || st.ttl > ttl {
		t.Fatalf("%s: owner %q, ttl %s; want %q with a ttl in (0, %s]", key, st.owner, st.ttl, owner, ttl)
	}
	return st
}

// expectFree fails t if anyone holds key.
func (tg *target) expectFree(t *testing.T, key string) {
	t.Helper()
	if st := tg.status(t, key); st.owner != "" {
		t.Fatalf("%s is held by %q (ttl %s), want free", key, st.owner, st.ttl)
	}
}

// expectRefused fails t unless another client's SET NX of key is refused
// at addr.
func expectRefused(t *testing.T, addr, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := client(t, addr).SetNX(ctx, key, "intruder", 10*time.Second).Result()
	if err != nil || ok {
		t.Fatalf("another client's SET %s intruder PX 10000 NX at %s: %v, %v; want refused", key, addr, ok, err)
	}
}

// holdThroughFailover has a library hold a lock on key, with a lease of up
// to ttl, and on a cluster closes the leader meanwhile: hold takes the lock
// through tg.addr (a follower) and returns its owner's value, and done,
// which has the library extend and release it. While held, the server's
// STATUS names the owner and another client's SET NX is refused; on a
// cluster the same holds after the leader's loss, on the new leader, with
// the same fencing token. After done the lock must be free.
//
// Leadership can move on a busy machine: when the library's node leads by
// the time the leader is to be closed, the lock is released and the whole
// is tried again through another follower (3 times at most).
func holdThroughFailover(t *testing.T, tg *target, key string, ttl time.Duration, hold func(t *testing.T) (owner string, done func())) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		if tg.cluster() {
			tg.pickFollower(t)
		}
		owner, done := hold(t)
		before := tg.expectHeld(t, key, owner, ttl)
		expectRefused(t, tg.addr, key)
		if tg.cluster() {
			old := tg.leader(t)
			if old == tg.follower {
				if attempt == 3 {
					t.Fatalf("the library's node %s led at each of 3 attempts", old.ID)
				}
				t.Logf("the library's node %s leads now: releasing, and again through another", old.ID)
				done()
				tg.expectFree(t, key)
				continue
			}
			if err := old.Close(); err != nil {
				t.Logf("closing the leader %s: %v", old.ID, err)
			}
			tg.dead[old] = true
			next := tg.leader(t)
			t.Logf("leader %s closed; %s leads; the library is on %s", old.ID, next.ID, tg.follower.ID)
			after := tg.expectHeld(t, key, owner, ttl)
			if after.token != before.token {
				t.Fatalf("%s: fencing token %s before the failover, %s after", key, before.token, after.token)
			}
			expectRefused(t, next.Addr, key)
			expectRefused(t, tg.addr, key)
		}
		done()
		tg.expectFree(t, key)
		return
	}
}

// startRedis starts a redis-server on a free loopback port, without
// persistence, for the test; it is killed at the test's end.
func startRedis(t *testing.T) *target {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testutil.MissingTool(t, "redis-server not found (redis-server)")
	}
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		p := start(t, nil, bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		addr := net.JoinHostPort("127.0.0.1", port)
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		deadline := time.Now().Add(10 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = c.Ping(ctx).Err()
			cancel()
			if err == nil || p.exited() || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.Close()
		if err == nil {
			return &target{addr: addr, redis: true}
		}
		if attempt == 2 {
			t.Fatalf("redis-server on port %s: %v\n%s", port, err, p)
		}
		p.kill() // the port taken meanwhile, most likely: another
	}
}

// freePort is a loopback port nobody listened on a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// proc is a process a test started, in a process group of its own, killed
// with its group at runTimeout or at the test's end.
type proc struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr testutil.SyncBuffer
	done           chan struct{}
	exit           int // -1: killed at runTimeout
	began          time.Time
	elapsed        time.Duration
}

// start starts name with env added to the test's environment (without its
// LEASEHOLD_ variables), its stdin a pipe.
func start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, name, args...)
	p.cmd.Env = testutil.Environ(env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Cancel = func() error { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }
	p.cmd.WaitDelay = 2 * time.Second
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p.stdin = stdin
	p.began = time.Now()
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		defer cancel()
		err := p.cmd.Wait()
		p.elapsed = time.Since(p.began)
		var ee *exec.ExitError
		switch {
		case ctx.Err() != nil:
			p.exit = -1
		case errors.As(err, &ee):
			p.exit = ee.ExitCode()
		case err != nil:
			p.exit = -2
		}
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill ends the process's group, if it still runs, and waits for it.
func (p *proc) kill() {
	if !p.exited() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.done
}

// wait waits for the process to exit (runTimeout at most).
func (p *proc) wait(t *testing.T) *proc {
	t.Helper()
	p.stdin.Close()
	<-p.done
	if p.exit == -1 {
		t.Fatalf("%q did not exit within %s: %s", p.cmd.Args, runTimeout, p)
	}
	return p
}

// waitLine waits until the process has printed a line that starts with
// prefix, and returns the rest of that line.
func (p *proc) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for {
		sc := bufio.NewScanner(strings.NewReader(p.stdout.String()))
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				return rest
			}
		}
		if p.exited() {
			t.Fatalf("%q exited before printing %q: %s", p.cmd.Args, prefix, p)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q did not print %q within %s: %s", p.cmd.Args, prefix, runTimeout, p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *proc) String() string {
	return fmt.Sprintf("exit %d after %s\nstdout:\n%s\nstderr:\n%s", p.exit, p.elapsed.Round(time.Millisecond), p.stdout.String(), p.stderr.String())
}

// expectTranscript fails t unless the process exited 0 having printed
// exactly the lines want.
func expectTranscript(t *testing.T, p *proc, want ...string) {
	t.Helper()
	p.wait(t)
	if got := p.stdout.String(); p.exit != 0 || got != strings.Join(want, "\n")+"\n" {
		t.Fatalf("%q: want exit 0 and stdout:\n%s\ngot %s", p.cmd.Args[1:], strings.Join(want, "\n"), p)
	}
	t.Logf("%q: %s", p.cmd.Args[1:], p.elapsed.Round(time.Millisecond))
}

// python finds a python3 that imports redis: Debian's /usr/bin/python3
// (python3-redis, the version pinned for these tests) first, then the
// python3 on PATH.
func python(t *testing.T) string {
	t.Helper()
	return testutil.PythonWithRedis(t, "/usr/bin/python3", "python3")
}

// node finds node and checks that node/node_modules holds the libraries
// (npm ci there).
func node(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		testutil.MissingTool(t, "node not found (nodejs)")
	}
	for _, pkg := range []string{"ioredis", "redlock", "@sesamecare-oss/redlock", "redis-semaphore"} {
		if _, err := os.Stat(filepath.Join("node", "node_modules", pkg, "package.json")); err != nil {
			testutil.MissingTool(t, "clients/redislibs/node/node_modules has no %s (npm ci in clients/redislibs/node)", pkg)
		}
	}
	return p
}

// scriptPath is the absolute path of a file of this package's directory.
func scriptPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
