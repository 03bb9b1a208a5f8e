//go:build unix

package command

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/internal/testutil"
)

func TestRunShellCommand(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	env := []string{"LEASEHOLD_ADDR=" + addr}
	out, errOut, exit := run(t, env, "run", "-c", `echo "$LEASEHOLD_KEY" | tr a-z A-Z; exit 5`, "jobs")
	if exit != 5 || strings.TrimSpace(out) != "JOBS" {
		t.Fatalf("run -c: exit %d, stdout %q, stderr %q; want 5 and JOBS", exit, out, errOut)
	}
	if out, _, exit := run(t, env, "run", "--command", "echo long form", "jobs"); exit != 0 || out != "long form\n" {
		t.Errorf("run --command: exit %d, stdout %q", exit, out)
	}
	for _, args := range [][]string{
		{"run", "-c", "true", "jobs", "extra"},
		{"run", "-c", "true", "jobs", "--", "true"},
		{"run", "-c", "true"},
		{"run", "-c", "", "jobs"},
	} {
		if _, errOut, exit := run(t, env, args...); exit != exitFailure || !strings.Contains(errOut, "-c") {
			t.Errorf("leasehold %q: exit %d, stderr %q; want 2", args, exit, errOut)
		}
	}
}

func TestRunConflictExitCode(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	if err := rdb.Do(testCtx(t), "ACQUIRE", "k", 30000).Err(); err != nil {
		t.Fatal(err)
	}
	env := []string{"LEASEHOLD_ADDR=" + addr}
	cases := []struct {
		args []string
		exit int
	}{
		{[]string{"run", "--conflict-exit-code", "9", "k", "true"}, 9},
		{[]string{"run", "-E", "0", "--wait", "100ms", "k", "true"}, 0},
		{[]string{"run", "k", "true"}, exitNo},
		// A command that runs keeps its own status.
		{[]string{"run", "-E", "9", "free", "--", "sh", "-c", "exit 3"}, 3},
		{[]string{"run", "-E", "256", "k", "true"}, exitFailure},
		{[]string{"run", "-E", "-1", "k", "true"}, exitFailure},
	}
	for _, tc := range cases {
		if _, errOut, exit := run(t, env, tc.args...); exit != tc.exit {
			t.Errorf("leasehold %q: exit %d, want %d\nstderr: %s", tc.args, exit, tc.exit, errOut)
		}
	}
}

func TestRunLimit(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	env := []string{"LEASEHOLD_ADDR=" + addr}
	// The first run makes the semaphore.
	if _, errOut, exit := run(t, env, "run", "--limit", "2", "builders", "true"); exit != 0 {
		t.Fatalf("run --limit 2: exit %d\n%s", exit, errOut)
	}
	if st := lockStatus(t, rdb, "builders"); st["limit"] != "2" || st["created"] != "1" {
		t.Fatalf("STATUS after run --limit 2: %v", st)
	}
	// One permit taken: run gets the other.
	if err := rdb.Do(testCtx(t), "ACQUIRE", "builders", 30000).Err(); err != nil {
		t.Fatal(err)
	}
	out, errOut, exit := run(t, env, "run", "--limit", "2", "builders", "--", "sh", "-c", "echo ok")
	if exit != 0 || out != "ok\n" {
		t.Fatalf("run --limit 2 with a permit free: exit %d, stdout %q\n%s", exit, out, errOut)
	}
	// Both taken: not granted.
	if err := rdb.Do(testCtx(t), "ACQUIRE", "builders", 30000).Err(); err != nil {
		t.Fatal(err)
	}
	if _, errOut, exit := run(t, env, "run", "--limit", "2", "-E", "7", "builders", "true"); exit != 7 || !strings.Contains(errOut, "not acquired") {
		t.Errorf("run --limit 2 with no permit free: exit %d, stderr %q; want 7", exit, errOut)
	}

	if err := rdb.Do(testCtx(t), "CREATE", "plain").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(testCtx(t), "ACQUIRE", "fly", 30000).Err(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--limit", "3", "builders", "true"}, `semaphore "builders" exists with 2 permits`},
		{[]string{"run", "--limit", "2", "plain", "true"}, `lock "plain" exists as a lock, not a semaphore`},
		{[]string{"run", "--limit", "2", "fly", "true"}, `lock "fly" is held as a lock`},
		{[]string{"run", "--limit", "2", "--shared", "x", "true"}, "--shared"},
		{[]string{"run", "--limit", "0", "x", "true"}, "--limit"},
		{[]string{"run", "--limit", "70000", "x", "true"}, "LIMIT"},
	}
	for _, tc := range cases {
		if _, errOut, exit := run(t, env, tc.args...); exit != exitFailure || !strings.Contains(errOut, tc.want) {
			t.Errorf("leasehold %q: exit %d, stderr %q; want 2 and %q", tc.args, exit, errOut, tc.want)
		}
	}
}

// TestSemaphoreNeedsLimit checks that run and acquire without --limit do not
// take a permit of a semaphore as if it were the lock: one permit keeps
// nobody else out, so the command would run beside others that believe
// they hold KEY alone (as consul lock refuses a lock on a semaphore's key).
// With --limit they take a permit, acquire as run does.
func TestSemaphoreNeedsLimit(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	env := []string{"LEASEHOLD_ADDR=" + addr}
	if err := rdb.Do(testCtx(t), "CREATE", "sem", "LIMIT", 2).Err(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	for _, args := range [][]string{
		{"run", "sem", "--", "touch", marker},
		{"acquire", "sem"},
	} {
		out, errOut, exit := run(t, env, args...)
		if exit != exitFailure || out != "" || !strings.Contains(errOut, "--limit 2") {
			t.Errorf("leasehold %q on a semaphore: exit %d, stdout %q, stderr %q; want 2, nothing, and --limit 2 named", args, exit, out, errOut)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("run without --limit ran its command on a semaphore's permit")
	}
	if st := lockStatus(t, rdb, "sem"); st["state"] != "free" {
		t.Errorf("the refused permits are still held: %v", st)
	}
	out, errOut, exit := run(t, env, "acquire", "sem", "--limit", "2")
	if exit != 0 || strings.Trim(out, "0123456789\n") != "" {
		t.Fatalf("acquire --limit 2: exit %d, stdout %q, stderr %q", exit, out, errOut)
	}
	if _, errOut, exit := run(t, env, "acquire", "--limit", "2", "made-by-acquire"); exit != 0 {
		t.Fatalf("acquire --limit 2 of a new semaphore: exit %d, stderr %q", exit, errOut)
	}
	if st := lockStatus(t, rdb, "made-by-acquire"); st["limit"] != "2" {
		t.Errorf("acquire --limit 2 made %v", st)
	}
}

// TestRunOnLost: a lease released behind run's back is lost at the next
// renewal; the command is stopped and the --on-lost command runs, with the
// lease's variables, before run exits 75.
func TestRunOnLost(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	dir := t.TempDir()
	p := start(t, []string{"LEASEHOLD_ADDR=" + addr, "DIR=" + dir},
		"run", "--ttl", "600ms",
		"--on-lost", `sleep 0.2; echo "$LEASEHOLD_KEY $LEASEHOLD_TOKEN $LEASEHOLD_ADDR"; echo "$LEASEHOLD_TOKEN" > "$DIR/lost"`,
		"k", "--", "sh", "-c", `echo "$LEASEHOLD_TOKEN" > "$DIR/token"; `+childScript(t, dir, ""))
	testutil.Eventually(t, commandTimeout, "command started", func() bool { return exists(filepath.Join(dir, "started")) })
	b, _ := os.ReadFile(filepath.Join(dir, "token"))
	token := strings.TrimSpace(string(b))
	if n, err := rdb.Do(testCtx(t), "RELEASE", "k", token).Int(); err != nil || n != 1 {
		t.Fatalf("RELEASE k %s: %d, %v", token, n, err)
	}
	select {
	case <-p.done:
	case <-time.After(commandTimeout):
		t.Fatalf("run did not exit after the loss\nstderr: %s", p.stderr)
	}
	var ee interface{ ExitCode() int }
	if !errors.As(p.err, &ee) || ee.ExitCode() != exitLost {
		t.Fatalf("run: %v, want exit %d\nstderr: %s", p.err, exitLost, p.stderr)
	}
	// run waited for the hook (it sleeps before writing).
	b, err := os.ReadFile(filepath.Join(dir, "lost"))
	if err != nil || strings.TrimSpace(string(b)) != token {
		t.Fatalf("--on-lost wrote %q, %v; want the token %s", b, err, token)
	}
	// Its output goes to stderr: stdout is the command's.
	if want := "k " + token + " " + addr; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr lacks the hook's %q:\n%s", want, p.stderr)
	}
	if exists(filepath.Join(dir, "timeout")) {
		t.Error("the command ran to its end")
	}
}

// TestRunWaitForever: with the server's longest WAIT at 1s, run --wait
// forever waits through many of them, keeping its place (no wait runs out
// on the server), runs the command once the lock is free, and ends its
// wait on SIGINT.
func TestRunWaitForever(t *testing.T) {
	t.Parallel()
	_, addr := serveBinary(t, serveArgs("--max-ttl", "1s"))
	rdb := client(t, addr)
	cfg := leasehold.DefaultConfig()
	cfg.Redis.Addr = addr
	cl, err := leasehold.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	held, err := cl.Acquire(ctx, "k", 900*time.Millisecond) // renewed by the client
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	env := []string{"LEASEHOLD_ADDR=" + addr, "DIR=" + dir}
	p := start(t, env, "run", "--ttl", "900ms", "--wait", "forever", "k", "--", "sh", "-c", `echo "$LEASEHOLD_TOKEN" > "$DIR/token"`)
	testutil.Eventually(t, commandTimeout, "run queued for the lock", func() bool { return lockStatus(t, rdb, "k")["waiters"] == "1" })
	interrupted := start(t, env, "acquire", "--ttl", "900ms", "--wait", "forever", "k")
	testutil.Eventually(t, commandTimeout, "acquire queued for the lock", func() bool { return lockStatus(t, rdb, "k")["waiters"] == "2" })
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if w := lockStatus(t, rdb, "k")["waiters"]; w != "2" {
			t.Fatalf("%s waiters, want the two", w)
		}
	}
	select {
	case <-p.done:
		t.Fatalf("run ended while the lock was held: %v\nstderr: %s", p.err, p.stderr)
	default:
	}
	info, err := rdb.Info(ctx, "locks").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "wait_timeouts:0\r\n") {
		t.Errorf("a wait ran out on the server:\n%s", info)
	}
	if exit := interrupted.stop(syscall.SIGINT); exit != 128+2 {
		t.Errorf("acquire --wait forever after SIGINT: exit %d, want 130\nstderr: %s", exit, interrupted.stderr)
	}

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(commandTimeout):
		t.Fatal("run did not finish after the lock was released")
	}
	if p.err != nil {
		t.Fatalf("run: %v\nstderr: %s", p.err, p.stderr)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "token"))
	if tok, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil || tok <= held.Token() {
		t.Errorf("command saw token %q, want one above %d", b, held.Token())
	}
	if w := lockStatus(t, rdb, "k")["waiters"]; w != "" && w != "0" {
		t.Errorf("%s waiters left", w)
	}

	if _, errOut, exit := run(t, env, "run", "--wait", "forevermore", "k", "true"); exit != exitFailure || !strings.Contains(errOut, "forever") {
		t.Errorf("run --wait forevermore: exit %d, stderr %q", exit, errOut)
	}
}

// TestRunCommandGetsDefaultSignals checks that what leasehold ignores for
// itself while its command runs (SIGPIPE, the terminal's stop signals) is
// not ignored in the command: an ignored signal survives exec, and `yes |
// head -1` under it ends with "yes: standard output: Broken pipe" instead
// of quietly, as it does in a shell.
func TestRunCommandGetsDefaultSignals(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	env := []string{"LEASEHOLD_ADDR=" + addr}
	out, errOut, exit := run(t, env, "run", "pipe", "--", "sh", "-c", "yes | head -1")
	if exit != 0 || out != "y\n" || errOut != "" {
		t.Errorf("run -- sh -c 'yes | head -1': exit %d, stdout %q, stderr %q; want 0, \"y\\n\" and nothing", exit, out, errOut)
	}
	// On Linux, the dispositions themselves: the command ignores what this
	// test ignores (what its own parent, say a shell running it in the
	// background, set), nothing more.
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	var want string
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "SigIgn:") {
			want = l
		}
	}
	out, errOut, exit = run(t, env, "run", "-c", "grep '^SigIgn:' /proc/self/status", "pipe")
	if exit != 0 || strings.TrimSpace(out) != want {
		t.Errorf("the command's ignored signals: exit %d, stdout %q, stderr %q; want %q", exit, out, errOut, want)
	}
}

// TestRunIsNotStoppedBySignals checks that leasehold keeps watching its
// command through SIGTSTP (Ctrl-Z), SIGTTIN, SIGTTOU and SIGPIPE: stopped or
// killed, it would leave the command running with nobody renewing its lease.
func TestRunIsNotStoppedBySignals(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	p := start(t, []string{"LEASEHOLD_ADDR=" + addr}, "run", "sig", "--", "sh", "-c",
		`while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", release)
	testutil.Eventually(t, commandTimeout, "the lock to be held", func() bool { return lockStatus(t, rdb, "sig")["state"] == "held" })
	for _, sig := range []syscall.Signal{syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE} {
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(commandTimeout):
		t.Fatalf("leasehold run did not exit after its command did (stopped by a signal?)\nstderr: %s", p.stderr)
	}
	if p.err != nil {
		t.Fatalf("leasehold run: %v\nstderr: %s", p.err, p.stderr)
	}
}
