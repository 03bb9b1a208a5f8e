//go:build unix

package doctest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
)

// runTimeout bounds one run of one example.
const runTimeout = 60 * time.Second

// shellLangs are the info strings of fenced blocks that hold shell.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "zsh": true, "console": true, "shell-session": true}

// example is a fenced block of shell in a markdown file, with its marker.
type example struct {
	file   string // from the repository's root
	line   int    // of the opening fence
	skip   string // why it is not run; "" for a runnable one
	guards []string
	text   string
}

func (e example) String() string { return fmt.Sprintf("%s:%d", e.file, e.line) }

var (
	markerRE = regexp.MustCompile(`^<!--\s*doctest:\s*(.*?)\s*-->$`)
	fenceRE  = regexp.MustCompile("^ {0,3}(```+|~~~+)\\s*([^\\s`]*)")
	// The server's address as the examples write it, and what else of
	// locks.internal may be left once those are replaced.
	cliAddrRE = regexp.MustCompile(`-h locks\.internal -p 7379\b`)
	addrRE    = regexp.MustCompile(`\blocks\.internal:7379\b`)
	strayRE   = regexp.MustCompile(`\blocks\.internal\b`)
)

// parse returns the shell blocks of one markdown file with their markers,
// and what is wrong: a shell block without a marker, a marker that is not
// right before one or that does not parse, a guard the block never names.
func parse(file, md string) ([]example, []string) {
	var (
		out      []example
		problems []string
		lines    = strings.Split(md, "\n")
		prev     string // the last non-blank line outside a fence
		prevLine int
	)
	bad := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: ", file, line)+fmt.Sprintf(format, args...))
	}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\r")
		m := fenceRE.FindStringSubmatch(line)
		if m == nil {
			if markerRE.MatchString(strings.TrimSpace(prev)) && strings.TrimSpace(line) != "" {
				bad(prevLine, "a doctest marker must be right before a shell block")
			}
			if strings.TrimSpace(line) != "" {
				prev, prevLine = line, i+1
			}
			continue
		}
		fence, lang, start := m[1], strings.ToLower(m[2]), i+1
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			l := strings.TrimRight(lines[i], "\r")
			if t := strings.TrimLeft(l, " "); strings.HasPrefix(t, fence[:1]) && strings.Trim(t, fence[:1]+" ") == "" && len(strings.TrimRight(t, " ")) >= len(fence) {
				closed = true
				break
			}
			body = append(body, l)
		}
		if !closed {
			bad(start, "a fenced block that never closes")
		}
		marker := markerRE.FindStringSubmatch(strings.TrimSpace(prev))
		prev, prevLine = "", 0
		if !shellLangs[lang] {
			if marker != nil {
				bad(start, "a doctest marker before a %q block, not shell", lang)
			}
			continue
		}
		e := example{file: file, line: start, text: strings.Join(body, "\n") + "\n"}
		if marker == nil {
			bad(start, "a ```%s block without a marker on the line before it: <!-- doctest: guards CMD... --> or <!-- doctest: skip REASON -->", lang)
			continue
		}
		verb, rest, _ := strings.Cut(marker[1], " ")
		rest = strings.TrimSpace(rest)
		switch verb {
		case "skip":
			if rest == "" {
				bad(start, "doctest: skip needs a reason")
				continue
			}
			e.skip = rest
		case "guards":
			e.guards = strings.Fields(rest)
			if len(e.guards) == 0 {
				bad(start, "doctest: guards needs the commands that must not run without the lock")
				continue
			}
			for _, g := range e.guards {
				if !regexp.MustCompile(`(^|[\s;&|('"])` + regexp.QuoteMeta(g) + `($|[\s;&|)'"])`).MatchString(e.text) {
					bad(start, "the guard %q is not run by the block", g)
				}
			}
			if strayRE.MatchString(addrRE.ReplaceAllString(cliAddrRE.ReplaceAllString(e.text, ""), "")) {
				bad(start, "name the server as locks.internal:7379 or -h locks.internal -p 7379, which the test replaces")
			}
		default:
			bad(start, "doctest: %q is neither guards nor skip", verb)
			continue
		}
		out = append(out, e)
	}
	if markerRE.MatchString(strings.TrimSpace(prev)) {
		bad(prevLine, "a doctest marker must be right before a shell block")
	}
	return out, problems
}

// repoRoot is the module's root (go test runs in internal/doctest).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return root
}

// docExamples parses every markdown file of the repository.
func docExamples(t *testing.T, root string) ([]example, []string) {
	t.Helper()
	var all []example
	var problems []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bench-results") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		ex, pr := parse(filepath.ToSlash(rel), string(b))
		all = append(all, ex...)
		problems = append(problems, pr...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all, problems
}

func TestParse(t *testing.T) {
	const sh = "```sh\n./job\n```\n"
	for _, c := range []struct {
		name, md string
		runs     int    // runnable examples found
		problem  string // in the only problem; "" for none
	}{
		{"guards", "<!-- doctest: guards ./job -->\n" + sh, 1, ""},
		{"blank line between", "<!-- doctest: guards ./job -->\n\n" + sh, 1, ""},
		{"skip", "<!-- doctest: skip a reason -->\n" + sh, 0, ""},
		{"not shell", "```text\n$ redis-cli\n```\n```go\nx := 1\n```\n", 0, ""},
		{"unmarked", sh, 0, "without a marker"},
		{"unmarked bash", "text\n```bash\nls\n```\n", 0, "without a marker"},
		{"marker after text", "<!-- doctest: guards ./job -->\ntext\n", 0, "right before a shell block"},
		{"marker at the end", "text\n<!-- doctest: skip x -->\n", 0, "right before a shell block"},
		{"skip without reason", "<!-- doctest: skip -->\n" + sh, 0, "needs a reason"},
		{"guards without commands", "<!-- doctest: guards -->\n" + sh, 0, "needs the commands"},
		{"unknown verb", "<!-- doctest: run ./job -->\n" + sh, 0, "neither guards nor skip"},
		{"guard not in the block", "<!-- doctest: guards ./other -->\n" + sh, 1, `the guard "./other" is not run`},
		{"guard only as a prefix", "<!-- doctest: guards ./jo -->\n" + sh, 1, `the guard "./jo" is not run`},
		{"other server name", "<!-- doctest: guards ./job -->\n```sh\nredis-cli -h locks.internal ACQUIRE k 1 && ./job\n```\n", 1, "name the server as"},
		{"marker before text block", "<!-- doctest: skip x -->\n```text\nx\n```\n", 0, "not shell"},
		{"unclosed", "<!-- doctest: guards ./job -->\n```sh\n./job\n", 1, "never closes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex, problems := parse("x.md", c.md)
			runs := 0
			for _, e := range ex {
				if e.skip == "" {
					runs++
				}
			}
			if runs != c.runs {
				t.Errorf("%d runnable examples, want %d: %+v", runs, c.runs, ex)
			}
			switch {
			case c.problem == "" && len(problems) > 0:
				t.Errorf("problems: %q", problems)
			case c.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0], c.problem)):
				t.Errorf("problems %q, want one with %q", problems, c.problem)
			}
		})
	}
}

// TestDocShellBlocksMarked: every shell block of the docs says whether it
// is run, and what it guards.
func TestDocShellBlocksMarked(t *testing.T) {
	ex, problems := docExamples(t, repoRoot(t))
	for _, p := range problems {
		t.Error(p)
	}
	runnable := 0
	for _, e := range ex {
		if e.skip == "" {
			runnable++
		}
	}
	if runnable == 0 {
		t.Error("no runnable shell example in the docs: the parser or the markers are wrong")
	}
}

// errorServer answers every command, whatever it is, with an error reply.
type errorServer struct {
	ln       net.Listener
	commands atomic.Int64
	mu       sync.Mutex // guards conns
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
}

// errorReply is what errorServer answers: an error as a client that does
// not check the reply's shape would take for a token.
const errorReply = "-ERR invalid expire time in 'acquire' command\r\n"

func startErrorServer(t *testing.T) *errorServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &errorServer{ln: ln, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *errorServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.conns == nil { // closed
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *errorServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		if err := skipCommand(r); err != nil {
			return
		}
		s.commands.Add(1)
		if _, err := io.WriteString(c, errorReply); err != nil {
			return
		}
	}
}

func (s *errorServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
}

// skipCommand reads one command, a RESP array of bulk strings or an inline
// line.
func skipCommand(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "*") {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return err
	}
	for range n {
		h, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(h, "$")))
		if err != nil || size < 0 || size > 1<<20 {
			return fmt.Errorf("bad bulk header %q", h)
		}
		if _, err := r.Discard(size + 2); err != nil {
			return err
		}
	}
	return nil
}

// startServer starts a real server on a loopback port, configured by adjust.
func startServer(t *testing.T, adjust func(*server.Config)) string {
	t.Helper()
	return lockserver.Start(t, adjust).Addr
}

// scenario is a server for an example to run against. answered, when set,
// counts the commands the server answered.
type scenario struct {
	name  string
	start func(t *testing.T) (addr string, answered func() int64)
}

func realServer(adjust func(*server.Config)) func(t *testing.T) (string, func() int64) {
	return func(t *testing.T) (string, func() int64) { return startServer(t, adjust), nil }
}

// failing are servers on which no example may run its guarded command.
var failing = []scenario{
	{"every reply an error", func(t *testing.T) (string, func() int64) {
		s := startErrorServer(t)
		return s.ln.Addr().String(), s.commands.Load
	}},
	{"NOLOCK under --require-create", realServer(func(c *server.Config) { c.Locker.RequireCreate = true })},
	{"ttl over --max-ttl 1s", realServer(func(c *server.Config) { c.Locker.MaxTTL = time.Second })},
	{"key over --max-key-len 1", realServer(func(c *server.Config) { c.Locker.MaxKeyLen = 1 })},
	{"no server", func(t *testing.T) (string, func() int64) { return refusingAddr(t), nil }},
}

// need finds a program the examples use; without it the test is skipped,
// or fails under CI=true, where `make test` has installed it.
func need(t *testing.T, name, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		testutil.MissingTool(t, "%s not found (%s)", name, pkg)
	}
}

// outcome is how one run of an example went.
type outcome struct {
	exit   int      // -1: timed out
	ran    []string // the guards that ran, in order
	output string   // stdout and stderr
}

// runExample runs e's text under bash with the server at addr: in a
// directory of its own with scripts/ in it, with binDir (the leasehold
// binary) on PATH, and its guards replaced by commands that record that they
// ran.
func runExample(t *testing.T, root, binDir string, e example, addr string) outcome {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	text := cliAddrRE.ReplaceAllString(e.text, "-h "+host+" -p "+port)
	text = addrRE.ReplaceAllString(text, addr)

	dir := t.TempDir()
	work, guards, ranFile := filepath.Join(dir, "work"), filepath.Join(dir, "guards"), filepath.Join(dir, "ran")
	for _, d := range []string{work, guards} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "scripts"), filepath.Join(work, "scripts")); err != nil {
		t.Fatal(err)
	}
	for _, g := range e.guards {
		path := filepath.Join(guards, g)
		if name, ok := strings.CutPrefix(g, "./"); ok {
			path = filepath.Join(work, name)
		}
		shim := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' %q >>\"$DOCTEST_RAN\"\n", g)
		if err := os.WriteFile(path, []byte(shim), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "example.sh")
	if err := os.WriteFile(script, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = work
	cmd.Env = testutil.Environ("LEASEHOLD_ADDR="+addr, "DOCTEST_RAN="+ranFile,
		"PATH="+guards+string(os.PathListSeparator)+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything left behind
	}
	o := outcome{output: out.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		o.exit = -1
	case errors.As(err, &ee):
		o.exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", e, err)
	}
	if b, err := os.ReadFile(ranFile); err == nil {
		o.ran = strings.Fields(string(b))
	}
	return o
}

// TestDocShellExamples runs every runnable shell example of the docs against
// servers that answer errors (and against no server): the guarded commands
// never run. Against a working server, each of them runs.
func TestDocShellExamples(t *testing.T) {
	need(t, "bash", "bash")
	need(t, "redis-cli", "redis-tools")
	root := repoRoot(t)
	examples, _ := docExamples(t, root) // TestDocShellBlocksMarked reports the problems
	binDir := testutil.BuildLeasehold(t)
	for _, e := range examples {
		if e.skip != "" {
			continue
		}
		t.Run(strings.ReplaceAll(e.String(), "/", "_"), func(t *testing.T) {
			t.Parallel()
			for _, sc := range failing {
				t.Run(sc.name, func(t *testing.T) {
					addr, answered := sc.start(t)
					o := runExample(t, root, binDir, e, addr)
					if o.exit == -1 {
						t.Fatalf("%s did not end within %s against %s:\n%s", e, runTimeout, sc.name, o.output)
					}
					if len(o.ran) > 0 {
						t.Errorf("%s ran %q without the lock (%s); exit %d:\n%s", e, o.ran, sc.name, o.exit, o.output)
					}
					if answered != nil && answered() == 0 {
						t.Errorf("%s never reached the server: name it as locks.internal:7379 or use LEASEHOLD_ADDR\n%s", e, o.output)
					}
				})
			}
			t.Run("working server", func(t *testing.T) {
				addr := startServer(t, func(*server.Config) {})
				o := runExample(t, root, binDir, e, addr)
				for _, g := range e.guards {
					if !slices.Contains(o.ran, g) {
						t.Errorf("%s did not run %s with a working server (ran %q); exit %d:\n%s", e, g, o.ran, o.exit, o.output)
					}
				}
			})
		})
	}
}

// TestUncheckedReplyRunsTheJob shows that the check above can fail: the
// README's example as it was, which took any non-empty reply for a token,
// runs its job on an error reply.
func TestUncheckedReplyRunsTheJob(t *testing.T) {
	need(t, "bash", "bash")
	need(t, "redis-cli", "redis-tools")
	unchecked := example{file: "old README.md", line: 1, guards: []string{"./make-report"}, text: `
set -euo pipefail
LH="redis-cli -h locks.internal -p 7379"
token=$($LH ACQUIRE reports:nightly 600000 OWNER "$(hostname)")
if [ -z "$token" ]; then
    echo "another host is running the report" >&2
    exit 1
fi
trap '$LH RELEASE reports:nightly "$token" >/dev/null' EXIT
LEASEHOLD_TOKEN=$token ./make-report
`}
	s := startErrorServer(t)
	o := runExample(t, repoRoot(t), t.TempDir(), unchecked, s.ln.Addr().String())
	if !slices.Equal(o.ran, []string{"./make-report"}) {
		t.Fatalf("the unchecked example did not run its job on an error reply: ran %q, exit %d:\n%s", o.ran, o.exit, o.output)
	}
	if s.commands.Load() < 2 {
		t.Errorf("want ACQUIRE and RELEASE sent, got %d commands", s.commands.Load())
	}
}

// refusingAddr is a loopback address that refuses connections until the
// test ends: a socket bound to it that does not listen. A port merely
// closed again could be taken meanwhile by a server of a test running in
// parallel, and an example's retry would then reach it, and take its lock.
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
