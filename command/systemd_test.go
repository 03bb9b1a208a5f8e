package command

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
	"github.com/rs/zerolog"
)

// notifySocket listens where NOTIFY_SOCKET will point, as systemd does.
type notifySocket struct {
	t    *testing.T
	path string
	conn *net.UnixConn
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &notifySocket{t: t, path: path, conn: conn}
}

// next returns the next message, or "" once p has exited without one;
// it fails the test after commandTimeout.
func (n *notifySocket) next(p *process) string {
	n.t.Helper()
	buf := make([]byte, 4096)
	deadline := time.Now().Add(commandTimeout)
	for time.Now().Before(deadline) {
		n.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		k, err := n.conn.Read(buf)
		if err == nil {
			return string(buf[:k])
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			n.t.Fatal(err)
		}
		select {
		case <-p.done:
			return ""
		default:
		}
	}
	n.t.Fatalf("no notify message in %s\nstderr: %s", commandTimeout, p.stderr)
	return ""
}

// hasLine reports whether msg, newline-separated assignments, holds line.
func hasLine(msg, line string) bool {
	for _, l := range strings.Split(msg, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// TestSystemdNotify: under systemd (NOTIFY_SOCKET), serve sends READY=1
// once it answers commands, WATCHDOG=1 at half of WATCHDOG_USEC while it
// does, and STOPPING=1 on SIGTERM before it exits; without WATCHDOG_USEC no
// WATCHDOG=1.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		watchdog string // WATCHDOG_USEC; "" for none
		pings    int
	}{
		{"watchdog", "200000", 3},
		{"no watchdog", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sock := listenNotify(t)
			env := []string{"NOTIFY_SOCKET=" + sock.path}
			if tc.watchdog != "" {
				env = append(env, "WATCHDOG_USEC="+tc.watchdog)
			}
			var p *process
			var addr, ready string
			for attempt := 1; ready == ""; attempt++ { // freeAddr's port may be taken by then
				addr = freeAddr(t)
				p = start(t, env, "serve", "--addr", addr, "--log-format", "json", "--data-dir", t.TempDir())
				if ready = sock.next(p); ready == "" && (attempt == 3 || !strings.Contains(p.stderr.String(), "address already in use")) {
					t.Fatalf("exited before READY=1: %v\nstderr: %s", p.err, p.stderr)
				}
			}
			if !hasLine(ready, "READY=1") {
				t.Fatalf("first message %q, want READY=1\nstderr: %s", ready, p.stderr)
			}
			// Ready means serving: a lease is granted at once.
			if tok, err := client(t, addr).Do(testCtx(t), "ACQUIRE", "k", 60000).Uint64(); err != nil || tok == 0 {
				t.Fatalf("ACQUIRE after READY=1: %d, %v", tok, err)
			}
			for i := 0; i < tc.pings; i++ {
				if msg := sock.next(p); msg != "WATCHDOG=1" {
					t.Fatalf("message %q after READY=1, want WATCHDOG=1", msg)
				}
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			for {
				msg := sock.next(p)
				if msg == "STOPPING=1" {
					break
				}
				if msg != "WATCHDOG=1" || tc.watchdog == "" {
					t.Fatalf("message %q after SIGTERM, want STOPPING=1", msg)
				}
			}
			select {
			case <-p.done:
			case <-time.After(commandTimeout):
				t.Fatalf("no exit after STOPPING=1\nstderr: %s", p.stderr)
			}
			if p.err != nil {
				t.Fatalf("exit: %v\nstderr: %s", p.err, p.stderr)
			}
		})
	}
}

// TestSystemdUnit checks scripts/leasehold.service with systemd-analyze:
// verify finds nothing to say about it (with the test's binary in
// ExecStart, which verify wants to exist), and security rates its
// exposure at most 2.0 of 10. Outside CI a machine without systemd skips;
// in CI (CI=true) make deps has installed it.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no systemd-analyze in CI: make deps installs Debian's systemd")
		}
		t.Skip("no systemd-analyze here (Debian's systemd; make deps installs it)")
	}
	b, err := os.ReadFile(filepath.Join("..", "scripts", "leasehold.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{"Type=notify", "WatchdogSec=", "DynamicUser=yes", "StateDirectory=leasehold",
		"ExecStart=/usr/local/bin/leasehold serve --data-dir /var/lib/leasehold", "Restart=on-failure"} {
		if !strings.Contains(unit, "\n"+want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
	file := filepath.Join(t.TempDir(), "leasehold.service")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(unit, "/usr/local/bin/leasehold", binary)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", file).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command("systemd-analyze", "security", "--offline=true", file).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for leasehold.service: ([0-9.]+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2.0 {
		t.Errorf("exposure level %s, want at most 2.0:\n%s", m[1], out)
	}
}

// receive returns the next notify message within commandTimeout.
func (n *notifySocket) receive() string {
	n.t.Helper()
	buf := make([]byte, 4096)
	n.conn.SetReadDeadline(time.Now().Add(commandTimeout))
	k, err := n.conn.Read(buf)
	if err != nil {
		n.t.Fatalf("no notify message: %v", err)
	}
	return string(buf[:k])
}

// TestNotifySystemdReadyOnServe runs notifySystemd in the test's process:
// READY=1 goes out once the server serves (Server.Serving: recovery is
// done, connections are accepted), and at that moment the server is ready;
// stopped before it serves, it sends STOPPING=1 and no READY=1.
func TestNotifySystemdReadyOnServe(t *testing.T) {
	sock := listenNotify(t)
	t.Setenv("NOTIFY_SOCKET", sock.path)
	t.Setenv("WATCHDOG_USEC", "")
	newServer := func() *server.Server {
		cfg, err := lockserver.Config()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Persist.Dir = t.TempDir()
		srv, err := server.New(cfg, zerolog.New(testutil.NewTestLog(t)))
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}

	t.Run("stopped before serving", func(t *testing.T) {
		srv := newServer()
		defer srv.Close()
		stop := notifySystemd(context.Background(), zerolog.New(testutil.NewTestLog(t)), srv)
		stop()
		if msg := sock.receive(); msg != "STOPPING=1" {
			t.Fatalf("message %q, want STOPPING=1 alone", msg)
		}
	})

	t.Run("serving", func(t *testing.T) {
		srv := newServer()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop := notifySystemd(ctx, zerolog.New(testutil.NewTestLog(t)), srv)
		defer stop()
		if ready, why := srv.Ready(); ready {
			t.Fatalf("ready before Serve: %s", why)
		}
		served := make(chan error, 1)
		go func() { served <- srv.ListenAndServe(ctx) }()
		msg := sock.receive()
		if !hasLine(msg, "READY=1") || !hasLine(msg, "STATUS=serving") {
			t.Fatalf("first message %q, want READY=1 and STATUS=serving", msg)
		}
		if ready, why := srv.Ready(); !ready {
			t.Fatalf("READY=1 sent, but the server is not ready: %s", why)
		}
		cancel()
		if msg := sock.receive(); msg != "STOPPING=1" {
			t.Fatalf("message %q after the context ended, want STOPPING=1", msg)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
	})
}
