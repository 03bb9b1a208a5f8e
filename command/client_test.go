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

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// startServe starts `leasehold serve` on a free port and returns it and its
// address.
func startServe(t *testing.T) (*process, string) {
	t.Helper()
	return serveBinary(t, serveArgs())
}

// testCtx bounds a test's calls to the server.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	t.Cleanup(cancel)
	return ctx
}

// lockStatus is STATUS key as a map of its string fields; nil for an
// unknown lock.
func lockStatus(t *testing.T, rdb *redis.Client, key string) map[string]string {
	t.Helper()
	reply, err := rdb.Do(testCtx(t), "STATUS", key).Slice()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for i := 0; i+1 < len(reply); i += 2 {
		if v, ok := reply[i+1].(string); ok {
			m[reply[i].(string)] = v
		}
	}
	return m
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// childScript is a shell command for run: it records its pid, sets the TERM
// trap given ("" for none), says it started, then loops (at most 30s) until
// stopped. The test's cleanup kills its process group, should it outlive
// the test.
func childScript(t *testing.T, dir, trap string) string {
	t.Helper()
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	script := `echo $$ > "$DIR/pid"; `
	if trap != "" {
		script += `trap '` + trap + `' TERM; `
	}
	return script + `touch "$DIR/started"; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo timeout > "$DIR/timeout"`
}

func TestClientCommands(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	at := "LEASEHOLD_ADDR=" + addr
	lh := func(args ...string) (string, string, int) {
		t.Helper()
		return run(t, []string{at}, args...)
	}
	expect := func(args []string, wantExit int, wantOut string) string {
		t.Helper()
		out, errOut, exit := lh(args...)
		if exit != wantExit || (wantOut != "" && strings.TrimSpace(out) != wantOut) {
			t.Fatalf("leasehold %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q", args, exit, out, errOut, wantExit, wantOut)
		}
		return strings.TrimSpace(out)
	}

	out := expect([]string{"acquire", "--ttl", "10s", "--owner", "host-a", "jobs"}, 0, "")
	token, err := strconv.ParseUint(out, 10, 64)
	if err != nil || token == 0 {
		t.Fatalf("acquire printed %q, want a token", out)
	}
	tok := out
	if st := lockStatus(t, rdb, "jobs"); st["token"] != tok || st["owner"] != "host-a" {
		t.Fatalf("STATUS after acquire: %v", st)
	}
	if ttl, _ := strconv.Atoi(lockStatus(t, rdb, "jobs")["ttl"]); ttl < 9000 || ttl > 10000 {
		t.Errorf("ttl %d ms after acquire --ttl 10s", ttl)
	}
	// The same owner gets its lease back; anyone else does not.
	expect([]string{"acquire", "--ttl", "10s", "--owner", "host-a", "jobs"}, 0, tok)
	_, errOut, _ := lh("acquire", "jobs")
	expect([]string{"acquire", "jobs"}, 1, "")
	if !strings.Contains(errOut, `lock "jobs" not acquired`) {
		t.Errorf("acquire of a held lock: stderr %q", errOut)
	}
	start := time.Now()
	expect([]string{"acquire", "--wait", "200ms", "jobs"}, 1, "")
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("acquire --wait 200ms gave up after %s", d)
	}

	expect([]string{"verify", "jobs", tok}, 0, "true")
	expect([]string{"verify", "jobs", "1"}, 1, "false")
	expect([]string{"extend", "--ttl", "1m", "jobs", tok}, 0, "true")
	if ttl, _ := strconv.Atoi(lockStatus(t, rdb, "jobs")["ttl"]); ttl < 50000 {
		t.Errorf("ttl %d ms after extend --ttl 1m", ttl)
	}
	expect([]string{"extend", "jobs", "1"}, 1, "false")

	out = expect([]string{"status", "jobs"}, 0, "")
	for _, want := range []string{"state        held", "token        " + tok, "owner        host-a", "holders      1", "  " + tok + "  host-a"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}

	expect([]string{"release", "jobs", tok}, 0, "true")
	expect([]string{"release", "jobs", tok}, 1, "false")
	expect([]string{"verify", "jobs", tok}, 1, "false")
	out = expect([]string{"status", "jobs"}, 1, "")
	if !strings.Contains(out, "unknown") {
		t.Errorf("status of a lock made on the fly and released: %q", out)
	}
	if err := rdb.Do(testCtx(t), "CREATE", "made").Err(); err != nil {
		t.Fatal(err)
	}
	out = expect([]string{"status", "made"}, 1, "")
	if !strings.Contains(out, "state        free") || !strings.Contains(out, "created      true") {
		t.Errorf("status of a free created lock:\n%s", out)
	}

	// Shared leases: two readers, listed as holders.
	r1 := expect([]string{"acquire", "--shared", "--owner", "reader-1", "report"}, 0, "")
	r2 := expect([]string{"acquire", "--shared", "report"}, 0, "")
	expect([]string{"acquire", "report"}, 1, "")
	out = expect([]string{"status", "report"}, 0, "")
	if !strings.Contains(out, "mode         shared") || !strings.Contains(out, r1+"  reader-1") || !strings.Contains(out, r2+"  ") {
		t.Errorf("status of a shared lock:\n%s", out)
	}
}

// TestForceReleaseCommand ends a lease the command line did not take, by
// its token and then every lease of a lock, and checks the exit statuses.
func TestForceReleaseCommand(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	at := []string{"LEASEHOLD_ADDR=" + addr}
	expect := func(args []string, wantExit int, wantOut, wantErr string) {
		t.Helper()
		out, errOut, exit := run(t, at, args...)
		if exit != wantExit || strings.TrimSpace(out) != wantOut || !strings.Contains(errOut, wantErr) {
			t.Fatalf("leasehold %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q", args, exit, out, errOut, wantExit, wantOut, wantErr)
		}
	}
	n, err := rdb.Do(testCtx(t), "ACQUIRE", "stuck", 60000, "OWNER", "gone").Int64()
	if err != nil {
		t.Fatal(err)
	}
	tok := strconv.FormatInt(n, 10)
	expect([]string{"force-release", "stuck", "12345"}, exitNo, "0", `token 12345 holds no lease of "stuck"`)
	expect([]string{"force-release", "stuck", tok}, 0, "1", "")
	if n, _ := rdb.Do(testCtx(t), "VERIFY", "stuck", tok).Int(); n != 0 {
		t.Fatalf("VERIFY after force-release: %d, want 0", n)
	}
	for _, owner := range []string{"r1", "r2"} {
		if err := rdb.Do(testCtx(t), "ACQUIRE", "shared", 60000, "SHARED", "OWNER", owner).Err(); err != nil {
			t.Fatal(err)
		}
	}
	expect([]string{"force-release", "shared"}, 0, "2", "")
	if st := lockStatus(t, rdb, "shared"); st != nil && st["state"] == "held" {
		t.Fatalf("STATUS after force-release of every lease: %v", st)
	}
	expect([]string{"force-release", "shared"}, exitNo, "0", `no lease of "shared" to end`)
	expect([]string{"force-release", "never-made"}, exitNo, "0", "")
}

func TestClientCommandsFail(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	down := freeAddr(t) // nothing listens there
	cases := []struct {
		name string
		env  []string
		args []string
		want string // in stderr
	}{
		{"acquire without key", nil, []string{"acquire"}, "one KEY"},
		{"acquire with two keys", nil, []string{"acquire", "a", "b"}, "one KEY"},
		{"acquire zero ttl", nil, []string{"acquire", "--ttl", "0s", "k"}, "--ttl must be positive"},
		{"acquire negative wait", nil, []string{"acquire", "--wait", "-1s", "k"}, "--wait"},
		{"acquire empty owner", nil, []string{"acquire", "--owner", "", "k"}, "--owner"},
		{"acquire unknown flag", nil, []string{"acquire", "--bogus", "k"}, "flag provided but not defined: --bogus"},
		{"acquire bad duration", nil, []string{"acquire", "--ttl", "30x", "k"}, `invalid value "30x" for flag --ttl: want milliseconds (5000)`},
		{"verify without token", nil, []string{"verify", "k"}, "KEY TOKEN"},
		{"verify bad token", nil, []string{"verify", "k", "abc"}, `token "abc"`},
		{"release zero token", nil, []string{"release", "k", "0"}, `token "0"`},
		{"extend zero ttl", nil, []string{"extend", "--ttl", "0s", "k", "1"}, "--ttl"},
		{"status without key", nil, []string{"status"}, "one KEY"},
		{"acquire priority too big", nil, []string{"acquire", "--priority", "5000000000", "k"}, "--priority"},
		{"acquire no server", nil, []string{"acquire", "--addr", down, "k"}, "connection refused"},
		{"verify no server", nil, []string{"--addr", down, "verify", "k", "1"}, "connection refused"},
		{"release no server", []string{"LEASEHOLD_ADDR=" + down}, []string{"release", "k", "1"}, "connection refused"},
		{"extend no server", nil, []string{"extend", "--addr", down, "k", "1"}, "connection refused"},
		{"status no server", nil, []string{"status", "--addr", down, "k"}, "connection refused"},
		{"run no server", nil, []string{"run", "--addr", down, "k", "--", "true"}, "connection refused"},
		// --addr on the command line beats LEASEHOLD_ADDR, before the command too.
		{"flag beats environment", []string{"LEASEHOLD_ADDR=" + addr}, []string{"--addr", down, "status", "k"}, "connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := tc.env
			if env == nil {
				env = []string{"LEASEHOLD_ADDR=" + addr}
			}
			start := time.Now()
			out, errOut, exit := run(t, env, tc.args...)
			if exit != exitFailure || !strings.Contains(errOut, tc.want) || out != "" {
				t.Fatalf("leasehold %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, exit, out, errOut, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
	// An error reply from the server is an error too.
	if _, errOut, exit := run(t, []string{"LEASEHOLD_ADDR=" + addr}, "acquire", "--ttl", "48h", "k"); exit != exitFailure || !strings.Contains(errOut, "ttl out of range") {
		t.Errorf("acquire --ttl 48h: exit %d, stderr %q; want 2 and the server's error", exit, errOut)
	}
}

func TestRunPassesTokenAndExitStatus(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	if err := rdb.Do(testCtx(t), "CREATE", "nightly").Err(); err != nil {
		t.Fatal(err)
	}
	out, errOut, exit := run(t, []string{"LEASEHOLD_ADDR=" + addr}, "run", "--ttl", "5s", "nightly", "--",
		"sh", "-c", `echo "$LEASEHOLD_KEY $LEASEHOLD_TOKEN $LEASEHOLD_ADDR"; exit 7`)
	if exit != 7 {
		t.Fatalf("run: exit %d, want the command's 7\nstderr: %s", exit, errOut)
	}
	fields := strings.Fields(out)
	if len(fields) != 3 || fields[0] != "nightly" || fields[2] != addr {
		t.Fatalf("command printed %q, want the key, a token and the address", out)
	}
	st := lockStatus(t, rdb, "nightly")
	if st["state"] != "free" || st["last-token"] != fields[1] {
		t.Fatalf("STATUS after run: %v; want free, last token %s", st, fields[1])
	}

	// Success, and a command that is killed by a signal.
	if _, errOut, exit := run(t, []string{"LEASEHOLD_ADDR=" + addr}, "run", "nightly", "true"); exit != 0 {
		t.Errorf("run true: exit %d\n%s", exit, errOut)
	}
	if _, errOut, exit := run(t, []string{"LEASEHOLD_ADDR=" + addr}, "run", "nightly", "--", "sh", "-c", "kill -KILL $$"); exit != 128+9 {
		t.Errorf("run of a command killed by SIGKILL: exit %d, want 137\n%s", exit, errOut)
	}
	if st := lockStatus(t, rdb, "nightly"); st["state"] != "free" {
		t.Errorf("STATUS after the killed command: %v", st)
	}
}

// TestFlagsAfterArguments: flags may come after KEY (and TOKEN), as
// before; run's stop at COMMAND. A bare number is milliseconds.
func TestFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	env := []string{"LEASEHOLD_ADDR=" + addr}
	ttlWithin := func(key string, lo, hi int) {
		t.Helper()
		if ttl, _ := strconv.Atoi(lockStatus(t, rdb, key)["ttl"]); ttl < lo || ttl > hi {
			t.Errorf("%s: ttl %d ms, want %d..%d", key, ttl, lo, hi)
		}
	}
	lh := func(args ...string) string {
		t.Helper()
		out, errOut, exit := run(t, env, args...)
		if exit != 0 {
			t.Fatalf("leasehold %q: exit %d, stderr %q", args, exit, errOut)
		}
		return strings.TrimSpace(out)
	}
	tok := lh("acquire", "a", "--ttl", "5s", "--owner", "me")
	ttlWithin("a", 4000, 5000)
	if st := lockStatus(t, rdb, "a"); st["owner"] != "me" {
		t.Errorf("acquire a --owner me: owner %q", st["owner"])
	}
	if out := lh("extend", "a", tok, "--ttl", "40s"); out != "true" {
		t.Errorf("extend a TOKEN --ttl 40s printed %q", out)
	}
	ttlWithin("a", 39000, 40000)
	lh("extend", "a", "--ttl=20000", tok)
	ttlWithin("a", 19000, 20000)
	lh("acquire", "--ttl", "7000", "b")
	ttlWithin("b", 6000, 7000)
	lh("status", "a", "--addr", addr)
	lh("release", "a", tok, "--addr", addr)

	// run: flags after KEY up to COMMAND, or to --; the rest is COMMAND's.
	const show = `echo "$LEASEHOLD_KEY" "$@"`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "r", "--ttl", "5s", "--", "sh", "-c", show, "sh", "x"}, "r x"},
		{[]string{"run", "r", "--ttl", "5s", "sh", "-c", show, "sh", "x"}, "r x"},
		{[]string{"run", "--ttl", "5s", "r", "sh", "-c", show, "sh", "x"}, "r x"},
		{[]string{"run", "r", "sh", "-c", show, "sh", "--ttl", "5s"}, "r --ttl 5s"},
		{[]string{"run", "r", "--", "sh", "-c", show, "sh", "--ttl", "5s"}, "r --ttl 5s"},
	} {
		if out := lh(tc.args...); out != tc.want {
			t.Errorf("leasehold %q printed %q, want %q", tc.args, out, tc.want)
		}
	}
}

func TestRunArguments(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		exit int
		want string
	}{
		{[]string{"run"}, exitFailure, "KEY"},
		{[]string{"run", "k"}, exitFailure, "needs a COMMAND"},
		{[]string{"run", "k", "--"}, exitFailure, "needs a COMMAND"},
		{[]string{"run", "k", "--bogus", "true"}, exitFailure, "flag provided but not defined: --bogus"},
		{[]string{"run", "--kill-grace", "-1s", "k", "true"}, exitFailure, "--kill-grace"},
		{[]string{"run", "k", "--", filepath.Join(dir, "missing")}, exitNotFound, "no such file"},
		{[]string{"run", "k", "no-such-command-here"}, exitNotFound, "not found"},
		{[]string{"run", "k", notExec}, exitCannotExec, "permission denied"},
	}
	for _, tc := range cases {
		_, errOut, exit := run(t, []string{"LEASEHOLD_ADDR=" + addr}, tc.args...)
		if exit != tc.exit || !strings.Contains(errOut, tc.want) {
			t.Errorf("leasehold %q: exit %d, stderr %q; want %d and %q", tc.args, exit, errOut, tc.exit, tc.want)
		}
	}
	if st := lockStatus(t, rdb, "k"); st != nil && st["state"] != "free" {
		t.Errorf("lock left %v by a command that could not start", st)
	}
}

func TestRunNotAcquired(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	if err := rdb.Do(testCtx(t), "ACQUIRE", "k", 30000).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	start := time.Now()
	_, errOut, exit := run(t, []string{"LEASEHOLD_ADDR=" + addr, "DIR=" + dir}, "run", "--wait", "300ms", "k", "--", "sh", "-c", `touch "$DIR/ran"`)
	if exit != exitNo || !strings.Contains(errOut, "not acquired") {
		t.Fatalf("run of a held lock: exit %d, stderr %q; want 1", exit, errOut)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("gave up after %s, before --wait", d)
	}
	if exists(filepath.Join(dir, "ran")) {
		t.Error("the command ran without the lock")
	}
}

func TestRunWaitsForLock(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	holder, err := rdb.Do(testCtx(t), "ACQUIRE", "k", 30000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := start(t, []string{"LEASEHOLD_ADDR=" + addr, "DIR=" + dir}, "run", "--wait", "20s", "k", "--", "sh", "-c", `echo "$LEASEHOLD_TOKEN" > "$DIR/token"`)
	testutil.Eventually(t, commandTimeout, "run queued for the lock", func() bool { return lockStatus(t, rdb, "k")["waiters"] == "1" })
	if exists(filepath.Join(dir, "token")) {
		t.Fatal("the command ran while the lock was held")
	}
	if err := rdb.Do(testCtx(t), "RELEASE", "k", holder).Err(); err != nil {
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
	if tok, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil || tok <= holder {
		t.Errorf("command saw token %q, want one above %d", b, holder)
	}
}

func TestRunForwardsSignals(t *testing.T) {
	cases := []struct {
		name     string
		sig      syscall.Signal
		trap     string
		wantExit int
	}{
		{"SIGTERM trapped", syscall.SIGTERM, `echo term > "$DIR/term"; exit 3`, 3},
		{"SIGTERM", syscall.SIGTERM, "", 128 + 15},
		{"SIGINT", syscall.SIGINT, "", 128 + 2},
		// A closed terminal: leasehold must not die and leave the command
		// running without its lease kept alive.
		{"SIGHUP", syscall.SIGHUP, "", 128 + 1},
	}
	_, addr := startServe(t)
	rdb := client(t, addr)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "k" + strconv.Itoa(i)
			dir := t.TempDir()
			p := start(t, []string{"LEASEHOLD_ADDR=" + addr, "DIR=" + dir}, "run", key, "--", "sh", "-c", childScript(t, dir, tc.trap))
			testutil.Eventually(t, commandTimeout, "command started", func() bool { return exists(filepath.Join(dir, "started")) })
			if exit := p.stop(tc.sig); exit != tc.wantExit {
				t.Fatalf("run after %v: exit %d, want %d\nstderr: %s", tc.sig, exit, tc.wantExit, p.stderr)
			}
			if tc.trap != "" && !exists(filepath.Join(dir, "term")) {
				t.Error("the command's TERM trap did not run")
			}
			if st := lockStatus(t, rdb, key); st != nil && st["state"] != "free" {
				t.Errorf("lock not released: %v", st)
			}
		})
	}
}

// TestRunHoldsTheLockForTheWholeGroup: what the command leaves running in
// the background still works under the lock, so run keeps the lease until
// the command's whole process group has ended.
func TestRunHoldsTheLockForTheWholeGroup(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	dir := t.TempDir()
	bg := filepath.Join(dir, "bg")
	_, errOut, exit := run(t, []string{"LEASEHOLD_ADDR=" + addr, "BG=" + bg}, "run", "--ttl", "5s", "grp", "--",
		"sh", "-c", `(sleep 0.5; echo done > "$BG") & exit 4`)
	if exit != 4 {
		t.Fatalf("run: exit %d, want the command's 4\nstderr: %s", exit, errOut)
	}
	if !exists(bg) {
		t.Fatal("run returned, and released the lock, while the command's background process still ran")
	}
	if st := lockStatus(t, rdb, "grp"); st != nil && st["state"] != "free" {
		t.Fatalf("lock not released after the group ended: %v", st)
	}
}

// TestRunStopsCommandOnLoss stops the server (SIGSTOP) for longer than the
// ttl: the client cannot renew, the lease counts as lost, and run stops the
// command and exits 75.
func TestRunStopsCommandOnLoss(t *testing.T) {
	cases := []struct {
		name  string
		trap  string
		grace string
		// the file the command leaves behind when stopped as expected
		marker string
	}{
		{"TERM", `echo term > "$DIR/term"; exit 0`, "10s", "term"},
		{"KILL after grace", ``, "300ms", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, addr := startServe(t)
			dir := t.TempDir()
			trap := tc.trap
			if trap == "" {
				trap = "echo ignored > \"$DIR/ignored\"" // a TERM is seen, and does not stop it
			}
			p := start(t, []string{"LEASEHOLD_ADDR=" + addr, "DIR=" + dir}, "run", "--ttl", "500ms", "--kill-grace", tc.grace, "k", "--", "sh", "-c", childScript(t, dir, trap))
			testutil.Eventually(t, commandTimeout, "command started", func() bool { return exists(filepath.Join(dir, "started")) })

			if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			resumed := false
			resume := func() {
				if !resumed {
					resumed = true
					srv.cmd.Process.Signal(syscall.SIGCONT)
				}
			}
			t.Cleanup(resume)
			marker := tc.marker
			if marker == "" {
				marker = "ignored"
			}
			testutil.Eventually(t, commandTimeout, "command signalled after the lease was lost", func() bool { return exists(filepath.Join(dir, marker)) })
			stopped := time.Now()
			resume()

			select {
			case <-p.done:
			case <-time.After(commandTimeout):
				t.Fatalf("run did not exit after the loss\nstderr: %s", p.stderr)
			}
			var ee interface{ ExitCode() int }
			if !errors.As(p.err, &ee) || ee.ExitCode() != exitLost {
				t.Fatalf("run after a lost lease: %v, want exit %d\nstderr: %s", p.err, exitLost, p.stderr)
			}
			if !strings.Contains(p.stderr.String(), "lease lost") {
				t.Errorf("stderr does not say the lease was lost: %s", p.stderr)
			}
			if tc.marker == "" {
				if d := time.Since(stopped); d < 250*time.Millisecond {
					t.Errorf("run exited %s after the TERM, before --kill-grace 300ms", d)
				}
				b, _ := os.ReadFile(filepath.Join(dir, "pid"))
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				if pid == 0 || syscall.Kill(pid, 0) == nil {
					t.Errorf("command (pid %d) still running after run exited", pid)
				}
			}
			if exists(filepath.Join(dir, "timeout")) {
				t.Error("the command ran to its end")
			}
		})
	}
}

func TestHelpListsClientCommands(t *testing.T) {
	t.Parallel()
	out, _, exit := run(t, nil, "--help")
	if exit != 0 {
		t.Fatalf("--help: exit %d", exit)
	}
	for _, name := range []string{"run", "acquire", "verify", "release", "extend", "status", "force-release"} {
		if !strings.Contains(out, "   "+name+" ") {
			t.Errorf("--help does not list %s:\n%s", name, out)
		}
	}
	out, _, exit = run(t, nil, "run", "--help")
	if exit != 0 {
		t.Fatalf("run --help: exit %d", exit)
	}
	for _, want := range []string{"--ttl", "--wait", "--shared", "--kill-grace", "--addr", "$LEASEHOLD_ADDR", "75 if the lease was lost"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help lacks %q:\n%s", want, out)
		}
	}
}

// TestClientCommandsAuth runs client commands against a server with a
// password, which they read from the environment, never from a flag.
func TestClientCommandsAuth(t *testing.T) {
	t.Parallel()
	const pw = "open sesame"
	_, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return []string{"LEASEHOLD_REQUIREPASS=" + pw}, []string{"serve", "--addr", addr, "--log-format", "json"}
	})
	at := "LEASEHOLD_ADDR=" + addr
	cases := []struct {
		name string
		env  []string
		args []string
		exit int
		want string // in stderr when exit is not 0
	}{
		{"LEASEHOLD_PASSWORD", []string{"LEASEHOLD_PASSWORD=" + pw}, []string{"acquire", "--ttl", "1s", "a"}, 0, ""},
		{"REDISCLI_AUTH", []string{"REDISCLI_AUTH=" + pw}, []string{"acquire", "--ttl", "1s", "b"}, 0, ""},
		{"LEASEHOLD_PASSWORD first", []string{"LEASEHOLD_PASSWORD=" + pw, "REDISCLI_AUTH=wrong"}, []string{"acquire", "--ttl", "1s", "c"}, 0, ""},
		{"user", []string{"LEASEHOLD_PASSWORD=" + pw}, []string{"acquire", "--user", "default", "--ttl", "1s", "d"}, 0, ""},
		{"user from the environment", []string{"LEASEHOLD_PASSWORD=" + pw, "LEASEHOLD_USER=default"}, []string{"acquire", "--ttl", "1s", "g"}, 0, ""},
		{"run", []string{"LEASEHOLD_PASSWORD=" + pw}, []string{"run", "e", "--", "true"}, 0, ""},
		{"force-release", []string{"LEASEHOLD_PASSWORD=" + pw}, []string{"force-release", "h"}, exitNo, `no lease of "h"`},
		{"force-release without password", nil, []string{"force-release", "h"}, exitFailure, "NOAUTH Authentication required."},
		{"no password", nil, []string{"acquire", "f"}, exitFailure, "NOAUTH Authentication required."},
		{"wrong password", []string{"LEASEHOLD_PASSWORD=wrong"}, []string{"acquire", "f"}, exitFailure, "WRONGPASS"},
		{"unknown user", []string{"LEASEHOLD_PASSWORD=" + pw}, []string{"verify", "--user", "bob", "f", "1"}, exitFailure, "WRONGPASS"},
		{"user without password", nil, []string{"acquire", "--user", "default", "f"}, exitFailure, "needs a password: set LEASEHOLD_PASSWORD"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, exit := run(t, append([]string{at}, tc.env...), tc.args...)
			if exit != tc.exit || tc.exit != 0 && !strings.Contains(errOut, tc.want) {
				t.Fatalf("leasehold %q: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, exit, out, errOut, tc.exit, tc.want)
			}
			if strings.Contains(out+errOut, "sesame") {
				t.Errorf("the password is echoed: stdout %q, stderr %q", out, errOut)
			}
		})
	}
	// run hands --user on to COMMAND, for a client command inside.
	out, errOut, exit := run(t, []string{at, "LEASEHOLD_PASSWORD=" + pw}, "run", "--user", "default", "u", "--", "sh", "-c", `echo "user $LEASEHOLD_USER"`)
	if exit != 0 || out != "user default\n" {
		t.Errorf("run --user: exit %d, stdout %q, stderr %q; want COMMAND to see LEASEHOLD_USER=default", exit, out, errOut)
	}
}

// TestStatusOfAnotherUsersLease: `leasehold status`, as a user who is not an
// admin, says another user's lease is hidden instead of failing on the empty
// token the server writes, and shows the user's own lease in full.
func TestStatusOfAnotherUsersLease(t *testing.T) {
	t.Parallel()
	acl := filepath.Join(t.TempDir(), "users.acl")
	users := "user default off\nuser alice on >alice-pw ~* &* +@read +@lock\nuser bob on >bob-pw ~* &* +@read +@lock\n"
	if err := os.WriteFile(acl, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	_, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return nil, []string{"serve", "--addr", addr, "--acl-file", acl, "--log-format", "json"}
	})
	as := func(user string) []string {
		return []string{"LEASEHOLD_ADDR=" + addr, "LEASEHOLD_USER=" + user, "LEASEHOLD_PASSWORD=" + user + "-pw"}
	}
	tok, errOut, exit := run(t, as("alice"), "acquire", "--ttl", "60s", "--owner", "w1", "jobs")
	if exit != 0 {
		t.Fatalf("alice's acquire: exit %d, stderr %q", exit, errOut)
	}
	tok = strings.TrimSpace(tok)
	out, errOut, exit := run(t, as("bob"), "status", "jobs")
	if exit != 0 || !strings.Contains(out, "hidden (another user's lease)") || strings.Contains(out, tok) || strings.Contains(out, "w1") {
		t.Errorf("bob's status: exit %d, stdout %q, stderr %q; want the lease hidden, without token %s or owner w1", exit, out, errOut, tok)
	}
	out, _, exit = run(t, as("bob"), "status", "--json", "jobs")
	if exit != 0 || !strings.Contains(out, `"hidden": true`) {
		t.Errorf("bob's status --json: exit %d, stdout %q; want \"hidden\": true", exit, out)
	}
	out, errOut, exit = run(t, as("alice"), "status", "jobs")
	if exit != 0 || !strings.Contains(out, tok) || !strings.Contains(out, "w1") || strings.Contains(out, "hidden") {
		t.Errorf("alice's status: exit %d, stdout %q, stderr %q; want her token %s and owner w1", exit, out, errOut, tok)
	}
}
