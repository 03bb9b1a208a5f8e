package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/protocol"
)

// These tests run the real redis-cli and redis-benchmark (Redis 7.0's
// redis-tools) against the server. What they assert is what those tools
// actually print, which differs by mode:
//
//   - stdout not a tty (every exec below): raw output. An integer or bulk
//     string is printed bare, nil as an empty line, an array one element a
//     line (nested arrays flattened, an empty one as an empty line), and an
//     error reply as its text ("ERR ...", "INUSE ...", no "(error) ")
//     followed by an extra empty line, on stdout, with exit status 0.
//   - --no-raw: the tty formatting: "(integer) 1", "(nil)", `1) "0"`, and
//     "(error) ERR ..." on stdout, exit status still 0.
//   - -e: an error reply goes to stderr and the exit status is 1.
//   - a tty (TestRedisCliInteractive): the same formatting as --no-raw, with
//     hints and help built from COMMAND DOCS.

const toolTimeout = 30 * time.Second

// redisTool finds a redis-tools binary; the tests never skip without it.
func redisTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run `make test`, which installs redis-tools", name)
	}
	return p
}

// hostPort splits the test server's address for the tools' -h and -p.
func (ts *testServer) hostPort() (host, port string) {
	ts.t.Helper()
	host, port, err := net.SplitHostPort(ts.addr)
	if err != nil {
		ts.t.Fatal(err)
	}
	return host, port
}

type toolResult struct {
	stdout, stderr string
	exit           int
}

// runTool runs a command with stdin fed from a string, bounded by toolTimeout.
func runTool(t *testing.T, stdin string, name string, args ...string) toolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 2 * time.Second
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := toolResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %q: no exit within %s\nstdout: %q\nstderr: %q", name, args, toolTimeout, res.stdout, res.stderr)
	case errors.As(err, &ee):
		res.exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s %q: %v", name, args, err)
	}
	return res
}

// cliStep is one redis-cli invocation of a session.
type cliStep struct {
	// args are redis-cli's options and command after -h and -p, split on
	// spaces; {tok} stands for the token captured earlier in the session.
	args string
	// stdin is fed to redis-cli; with no command in args it reads commands there.
	stdin string
	// out and stderr are the exact expected output, with {tok} for the
	// captured token and {n} for any decimal number.
	out, stderr string
	exit        int
	// capture makes the first number in stdout the session's {tok}.
	capture bool
}

var firstNumber = regexp.MustCompile(`[0-9]+`)

// outputPattern turns a cliStep expectation into an anchored regexp.
func outputPattern(want, tok string) *regexp.Regexp {
	q := regexp.QuoteMeta(want)
	q = strings.ReplaceAll(q, `\{tok\}`, regexp.QuoteMeta(tok))
	q = strings.ReplaceAll(q, `\{n\}`, `[0-9]+`)
	return regexp.MustCompile(`\A` + q + `\z`)
}

func TestRedisCliSessions(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	if v := runTool(t, "", cli, "--version"); v.exit == 0 {
		t.Logf("using %s", strings.TrimSpace(v.stdout))
	}
	const (
		badToken = "ERR invalid token: must be an unsigned 64-bit integer"
		noProto  = "NOPROTO sorry, this protocol version is not supported"
	)
	sessions := []struct {
		name  string
		steps []cliStep
	}{
		{"lease lifecycle", []cliStep{
			{args: "ACQUIRE k 30000", out: "{n}\n", capture: true},
			{args: "ACQUIRE k 30000", out: "\n"}, // nil: held by someone else
			{args: "VERIFY k {tok}", out: "1\n"},
			{args: "VERIFY k 1", out: "0\n"},
			{args: "EXTEND k {tok} 60000", out: "1\n"},
			{args: "EXTEND k 1 60000", out: "0\n"},
			{args: "STATUS k", out: "state\nheld\ntoken\n{tok}\nowner\n\nttl\n{n}\nlast-token\n{tok}\ndefault-ttl\n0\ncreated\n0\nlock-delay\n0\ndelay-left\n0\nwaiters\n0\nlimit\n0\nmode\nexclusive\nholders-total\n1\nholders\ntoken\n{tok}\nowner\n\nttl\n{n}\n"},
			{args: "LOCKS 0", out: "0\nk\n"},
			{args: "DELETE k", out: "INUSE lock is held \"k\"\n\n"},
			{args: "RELEASE k {tok}", out: "1\n"},
			{args: "RELEASE k {tok}", out: "0\n"},
			{args: "VERIFY k {tok}", out: "0\n"},
			// A lock ACQUIRE made on the fly goes away with its lease.
			{args: "STATUS k", out: "\n"},
			{args: "DELETE k", out: "0\n"},
			{args: "LOCKS 0", out: "0\n\n"}, // an empty array prints an empty line
		}},
		{"created lock with owner", []cliStep{
			{args: "CREATE c TTL 5000", out: "1\n"},
			{args: "CREATE c TTL 5000", out: "0\n"},
			{args: "STATUS c", out: "state\nfree\ntoken\n0\nowner\n\nttl\n0\nlast-token\n0\ndefault-ttl\n5000\ncreated\n1\nlock-delay\n0\ndelay-left\n0\nwaiters\n0\nlimit\n0\nmode\n\nholders-total\n0\nholders\n\n"},
			{args: "ACQUIRE c OWNER alice", out: "{n}\n", capture: true}, // the default ttl
			{args: "STATUS c", out: "state\nheld\ntoken\n{tok}\nowner\nalice\nttl\n{n}\nlast-token\n{tok}\ndefault-ttl\n5000\ncreated\n1\nlock-delay\n0\ndelay-left\n0\nwaiters\n0\nlimit\n0\nmode\nexclusive\nholders-total\n1\nholders\ntoken\n{tok}\nowner\nalice\nttl\n{n}\n"},
			{args: "RELEASE c {tok}", out: "1\n"},
			{args: "STATUS c", out: "state\nfree\ntoken\n0\nowner\n\nttl\n0\nlast-token\n{tok}\ndefault-ttl\n5000\ncreated\n1\nlock-delay\n0\ndelay-left\n0\nwaiters\n0\nlimit\n0\nmode\n\nholders-total\n0\nholders\n\n"},
			{args: "ACQUIRE other 30000", out: "{n}\n"},
			{args: "LOCKS 0 MATCH c* COUNT 100", out: "0\nc\n"},
			{args: "DELETE c", out: "1\n"},
			{args: "STATUS c", out: "\n"},
		}},
		{"semaphore holders", []cliStep{
			{args: "CREATE s LIMIT 3", out: "1\n"},
			{args: "ACQUIRE s 30000 OWNER a", out: "{n}\n", capture: true},
			{args: "ACQUIRE s 30000 OWNER b", out: "{n}\n"},
			{args: "STATUS s", out: "state\nheld\ntoken\n0\nowner\n\nttl\n0\nlast-token\n{n}\ndefault-ttl\n0\ncreated\n1\nlock-delay\n0\ndelay-left\n0\nwaiters\n0\nlimit\n3\nmode\npermits\nholders-total\n2\nholders\ntoken\n{tok}\nowner\na\nttl\n{n}\ntoken\n{n}\nowner\nb\nttl\n{n}\n"},
			// The cursor is the last token a page looked at.
			{args: "HOLDERS s 0 COUNT 1", out: "{tok}\ntoken\n{tok}\nowner\na\nttl\n{n}\n"},
			{args: "HOLDERS s {tok}", out: "0\ntoken\n{n}\nowner\nb\nttl\n{n}\n"},
			{args: "HOLDERS s 0 COUNT 1001", out: "ERR COUNT must be between 1 and 1000\n\n"},
			{args: "--no-raw HOLDERS nope 0", out: "1) \"0\"\n2) (empty array)\n"},
		}},
		{"error replies", []cliStep{
			{args: "ACQUIRE k", out: "ERR no ttl given and the lock has no default ttl\n\n"},
			{args: "ACQUIRE k 0", out: "ERR invalid expire time in 'acquire' command\n\n"},
			{args: "ACQUIRE", out: "ERR wrong number of arguments for 'acquire' command\n\n"},
			{args: "ACQUIRE k 1000 OWNER", out: "ERR syntax error\n\n"},
			{args: "VERIFY k abc", out: badToken + "\n\n"},
			{args: "EXTEND k abc 1000", out: badToken + "\n\n"},
			{args: "LOCKS x", out: "ERR invalid cursor\n\n"},
			{args: "SELECT 1", out: "ERR DB index is out of range\n\n"},
			{args: "FOO bar", out: "ERR unknown command 'FOO', with args beginning with: 'bar' \n\n"},
			{args: "HELLO 3", out: noProto + "\n\n"},
			{args: "PING", out: "PONG\n"},
		}},
		{"no-raw formatting", []cliStep{
			{args: "--no-raw ACQUIRE k 30000", out: "(integer) {n}\n", capture: true},
			{args: "--no-raw ACQUIRE k 30000", out: "(nil)\n"},
			{args: "--no-raw VERIFY k {tok}", out: "(integer) 1\n"},
			{args: "--no-raw LOCKS 0", out: "1) \"0\"\n2) 1) \"k\"\n"},
			{args: "--no-raw LOCKS 0 MATCH zz*", out: "1) \"0\"\n2) (empty array)\n"},
			{args: "--no-raw DELETE k", out: "(error) INUSE lock is held \"k\"\n"},
			{args: "--no-raw VERIFY k abc", out: "(error) " + badToken + "\n"},
			{args: "--no-raw STATUS nope", out: "(nil)\n"},
		}},
		{"-e makes errors fail", []cliStep{
			{args: "-e VERIFY k abc", stderr: badToken + "\n", exit: 1},
			{args: "-e ACQUIRE k 30000", out: "{n}\n"},
		}},
		{"commands from stdin", []cliStep{
			{
				stdin: "ACQUIRE s 30000\nACQUIRE s 30000\nVERIFY s abc\nECHO \"a b\"\nPING\n",
				out:   "{n}\n\n" + badToken + "\n\na b\nPONG\n",
			},
			// redis-cli handles QUIT itself and stops reading.
			{stdin: "PING\nQUIT\nPING\n", out: "PONG\n"},
			// -x: the last argument is read from stdin.
			{args: "-x ECHO", stdin: "from stdin", out: "from stdin\n"},
		}},
		{"pipe mode", []cliStep{
			{
				args:  "--pipe",
				stdin: "*3\r\n$7\r\nACQUIRE\r\n$1\r\np\r\n$5\r\n30000\r\nACQUIRE p 30000\r\nPING\r\n",
				out:   "All data transferred. Waiting for the last reply...\nLast reply received from server.\nerrors: 0, replies: 3\n",
			},
			{
				// Errors are counted, printed to stderr, and fail the run.
				args:   "--pipe",
				stdin:  "VERIFY p x\r\nPING\r\n",
				out:    "All data transferred. Waiting for the last reply...\nLast reply received from server.\nerrors: 1, replies: 2\n",
				stderr: badToken + "\n",
				exit:   1,
			},
			{args: "STATUS p", out: "state\nheld\ntoken\n{n}\nowner\n\nttl\n{n}\nlast-token\n{n}\ndefault-ttl\n0\ncreated\n0\nlock-delay\n0\ndelay-left\n0\nwaiters\n0\nlimit\n0\nmode\nexclusive\nholders-total\n1\nholders\ntoken\n{n}\nowner\n\nttl\n{n}\n"},
		}},
		{"resp3 requested", []cliStep{
			// redis-cli 7.0 -3 sends HELLO 3; on NOPROTO it says so on stderr,
			// carries on in RESP2, and the command succeeds.
			{args: "-3 PING", out: "PONG\n", stderr: "HELLO 3 failed: " + noProto + "\n"},
			{args: "-3 ACQUIRE k 30000", out: "{n}\n", stderr: "HELLO 3 failed: " + noProto + "\n"},
			{args: "-2 PING", out: "PONG\n"},
		}},
		{"help", []cliStep{
			// redis-cli answers HELP itself, from COMMAND DOCS (which the
			// command table fills, as it does the server's HELP); the
			// subcommands reach the server's help.
			{args: "HELP VERIFY", out: "\r\n  \x1b[1mVERIFY\x1b[0m \x1b[90mkey token\x1b[0m\r\n  \x1b[33msummary:\x1b[0m Returns 1 when the token is a live lease of the lock, else 0.\r\n  \x1b[33msince:\x1b[0m 0.1.0\r\n  \x1b[33mgroup:\x1b[0m lock\r\n\r\n"},
			{args: "CONFIG HELP", out: "CONFIG GET parameter [parameter ...]\n    Reads settings; answers what redis-benchmark asks.\n"},
			{args: "--no-raw CLIENT HELP", out: "1) CLIENT <ID | GETNAME | SETNAME name | SETINFO attr value | INFO | UNBLOCK client-id [TIMEOUT | ERROR]>\n2)     Connection identity, as clients set it on connect; UNBLOCK ends another\n3)     connection's WAIT.\n"},
			{args: "CLIENT HELP x", out: "ERR wrong number of arguments for 'client|help' command\n\n"},
		}},
		{"repeat", []cliStep{
			{args: "-r 3 PING", out: "PONG\nPONG\nPONG\n"},
		}},
	}
	for _, sess := range sessions {
		t.Run(sess.name, func(t *testing.T) {
			t.Parallel()
			ts := startServer(t)
			host, port := ts.hostPort()
			tok := ""
			for i, st := range sess.steps {
				args := []string{"-h", host, "-p", port}
				for _, a := range strings.Fields(st.args) {
					args = append(args, strings.ReplaceAll(a, "{tok}", tok))
				}
				res := runTool(t, st.stdin, cli, args...)
				if !outputPattern(st.out, tok).MatchString(res.stdout) ||
					!outputPattern(st.stderr, tok).MatchString(res.stderr) || res.exit != st.exit {
					t.Fatalf("step %d: redis-cli %s (stdin %q)\n got stdout %q stderr %q exit %d\nwant stdout %q stderr %q exit %d ({tok}=%s)",
						i, st.args, st.stdin, res.stdout, res.stderr, res.exit, st.out, st.stderr, st.exit, tok)
				}
				if st.capture {
					tok = firstNumber.FindString(res.stdout)
				}
			}
		})
	}
}

// ptyHelper runs argv[1:] on a pseudo-terminal of 40x120 (set before exec,
// so linenoise never has to ask the terminal for its width), copies its own
// stdin to the terminal and the terminal's output to its stdout, and exits
// with the child's status.
const ptyHelper = `
import fcntl, os, pty, select, struct, sys, termios
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    os.execv(sys.argv[1], sys.argv[1:])
inputs = [0, fd]
while True:
    ready = select.select(inputs, [], [])[0]
    if fd in ready:
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            break
        os.write(1, data)
    if 0 in ready:
        data = os.read(0, 4096)
        if data:
            while data:
                data = data[os.write(fd, data):]
        else:
            inputs.remove(0)
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
`

// ttyOutput collects what a terminal shows and wakes waiters on each write.
type ttyOutput struct {
	mu      sync.Mutex
	buf     []byte
	changed chan struct{} // closed and replaced by every Write
}

func newTTYOutput() *ttyOutput { return &ttyOutput{changed: make(chan struct{})} }

func (o *ttyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, p...)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

func (o *ttyOutput) snapshot() ([]byte, chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Clone(o.buf), o.changed
}

// waitFor waits until the output from offset from on contains sep, and
// returns that output up to sep and the offset just past it.
func (o *ttyOutput) waitFor(t *testing.T, ctx context.Context, from int, sep string) (string, int) {
	t.Helper()
	for {
		buf, changed := o.snapshot()
		if i := bytes.Index(buf[from:], []byte(sep)); i >= 0 {
			return string(buf[from : from+i]), from + i + len(sep)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %q: %v; the terminal shows:\n%q", sep, ctx.Err(), buf)
		}
	}
}

// TestRedisCliInteractive types at redis-cli in a pseudo-terminal, where it
// loads COMMAND DOCS at startup for hints and help and formats replies for
// humans. Each line is typed only after the prompt for it has appeared:
// linenoise flushes pending input when it switches the terminal mode.
func TestRedisCliInteractive(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 not found: the interactive redis-cli test runs it on a pty through python3's pty module")
	}
	ts := startServer(t)
	host, port := ts.hostPort()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", ptyHelper, cli, "-h", host, "-p", port)
	cmd.WaitDelay = 2 * time.Second
	cmd.Env = append(os.Environ(), "TERM=xterm", "HOME="+t.TempDir(),
		"REDISCLI_HISTFILE=/dev/null", "REDISCLI_RCFILE=/dev/null")
	out := newTTYOutput()
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cancel()
		<-exited
	}()

	prompt := ts.addr + "> "
	_, pos := out.waitFor(t, ctx, 0, prompt)
	// typeLine types a line and returns what redis-cli printed for it, once
	// the next prompt is up.
	typeLine := func(line string) string {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\r"); err != nil {
			t.Fatalf("typing %q: %v", line, err)
		}
		var shown string
		shown, pos = out.waitFor(t, ctx, pos, "\n"+prompt)
		return shown
	}
	integer := regexp.MustCompile(`\r\n\(integer\) ([0-9]+)\r$`)

	shown := typeLine("ACQUIRE k 1000")
	m := integer.FindStringSubmatch(shown)
	if m == nil {
		t.Fatalf("ACQUIRE k 1000 showed %q, want (integer) TOKEN", shown)
	}
	if tok, err := strconv.ParseUint(m[1], 10, 64); err != nil || tok == 0 {
		t.Fatalf("ACQUIRE k 1000 token %q: %v", m[1], err)
	}

	if shown := typeLine("ACQUIRE held 30000"); !integer.MatchString(shown) {
		t.Fatalf("ACQUIRE held 30000 showed %q, want (integer) TOKEN", shown)
	}
	if shown := typeLine("ACQUIRE held 30000"); !strings.HasSuffix(shown, "\r\n(nil)\r") {
		t.Fatalf("second ACQUIRE showed %q, want (nil)", shown)
	}
	if shown := typeLine("VERIFY held abc"); !strings.HasSuffix(shown, "\r\n(error) ERR invalid token: must be an unsigned 64-bit integer\r") {
		t.Fatalf("VERIFY held abc showed %q, want (error) ERR invalid token...", shown)
	}
	if shown := typeLine("DELETE held"); !strings.HasSuffix(shown, "\r\n(error) INUSE lock is held \"held\"\r") {
		t.Fatalf("DELETE held showed %q, want (error) INUSE ...", shown)
	}
	// help is answered from the COMMAND DOCS redis-cli fetched at startup.
	summary := protocol.Lookup([]byte("acquire")).Summary
	if shown := typeLine("help ACQUIRE"); !strings.Contains(shown, "ACQUIRE") || !strings.Contains(shown, summary) {
		t.Fatalf("help ACQUIRE showed %q, want the summary %q", shown, summary)
	}
	if shown := typeLine("help @lock"); !strings.Contains(shown, "VERIFY") || !strings.Contains(shown, "LOCKS") {
		t.Fatalf("help @lock showed %q, want every lock command", shown)
	}

	if _, err := io.WriteString(stdin, "quit\r"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the deferred wait
		if err != nil {
			buf, _ := out.snapshot()
			t.Fatalf("redis-cli exited with %v; the terminal shows:\n%q", err, buf)
		}
	case <-ctx.Done():
		buf, _ := out.snapshot()
		t.Fatalf("redis-cli did not exit after quit; the terminal shows:\n%q", buf)
	}
	if n, err := ts.client().Do(ctx, "VERIFY", "held", "1").Int(); err != nil || n != 0 {
		t.Fatalf("server after the session: VERIFY = %d, %v", n, err)
	}
}

func TestRedisBenchmark(t *testing.T) {
	bench := redisTool(t, "redis-benchmark")
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, ts *testServer)
	}{
		{"ping", []string{"-t", "ping"}, nil},
		{"acquire", []string{"-r", "1000", "ACQUIRE", "lock:__rand_int__", "30000"}, func(t *testing.T, ts *testServer) {
			// 2000 ACQUIREs over at most 1000 keys with a 30s ttl: each key is
			// granted once, and every other ACQUIRE of it answered nil.
			st := ts.Table().Stats()
			if st.Granted == 0 || st.Granted > 1000 || uint64(st.Locks) != st.Granted || uint64(st.Held) != st.Granted {
				t.Errorf("after the benchmark: %+v, want 1..1000 granted, each lock held", st)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t)
			host, port := ts.hostPort()
			args := append([]string{"-h", host, "-p", port, "-n", "2000", "-c", "10", "-q"}, tc.args...)
			res := runTool(t, "", bench, args...)
			// redis-benchmark redraws its progress line with \r.
			all := strings.ReplaceAll(res.stdout+"\n"+res.stderr, "\r", "\n")
			if res.exit != 0 || !strings.Contains(all, "requests per second") {
				t.Fatalf("redis-benchmark %q: exit %d\nstdout: %q\nstderr: %q", args, res.exit, res.stdout, res.stderr)
			}
			for _, line := range strings.Split(all, "\n") {
				// An error reply makes redis-benchmark print "Error from
				// server: ERR ..."; a failed CONFIG GET at start prints
				// "WARNING: Could not fetch server CONFIG".
				if strings.Contains(line, "ERR") || strings.Contains(line, "Error") || strings.Contains(line, "WARNING") {
					t.Errorf("redis-benchmark printed %q", line)
				}
			}
			if tc.check != nil {
				tc.check(t, ts)
			}
		})
	}
}
