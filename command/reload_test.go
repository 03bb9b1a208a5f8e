//go:build unix

package command

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// TestServeACLFileReloadOnSIGHUP starts the binary with --acl-file (from
// LEASEHOLD_ACL_FILE), changes the file and sends SIGHUP: new permissions
// are in force without a restart; a file that does not parse is logged and
// changes nothing; SIGHUP never stops the server.
func TestServeACLFileReloadOnSIGHUP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users.acl")
	write := func(content string) {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("user alice on >alicepw ~jobs:* +@read\n")
	p, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return []string{"LEASEHOLD_ACL_FILE=" + file}, []string{"serve", "--addr", addr, "--log-format", "json"}
	})
	alice := redis.NewClient(&redis.Options{Addr: addr, Username: "alice", Password: "alicepw", MaxRetries: -1})
	defer alice.Close()
	acquire := func() error { return alice.Do(testCtx(t), "ACQUIRE", "jobs:1", 1000).Err() }
	if err := acquire(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("before the reload: %v, want NOPERM", err)
	}

	write("user alice on >alicepw ~jobs:* +@read +@lock bogus\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 10*time.Second, "the broken file's refusal logged", func() bool {
		return strings.Contains(p.stderr.String(), "SIGHUP: reload failed")
	})
	if !strings.Contains(p.stderr.String(), "users.acl:1:") {
		t.Errorf("the refusal does not name the file's line:\n%s", p.stderr)
	}
	if err := acquire(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("after a broken file: %v, want NOPERM still", err)
	}

	write("user alice on >alicepw ~jobs:* +@read +@lock\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 10*time.Second, "the reloaded file in force", func() bool { return acquire() == nil })

	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
	}
	if lineWith(p.logLines(), "SIGHUP: reloaded") == nil {
		t.Errorf("no reload logged:\n%s", p.stderr)
	}
}

// TestServeSIGHUPWithoutReloads: a server without --acl-file keeps running
// on SIGHUP, as Redis ignores it.
func TestServeSIGHUPWithoutReloads(t *testing.T) {
	p, addr := serveBinary(t, serveArgs())
	p.cmd.Process.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 10*time.Second, "the SIGHUP handled", func() bool {
		return strings.Contains(p.stderr.String(), "SIGHUP: nothing to reload")
	})
	if err := client(t, addr).Ping(testCtx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
	}
}

// TestServeLogLevelReloadOnSIGHUP: with --config, SIGHUP reads the file's
// log-level again: debug lines (a client connecting) appear once it says
// debug, and go again once it says warn; the change is logged.
func TestServeLogLevelReloadOnSIGHUP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "leasehold.toml")
	write := func(level string) {
		if err := os.WriteFile(file, []byte("log-level = \""+level+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("info")
	p, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return nil, []string{"serve", "--addr", addr, "--log-format", "json", "--config", file}
	})
	connects := func() int {
		n := 0
		for _, l := range p.logLines() {
			if l["message"] == "connected" {
				n++
			}
		}
		return n
	}
	ping := func() {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer c.Close()
		if err := c.Ping(testCtx(t)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ping()
	if n := connects(); n != 0 {
		t.Fatalf("%d debug lines at info level", n)
	}

	write("debug")
	p.cmd.Process.Signal(syscall.SIGHUP)
	defer func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", p.stderr)
		}
	}()
	testutil.Eventually(t, 10*time.Second, "the change logged", func() bool {
		return strings.Contains(p.stderr.String(), "SIGHUP: log level changed")
	})
	ping()
	testutil.Eventually(t, 10*time.Second, "a debug line", func() bool { return connects() > 0 })

	write("warn")
	p.cmd.Process.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 10*time.Second, "the second change logged", func() bool {
		return strings.Count(p.stderr.String(), "SIGHUP: log level changed") == 2
	})
	before := connects()
	ping()
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
	}
	if n := connects(); n != before {
		t.Fatalf("debug lines at warn level: %d, then %d", before, n)
	}
}

// TestServeMaxClientsReloadOnSIGHUP: with --config, SIGHUP puts the file's
// max-clients in force: a client refused at the old limit gets in once it
// is raised, and the change is logged.
func TestServeMaxClientsReloadOnSIGHUP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "leasehold.yaml")
	write := func(n int) {
		if err := os.WriteFile(file, []byte(fmt.Sprintf("max-clients: %d\n", n)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	p, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return nil, []string{"serve", "--addr", addr, "--log-format", "json", "--config", file}
	})
	ping := func(c *redis.Client) error { return c.Ping(testCtx(t)).Err() }
	// serveBinary's own probe may not have left yet: the first client gets
	// in once it has.
	var first *redis.Client
	testutil.Eventually(t, 10*time.Second, "the first client served", func() bool {
		if first != nil {
			first.Close()
		}
		first = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1})
		return ping(first) == nil
	})
	defer first.Close()
	second := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1})
	// Refused: the server's "max number of clients reached", or the
	// connection already closed when the client writes.
	if err := ping(second); err == nil {
		t.Fatal("a second client at max-clients 1 was served")
	}
	second.Close()

	write(2)
	p.cmd.Process.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 10*time.Second, "the change logged", func() bool {
		return strings.Contains(p.stderr.String(), "SIGHUP: max clients changed")
	})
	second = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1})
	defer second.Close()
	if err := ping(second); err != nil {
		t.Fatalf("a second client at max-clients 2: %v", err)
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
	}
}

// TestServeIdleTimeoutReloadOnSIGHUP: with --config, SIGHUP puts the file's
// idle-timeout in force: a connection open and silent since before the
// reload, under no timeout, is closed once silent for the new one, counted
// from the reload; the change is logged.
func TestServeIdleTimeoutReloadOnSIGHUP(t *testing.T) {
	const idle = 300 * time.Millisecond
	file := filepath.Join(t.TempDir(), "leasehold.toml")
	write := func(d string) {
		if err := os.WriteFile(file, []byte("idle-timeout = \""+d+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("0s")
	p, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return nil, []string{"serve", "--addr", addr, "--log-format", "json", "--config", file}
	})
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(nc)
	if _, err := nc.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); line != "+PONG\r\n" {
		t.Fatalf("PING: %q, %v", line, err)
	}

	write(idle.String())
	sent := time.Now()
	p.cmd.Process.Signal(syscall.SIGHUP)
	rest, err := io.ReadAll(r) // the deadline above bounds the wait
	took := time.Since(sent)
	if err != nil || len(rest) != 0 {
		t.Fatalf("the silent connection: %v after %q, want it closed\nstderr: %s", err, rest, p.stderr)
	}
	if took < idle {
		t.Fatalf("closed %v after the reload, before the new timeout of %v", took, idle)
	}
	changed := lineWith(p.logLines(), "SIGHUP: idle timeout changed")
	if changed == nil || changed["from"] != "0s" || changed["to"] != "300ms" {
		t.Fatalf("the change logged as %v\nstderr: %s", changed, p.stderr)
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
	}
}

// TestServeMaxMemoryReloadOnSIGHUP: with --config, SIGHUP puts the file's
// maxmemory in force: ACQUIRE gets -OOM once it is below the heap in use,
// and is granted again once it is raised; each change is logged.
func TestServeMaxMemoryReloadOnSIGHUP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "leasehold.yaml")
	write := func(v string) {
		if err := os.WriteFile(file, []byte("maxmemory: "+v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("0")
	p, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return nil, []string{"serve", "--addr", addr, "--log-format", "json", "--config", file}
	})
	defer func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", p.stderr)
		}
	}()
	rdb := client(t, addr)
	n := 0
	acquire := func() error {
		n++
		return rdb.Do(testCtx(t), "ACQUIRE", fmt.Sprint("k", n), 10000).Err()
	}
	if err := acquire(); err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		value string
		oom   bool
	}{
		{"1", true}, // an int in the file, a byte below any heap
		{"1gb", false},
	} {
		write(step.value)
		p.cmd.Process.Signal(syscall.SIGHUP)
		testutil.Eventually(t, 10*time.Second, "the change logged", func() bool {
			return strings.Count(p.stderr.String(), "SIGHUP: maxmemory changed") == i+1
		})
		testutil.Eventually(t, 10*time.Second, "maxmemory "+step.value+" in force", func() bool {
			err := acquire()
			return (err != nil && strings.HasPrefix(err.Error(), "OOM ")) == step.oom
		})
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
	}
}
