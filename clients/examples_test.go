//go:build unix

// Package clients_test runs the client examples (clients/python, clients/node)
// and the bash functions of scripts/leasehold.sh against a real server on a
// loopback port, started in-process.
//
// They need python3 with redis-py, node with clients/node's packages,
// redis-cli, bash and shellcheck: `make deps` installs them (`make test` runs
// it first). Without one a test is skipped, and says so; with CI=true it fails
// instead.
package clients_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/internal/tlstest"
	"github.com/leasehold/leasehold/server"
)

// runTimeout bounds every process a test starts.
const runTimeout = 60 * time.Second

// missing skips the test when a tool is not installed, or fails it in CI,
// where `make test` has installed everything.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	testutil.MissingTool(t, format, args...)
}

// lookTool finds a program on PATH.
func lookTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s not found (%s)", name, pkg)
	}
	return p
}

// repoPath is a path from the repository's root (go test runs in clients/).
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", rel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// python finds a python3 that imports redis. Debian's python3-redis is for
// /usr/bin/python3; the python3 first on PATH may be another (pyenv, a venv).
func python(t *testing.T) string {
	t.Helper()
	return testutil.PythonWithRedis(t, "python3", "/usr/bin/python3")
}

// lockServer is a real server on a random loopback port, with its address
// split for the examples' environment.
type lockServer struct {
	*server.Server
	host, port string
}

func startServer(t *testing.T) *lockServer {
	t.Helper()
	return startServerWith(t)
}

// startServerWith is startServer on a configuration adjust changes.
func startServerWith(t *testing.T, adjust ...func(*server.Config)) *lockServer {
	t.Helper()
	ts := lockserver.Start(t, adjust...)
	host, port, err := net.SplitHostPort(ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return &lockServer{Server: ts.Server, host: host, port: port}
}

// closedPort is a loopback port nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// proc is a process a test started in a process group of its own.
type proc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr testutil.SyncBuffer
	done           chan struct{}
	exit           int
	elapsed        time.Duration
}

func start(t *testing.T, environ []string, stdin string, name string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	p := &proc{t: t, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, name, args...)
	p.cmd.Env = environ
	p.cmd.Stdin = strings.NewReader(stdin)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// On timeout, the whole group.
	p.cmd.Cancel = func() error { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }
	// A process left behind holding stdout must not hang the test.
	p.cmd.WaitDelay = 2 * time.Second
	began := time.Now()
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	pgid := p.cmd.Process.Pid
	t.Cleanup(func() {
		select {
		case <-p.done:
		default: // the test ended before the process: end its group
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
	})
	go func() {
		defer close(p.done)
		defer cancel()
		err := p.cmd.Wait()
		p.elapsed = time.Since(began)
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
	return p
}

// wait waits for the process and checks that it left no process behind in
// its group.
func (p *proc) wait() *proc {
	p.t.Helper()
	<-p.done
	if p.exit == -1 {
		p.t.Fatalf("%q did not exit within %s\nstdout: %s\nstderr: %s", p.cmd.Args, runTimeout, p.stdout.String(), p.stderr.String())
	}
	if p.exit == -2 {
		p.t.Fatalf("%q: waiting failed\nstdout: %s\nstderr: %s", p.cmd.Args, p.stdout.String(), p.stderr.String())
	}
	if left := groupMembers(p.cmd.Process.Pid); len(left) > 0 {
		p.t.Errorf("%q left processes behind in its group: %q", p.cmd.Args, left)
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	return p
}

// waitOutput waits until the process has printed want on stdout.
func (p *proc) waitOutput(want string) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.stdout.String(), want) {
		select {
		case <-p.done:
			p.t.Fatalf("exited before printing %q: %s", want, p)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("did not print %q within 10s: %s", want, p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *proc) String() string {
	return fmt.Sprintf("exit %d after %s\nstdout:\n%s\nstderr:\n%s", p.exit, p.elapsed.Round(time.Millisecond), p.stdout.String(), p.stderr.String())
}

// groupMembers lists the processes of process group pgid (Linux's /proc;
// none where there is no /proc), giving exiting ones a moment to go.
func groupMembers(pgid int) []string {
	var left []string
	for deadline := time.Now().Add(time.Second); ; {
		left = left[:0]
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, f := range stats {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			s := string(b)
			i := strings.LastIndexByte(s, ')')
			if i < 0 {
				continue
			}
			// after the command's name: state ppid pgrp ...
			fields := strings.Fields(s[i+1:])
			if len(fields) < 3 || fields[0] == "Z" || fields[2] != strconv.Itoa(pgid) {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "cmdline"))
			left = append(left, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exampleOutput is what both examples print, in order.
func exampleOutput(key, client string) *regexp.Regexp {
	q := regexp.QuoteMeta
	return regexp.MustCompile(`\A` +
		`acquired ` + q(key) + ` token ([0-9]+)\n` +
		`second owner refused\n` +
		`verified token ([0-9]+)\n` +
		`event: acquired ([0-9]+) (` + client + `-example-\S+)\n` +
		`released token ([0-9]+)\n` +
		`event: released ([0-9]+) (` + client + `-example-\S+)\n` +
		`ok\n\z`)
}

// checkExample checks an example's output: every step, one token throughout,
// one owner in both events.
func checkExample(t *testing.T, p *proc, key, client string) {
	t.Helper()
	if p.exit != 0 {
		t.Fatalf("%s example: %s", client, p)
	}
	m := exampleOutput(key, client).FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("%s example printed an unexpected transcript: %s", client, p)
	}
	tok := m[1]
	for _, other := range []string{m[2], m[3], m[5], m[6]} {
		if other != tok {
			t.Fatalf("%s example: tokens differ (%q): %s", client, m[1:], p)
		}
	}
	if m[4] != m[7] {
		t.Fatalf("%s example: the events name different owners: %s", client, p)
	}
	t.Logf("%s example: token %s, %s", client, tok, p.elapsed.Round(time.Millisecond))
}

func TestPythonExample(t *testing.T) {
	t.Parallel()
	py := python(t)
	script := repoPath(t, "clients/python/example.py")
	ts := startServer(t)
	p := start(t, testutil.Environ("LEASEHOLD_ADDR="+ts.Addr().String()), "", py, script, "examples:py").wait()
	checkExample(t, p, "examples:py", "python")
	if _, held := ts.Table().Status([]byte("examples:py")); held {
		t.Error("the example left its lock behind")
	}

	// No server: a message on stderr, a non-zero status.
	p = start(t, testutil.Environ("LEASEHOLD_ADDR=127.0.0.1:"+closedPort(t)), "", py, script).wait()
	if p.exit == 0 || !strings.Contains(p.stderr.String(), "python example:") {
		t.Fatalf("python example without a server: %s", p)
	}
	p = start(t, testutil.Environ("LEASEHOLD_ADDR=127.0.0.1"), "", py, script).wait()
	if p.exit != 1 || !strings.Contains(p.stderr.String(), "python example: LEASEHOLD_ADDR must be HOST:PORT, got '127.0.0.1'") {
		t.Fatalf("python example with an address without a port: %s", p)
	}
}

// TestPythonExampleMake runs the example as clients/README.md says, with
// make example-python, where the python3 first on PATH cannot import redis
// (as pyenv's or a venv's may not): the target finds one that can.
func TestPythonExampleMake(t *testing.T) {
	t.Parallel()
	makeBin := lookTool(t, "make", "make")
	python(t) // skips or fails without any python3 that imports redis
	if err := exec.Command("/usr/bin/python3", "-c", "import redis").Run(); err != nil {
		// Not Debian's python3-redis: nothing for the target to fall back to.
		t.Skip("/usr/bin/python3 cannot import redis: no fallback to show")
	}
	// A python3 without redis-py first on PATH: python with -S skips
	// site-packages (and Debian's dist-packages).
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "python3"), []byte("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t)
	p := start(t, testutil.Environ("LEASEHOLD_ADDR="+ts.Addr().String(), "PATH="+shim+string(os.PathListSeparator)+os.Getenv("PATH")),
		"", makeBin, "-s", "--no-print-directory", "-C", repoPath(t, "."), "example-python", "KEY=examples:make").wait()
	checkExample(t, p, "examples:make", "python")

	// No python3 with redis-py at all: the target says what to install.
	p = start(t, testutil.Environ("PATH="+shim+string(os.PathListSeparator)+os.Getenv("PATH")),
		"", makeBin, "-s", "--no-print-directory", "-C", repoPath(t, "."), "example-python", "PYTHON="+filepath.Join(shim, "python3")).wait()
	if p.exit == 0 || !strings.Contains(p.stderr.String(), "No module named 'redis'") {
		t.Fatalf("make example-python with PYTHON lacking redis-py: %s", p)
	}
}

func TestNodeExample(t *testing.T) {
	t.Parallel()
	node := lookTool(t, "node", "nodejs")
	script := repoPath(t, "clients/node/example.js")
	if _, err := os.Stat(repoPath(t, "clients/node") + "/node_modules/redis/package.json"); err != nil {
		missing(t, "clients/node/node_modules has no redis package (npm ci in clients/node)")
	}
	ts := startServer(t)
	p := start(t, testutil.Environ("LEASEHOLD_ADDR="+ts.Addr().String()), "", node, script, "examples:node").wait()
	checkExample(t, p, "examples:node", "node")
	if _, held := ts.Table().Status([]byte("examples:node")); held {
		t.Error("the example left its lock behind")
	}

	p = start(t, testutil.Environ("LEASEHOLD_ADDR=127.0.0.1:"+closedPort(t)), "", node, script).wait()
	if p.exit == 0 || !strings.Contains(p.stderr.String(), "node example:") {
		t.Fatalf("node example without a server: %s", p)
	}
	p = start(t, testutil.Environ("LEASEHOLD_ADDR=127.0.0.1"), "", node, script).wait()
	if p.exit != 1 || !strings.Contains(p.stderr.String(), `node example: LEASEHOLD_ADDR must be HOST:PORT, got "127.0.0.1"`) {
		t.Fatalf("node example with an address without a port: %s", p)
	}
}

// example finds the interpreter and the script of the example in lang
// ("python" or "node"), skipping the test without them.
func example(t *testing.T, lang string) (interp, script string) {
	t.Helper()
	switch lang {
	case "python":
		return python(t), repoPath(t, "clients/python/example.py")
	case "node":
		node := lookTool(t, "node", "nodejs")
		if _, err := os.Stat(repoPath(t, "clients/node") + "/node_modules/redis/package.json"); err != nil {
			missing(t, "clients/node/node_modules has no redis package (npm ci in clients/node)")
		}
		return node, repoPath(t, "clients/node/example.js")
	}
	t.Fatalf("no example in %s", lang)
	return "", ""
}

// TestExamplesPassword runs both examples against a server with a password,
// which they read from the environment as the leasehold binary does, and
// checks that they never print it.
func TestExamplesPassword(t *testing.T) {
	t.Parallel()
	const pw = "open sesame"
	ts := startServerWith(t, func(c *server.Config) { c.RequirePass = pw })
	for _, lang := range []string{"python", "node"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			interp, script := example(t, lang)
			for _, tc := range []struct {
				name string
				env  []string
				fail string // in stderr; "" for success
			}{
				{"LEASEHOLD_PASSWORD", []string{"LEASEHOLD_PASSWORD=" + pw}, ""},
				{"REDISCLI_AUTH", []string{"REDISCLI_AUTH=" + pw}, ""},
				{"user", []string{"LEASEHOLD_PASSWORD=" + pw, "LEASEHOLD_USER=default", "REDISCLI_AUTH=wrong"}, ""},
				{"wrong password", []string{"LEASEHOLD_PASSWORD=wrong " + pw}, "WRONGPASS"},
				{"unknown user", []string{"LEASEHOLD_PASSWORD=" + pw, "LEASEHOLD_USER=mallory"}, "WRONGPASS"},
				{"none", nil, "NOAUTH"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					key := "examples:auth:" + lang + ":" + strings.ReplaceAll(tc.name, " ", "-")
					p := start(t, testutil.Environ(append([]string{"LEASEHOLD_ADDR=" + ts.Addr().String()}, tc.env...)...), "", interp, script, key).wait()
					if strings.Contains(p.stdout.String()+p.stderr.String(), "sesame") {
						t.Errorf("the password is printed: %s", p)
					}
					if tc.fail == "" {
						checkExample(t, p, key, lang)
						return
					}
					if p.exit != 1 || !strings.Contains(p.stderr.String(), lang+" example:") {
						t.Fatalf("want exit 1 and the reason; got %s", p)
					}
					// redis-py turns WRONGPASS into AuthenticationError with
					// its own text.
					if want := tc.fail; !strings.Contains(p.stderr.String(), want) &&
						!(lang == "python" && want == "WRONGPASS" && strings.Contains(p.stderr.String(), "invalid username-password pair")) &&
						!(lang == "python" && want == "NOAUTH" && strings.Contains(p.stderr.String(), "Authentication required")) {
						t.Errorf("stderr lacks %s: %s", want, p)
					}
				})
			}
		})
	}
}

// tlsServer is a server with a password and a TLS listener that wants a
// client certificate, and the environment that reaches the TLS listener,
// as the examples and the scripts read it.
type tlsServer struct {
	*lockServer
	certs *tlstest.Files
	env   []string // LEASEHOLD_ADDR, the password and every TLS setting
}

func startTLSServer(t *testing.T, password string) *tlsServer {
	t.Helper()
	certs := tlstest.New(t, t.TempDir())
	ts := startServerWith(t, func(c *server.Config) {
		c.RequirePass = password
		c.TLS.Addr = "127.0.0.1:0"
		c.TLS.CertFile, c.TLS.KeyFile, c.TLS.CACertFile = certs.ServerCert, certs.ServerKey, certs.CACert
		c.TLS.AuthClients = "yes"
	})
	cert, key := certs.ClientCert(t, "example")
	return &tlsServer{lockServer: ts, certs: certs, env: []string{
		"LEASEHOLD_ADDR=" + ts.TLSAddr().String(), "LEASEHOLD_PASSWORD=" + password, "LEASEHOLD_TLS=1",
		"LEASEHOLD_TLS_CACERT=" + certs.CACert, "LEASEHOLD_TLS_CERT=" + cert, "LEASEHOLD_TLS_KEY=" + key,
	}}
}

// TestExamplesTLS runs both examples over TLS with a client certificate
// and a password, and checks that they verify the server and refuse a TLS
// setting without LEASEHOLD_TLS.
func TestExamplesTLS(t *testing.T) {
	t.Parallel()
	const pw = "open sesame"
	ts := startTLSServer(t, pw)
	for _, lang := range []string{"python", "node"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			interp, script := example(t, lang)
			key := "examples:tls:" + lang
			p := start(t, testutil.Environ(ts.env...), "", interp, script, key).wait()
			checkExample(t, p, key, lang)
			if _, held := ts.Table().Status([]byte(key)); held {
				t.Error("the example left its lock behind")
			}
			for _, tc := range []struct {
				name string
				env  []string
				want string // in stderr
			}{
				// The test's CA is not among the system's (Node's).
				{"unknown CA", []string{"LEASEHOLD_TLS_CACERT="}, map[string]string{"python": "certificate verify failed", "node": "unable to verify the first certificate"}[lang]},
				{"no TLS", []string{"LEASEHOLD_TLS=0", "LEASEHOLD_TLS_CACERT=", "LEASEHOLD_TLS_CERT=", "LEASEHOLD_TLS_KEY="}, lang + " example:"},
				{"TLS setting without TLS", []string{"LEASEHOLD_TLS="}, "LEASEHOLD_TLS_CACERT is a setting of TLS: set LEASEHOLD_TLS=1"},
				{"not a boolean", []string{"LEASEHOLD_TLS=yes"}, "LEASEHOLD_TLS must be 1 or 0"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					p := start(t, testutil.Environ(slices.Concat(ts.env, tc.env)...), "", interp, script, key).wait()
					if p.exit != 1 || !strings.Contains(p.stderr.String(), tc.want) {
						t.Fatalf("want exit 1 and %q on stderr; got %s", tc.want, p)
					}
					if strings.Contains(p.stdout.String()+p.stderr.String(), "sesame") {
						t.Errorf("the password is printed: %s", p)
					}
				})
			}
		})
	}
}
