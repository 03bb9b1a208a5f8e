package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testutil"
)

// binary is the leasehold command built once by TestMain; buildErr is why
// it could not be, reported by each test that needs it.
var binary, buildErr = "", error(nil)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "leasehold-main-test")
	if err != nil {
		buildErr = err
	} else {
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "leasehold")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		// go test puts its own toolchain first in PATH. The tag adds the
		// test hook LEASEHOLD_TEST_NOW (bootclock_testhook.go).
		out, err := exec.CommandContext(ctx, "go", "build", "-tags", "leasehold_testclock", "-o", binary, "..").CombinedOutput()
		cancel()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	m.Run() // its result becomes the exit status when TestMain returns
}

// commandTimeout bounds every run of the binary.
const commandTimeout = 20 * time.Second

// serveFlagNames are the flags of serve the docs promise.
var serveFlagNames = []string{
	"addr", "shards", "max-ttl", "max-key-len", "require-create", "log-level", "log-format",
	"idle-timeout", "max-bulk-len", "max-query-buffer", "max-clients", "tick", "io-loops", "lock-delay",
	"max-locks", "maxmemory", "client-output-buffer-limit",
	"data-dir", "fsync", "restart-grace", "repair", "allow-clock-before-epoch", "shutdown-timeout",
	"requirepass", "requirepass-file", "acl-file", "protected-mode",
	"slowlog-log-slower-than", "slowlog-max-len", "lockstats-top",
	"tls-port", "tls-addr", "tls-cert-file", "tls-key-file", "tls-ca-cert-file", "tls-auth-clients", "tls-auth-clients-user", "tls-protocols",
	"cluster", "node-id", "raft-addr", "bootstrap", "join", "peers", "recover", "redirect", "announce-addr", "raft-heartbeat-timeout", "raft-log-store",
	"cluster-tls", "cluster-tls-cert-file", "cluster-tls-key-file", "cluster-tls-ca-cert-file", "cluster-tls-server-name", "cluster-tls-allowed-cn",
	"http-addr", "http-allow-remote", "pprof",
	"config",
}

// run runs the binary to completion, bounded by commandTimeout.
func run(t *testing.T, env []string, args ...string) (stdout, stderr string, exit int) {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = testutil.Environ(env...)
	cmd.WaitDelay = time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("leasehold %q did not exit within %s\nstderr: %s", args, commandTimeout, errOut.String())
	case errors.As(err, &ee):
		exit = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), exit
}

// process is a running leasehold server.
type process struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	done   chan struct{} // closed when Wait returned
	err    error         // Wait's result, set before done is closed
}

// start starts the binary; the test's cleanup kills it if it still runs.
func start(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	return startUnder(t, nil, env, args...)
}

// startUnder is start with the binary run by a wrapper command that execs it.
func startUnder(t *testing.T, wrapper, env []string, args ...string) *process {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	argv := append(append(append([]string(nil), wrapper...), binary), args...)
	p := &process{t: t, cmd: exec.Command(argv[0], argv[1:]...), stderr: &testutil.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = testutil.Environ(env...)
	p.cmd.Stderr = p.stderr
	p.cmd.WaitDelay = time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(commandTimeout):
			t.Errorf("leasehold pid %d survived SIGKILL", p.cmd.Process.Pid)
		}
	})
	return p
}

// waitListening polls until addr accepts a TCP connection.
func (p *process) waitListening(addr string) {
	p.t.Helper()
	if !p.listening(addr) {
		p.t.Fatalf("leasehold exited before listening on %s: %v\nstderr: %s", addr, p.err, p.stderr)
	}
}

// listening polls until addr accepts a TCP connection, and reports false if
// the process exits first.
func (p *process) listening(addr string) bool {
	p.t.Helper()
	deadline := time.After(commandTimeout)
	for {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			nc.Close()
			return true
		}
		select {
		case <-p.done:
			return false
		case <-deadline:
			p.t.Fatalf("leasehold not listening on %s after %s: %v\nstderr: %s", addr, commandTimeout, err, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends sig and returns the exit status.
func (p *process) stop(sig os.Signal) int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.t.Fatalf("leasehold did not exit within 5s of %v\nstderr: %s", sig, p.stderr)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	case p.err != nil:
		p.t.Fatal(p.err)
	}
	return 0
}

// logLines parses stderr as zerolog's JSON lines.
func (p *process) logLines() []map[string]any {
	p.t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			p.t.Fatalf("stderr line %q is not JSON: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// serveBinary starts the binary as a server on a free loopback port, with
// the environment and arguments setup gives for that address, and returns
// once it accepts connections. freeAddr's port was free a moment ago only:
// should the server find it taken, it tries another, twice.
func serveBinary(t *testing.T, setup func(addr string) (env, args []string)) (*process, string) {
	t.Helper()
	return serveBinaryUnder(t, nil, setup)
}

// serveBinaryUnder is serveBinary with the binary started by a wrapper
// command that execs it (such as sh -c 'ulimit -n 64; exec "$@"' sh), so
// that the process signalled and waited for is still the server.
func serveBinaryUnder(t *testing.T, wrapper []string, setup func(addr string) (env, args []string)) (*process, string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		env, args := setup(addr)
		p := startUnder(t, wrapper, env, args...)
		if p.listening(addr) {
			return p, addr
		}
		if attempt == 3 || !strings.Contains(p.stderr.String(), "address already in use") {
			t.Fatalf("leasehold %q exited before listening on %s: %v\nstderr: %s", args, addr, p.err, p.stderr)
		}
	}
}

// serveArgs is a serveBinary setup: serve on the address with the log in
// JSON, and args after.
func serveArgs(args ...string) func(addr string) (env, args []string) {
	return func(addr string) ([]string, []string) {
		return nil, append([]string{"serve", "--addr", addr, "--log-format", "json"}, args...)
	}
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func client(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestHelpListsEveryServeFlag(t *testing.T) {
	var defined []string
	for _, f := range serveFlags() {
		defined = append(defined, f.Names()[0])
	}
	if !sameSet(defined, serveFlagNames) {
		t.Errorf("serveFlags defines %q, want %q", defined, serveFlagNames)
	}
	// The top level's --help does not list them: see TestHelp.
	for _, args := range [][]string{{"serve", "--help"}, {"help", "serve"}} {
		stdout, stderr, exit := run(t, nil, args...)
		if exit != 0 {
			t.Fatalf("leasehold %q: exit %d\n%s", args, exit, stderr)
		}
		for _, name := range serveFlagNames {
			if !strings.Contains(stdout, "--"+name+" ") {
				t.Errorf("leasehold %q does not list --%s:\n%s", args, name, stdout)
			}
			env := "$LEASEHOLD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			if !strings.Contains(stdout, env) {
				t.Errorf("leasehold %q does not mention %s:\n%s", args, env, stdout)
			}
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestServeStopsOnSignal(t *testing.T) {
	cases := []struct {
		name    string
		command []string
		sig     syscall.Signal
	}{
		{"default/SIGTERM", nil, syscall.SIGTERM},
		{"default/SIGINT", nil, syscall.SIGINT},
		{"serve/SIGTERM", []string{"serve"}, syscall.SIGTERM},
		{"serve/SIGINT", []string{"serve"}, syscall.SIGINT},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, addr := serveBinary(t, func(addr string) ([]string, []string) {
				return nil, append(tc.command, "--addr", addr, "--log-format", "json")
			})

			rdb := client(t, addr)
			ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
			defer cancel()
			tok, err := rdb.Do(ctx, "ACQUIRE", "k", 30000).Uint64()
			if err != nil || tok == 0 {
				t.Fatalf("ACQUIRE = %d, %v", tok, err)
			}
			if n, err := rdb.Do(ctx, "VERIFY", "k", tok).Int(); err != nil || n != 1 {
				t.Fatalf("VERIFY = %d, %v", n, err)
			}
			// The client's connection stays open: shutdown must close it.
			if exit := p.stop(tc.sig); exit != 0 {
				t.Fatalf("exit status %d after %v, want 0\nstderr: %s", exit, tc.sig, p.stderr)
			}

			var listening, shutDown int
			lines := p.logLines()
			for _, l := range lines {
				switch l["message"] {
				case "leasehold listening":
					listening++
					if l["addr"] != addr || l["level"] != "info" {
						t.Errorf("startup line %v, want addr %q at level info", l, addr)
					}
				case "shut down":
					shutDown++
				}
			}
			if listening != 1 || shutDown != 1 || lines[len(lines)-1]["message"] != "shut down" {
				t.Errorf("want one startup line and a last shut down line, got:\n%s", p.stderr)
			}
		})
	}
}

func TestServeReadsEnvironment(t *testing.T) {
	p, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return []string{"LEASEHOLD_ADDR=" + addr, "LEASEHOLD_REQUIRE_CREATE=true", "LEASEHOLD_LOG_FORMAT=json"}, nil
	})

	rdb := client(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	if tok, err := rdb.Do(ctx, "ACQUIRE", "k", 30000).Uint64(); err == nil || !strings.HasPrefix(err.Error(), "NOLOCK ") {
		t.Fatalf("ACQUIRE of an unknown lock = %d, %v; want a NOLOCK error", tok, err)
	}
	if n, err := rdb.Do(ctx, "CREATE", "k").Int(); err != nil || n != 1 {
		t.Fatalf("CREATE = %d, %v", n, err)
	}
	if tok, err := rdb.Do(ctx, "ACQUIRE", "k", 30000).Uint64(); err != nil || tok == 0 {
		t.Fatalf("ACQUIRE after CREATE = %d, %v", tok, err)
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d, want 0\nstderr: %s", exit, p.stderr)
	}
	start := p.logLines()[0]
	if start["message"] != "leasehold listening" || start["addr"] != addr || start["require_create"] != true {
		t.Errorf("startup line %v, want addr %q and require_create true", start, addr)
	}
}

// TestBadArgumentsFail covers mistakes found before serve makes its logger;
// TestServeFailsToStart those after, which are logged.
func TestBadArgumentsFail(t *testing.T) {
	// Each case would otherwise listen on a free port, not on 7379.
	const anyPort = "--addr=127.0.0.1:0"
	cases := []struct {
		name string
		env  []string
		args []string
		want string // in stderr
	}{
		{"shards not a number", nil, []string{anyPort, "--shards", "many"}, "shards"},
		{"unknown log level", nil, []string{anyPort, "--log-level", "loud"}, `log level "loud"`},
		{"unknown log format", nil, []string{anyPort, "--log-format", "xml"}, `log format "xml"`},
		{"extra argument", nil, []string{anyPort, "extra"}, `unknown command "extra"`},
		{"serve with extra argument", nil, []string{"serve", anyPort, "extra"}, `unexpected argument "extra"`},
		{"unknown flag", nil, []string{anyPort, "--bogus"}, "flag provided but not defined: --bogus"},
		{"maxmemory with an unknown unit", nil, []string{anyPort, "--maxmemory", "5tb"}, "maxmemory"},
		{"protected mode neither yes nor no", nil, []string{anyPort, "--protected-mode", "off"}, "protected-mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, exit := run(t, tc.env, tc.args...)
			if exit != exitFailure || !strings.Contains(stderr, "leasehold: ") || !strings.Contains(stderr, tc.want) {
				t.Fatalf("leasehold %q: exit %d, stderr %q; want 2, a command-line mistake, mentioning %q", tc.args, exit, stderr, tc.want)
			}
		})
	}
}

func TestNewLogger(t *testing.T) {
	cases := []struct {
		level, format string
		wantErr       bool
		json          bool // else console
		infoShown     bool // an Info event is written
	}{
		{level: "info", format: "json", json: true, infoShown: true},
		{level: "debug", format: "json", json: true, infoShown: true},
		{level: "INFO", format: "json", json: true, infoShown: true},
		{level: "warn", format: "json", json: true},
		{level: "error", format: "json", json: true},
		{level: "info", format: "console", infoShown: true},
		{level: "warn", format: "console"},
		{level: "info", format: "", json: true, infoShown: true}, // a file is not a terminal
		{level: "loud", format: "json", wantErr: true},
		{level: "", format: "json", wantErr: true},
		{level: "trace", format: "json", wantErr: true},
		{level: "fatal", format: "json", wantErr: true},
		{level: "panic", format: "json", wantErr: true},
		{level: "disabled", format: "json", wantErr: true},
		{level: "info", format: "xml", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.level+"/"+tc.format, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "log"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			log, err := newLogger(f, tc.level, tc.format)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("newLogger(%q, %q) succeeded, want an error", tc.level, tc.format)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Info().Str("key", "value").Msg("info event")
			log.Error().Str("key", "value").Msg("error event")
			b, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			out := string(b)
			if got := strings.Contains(out, "info event"); got != tc.infoShown {
				t.Errorf("info event written: %v, want %v; output:\n%s", got, tc.infoShown, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			last := lines[len(lines)-1]
			if tc.json {
				var m map[string]any
				if err := json.Unmarshal([]byte(last), &m); err != nil {
					t.Fatalf("line %q is not JSON: %v", last, err)
				}
				if m["message"] != "error event" || m["level"] != "error" || m["key"] != "value" || m["time"] == nil {
					t.Errorf("line %v: want message, level, key and time", m)
				}
			} else {
				if strings.HasPrefix(last, "{") || !strings.Contains(last, "error event") || !strings.Contains(last, "key=") {
					t.Errorf("console line %q: want text with key=value, not JSON", last)
				}
				if strings.Contains(out, "\x1b[") {
					t.Errorf("console output to a file has colour codes:\n%q", out)
				}
			}
		})
	}
}

// TestFlagsBeforeServe checks that flags given before the serve subcommand
// count, as flags given after it do.
func TestFlagsBeforeServe(t *testing.T) {
	p, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return nil, []string{"--addr", addr, "--log-format", "json", "--shards", "4", "serve", "--max-key-len", "16"}
	})
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d, want 0\nstderr: %s", exit, p.stderr)
	}
	first := p.logLines()[0]
	if first["addr"] != addr || first["shards"] != float64(4) || first["max_key_len"] != float64(16) {
		t.Fatalf("startup line %v; want addr %s, 4 shards and max key len 16", first, addr)
	}
	if _, stderr, exit := run(t, nil, "--shards", "3", "--addr=127.0.0.1:0", "serve"); exit == 0 || !strings.Contains(stderr, "shards") {
		t.Fatalf("--shards 3 before serve: exit %d, stderr %q; want a failure naming shards", exit, stderr)
	}
}

// TestCommandLineBeatsEnvironment checks that a flag on the command line,
// before or after serve, wins over its LEASEHOLD_ variable, and that the
// variable still counts when no flag is given.
func TestCommandLineBeatsEnvironment(t *testing.T) {
	cases := []struct {
		name string
		args func(flagAddr string) []string
		want string // "flag" or "env"
	}{
		{"flag before serve", func(a string) []string { return []string{"--addr", a, "serve"} }, "flag"},
		{"flag after serve", func(a string) []string { return []string{"serve", "--addr", a} }, "flag"},
		{"flag without serve", func(a string) []string { return []string{"--addr", a} }, "flag"},
		{"no flag, serve", func(string) []string { return []string{"serve"} }, "env"},
		{"no flag, no serve", func(string) []string { return nil }, "env"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			flagAddr, envAddr := freeAddr(t), freeAddr(t)
			want := map[string]string{"flag": flagAddr, "env": envAddr}[tc.want]
			p := start(t, []string{"LEASEHOLD_ADDR=" + envAddr, "LEASEHOLD_LOG_FORMAT=json"}, tc.args(flagAddr)...)
			p.waitListening(want)
			if exit := p.stop(syscall.SIGTERM); exit != 0 {
				t.Fatalf("exit status %d, want 0\nstderr: %s", exit, p.stderr)
			}
			if got := p.logLines()[0]["addr"]; got != want {
				t.Errorf("listening on %v, want the %s's %s", got, tc.want, want)
			}
		})
	}
}
