//go:build unix

package clients_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/server"
)

// These tests run bash scripts that source scripts/leasehold.sh, against a
// server of their own, and check exit statuses, stdout, stderr, the server's
// lock table, and that nothing is left running in the script's process group.

// shellEnv is a server and what a bash test needs to reach it.
type shellEnv struct {
	t    *testing.T
	ts   *lockServer
	bash string
	lib  string // scripts/leasehold.sh, passed to the scripts as LH
}

func newShell(t *testing.T) *shellEnv {
	t.Helper()
	bash := lookTool(t, "bash", "bash")
	lookTool(t, "redis-cli", "redis-tools")
	return &shellEnv{
		t:    t,
		ts:   startServer(t),
		bash: bash,
		lib:  repoPath(t, "scripts/leasehold.sh"),
	}
}

// start runs script in bash under set -euo pipefail with leasehold.sh sourced.
// LH names the library, for commands that source it themselves.
func (sh *shellEnv) start(script string, extraEnv ...string) *proc {
	sh.t.Helper()
	full := "set -euo pipefail\nsource \"$LH\"\n" + script
	e := testutil.Environ(append([]string{"LH=" + sh.lib, "LEASEHOLD_ADDR=" + sh.ts.Addr().String()}, extraEnv...)...)
	return start(sh.t, e, "", sh.bash, "-c", full)
}

func (sh *shellEnv) run(script string, extraEnv ...string) *proc {
	sh.t.Helper()
	return sh.start(script, extraEnv...).wait()
}

// holder waits until key is held exclusively and returns its token.
func (sh *shellEnv) holder(key string, p *proc) uint64 {
	sh.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, ok := sh.ts.Table().Status([]byte(key)); ok && st.Held && st.Token != 0 {
			return st.Token
		}
		select {
		case <-p.done:
			sh.t.Fatalf("the script ended before %s was held: %s", key, p)
		default:
		}
		if time.Now().After(deadline) {
			sh.t.Fatalf("%s was not held within 10s", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waiting waits until a request waits in key's queue.
func (sh *shellEnv) waiting(key string, p *proc) {
	sh.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, ok := sh.ts.Table().Status([]byte(key)); ok && st.Waiters > 0 {
			return
		}
		select {
		case <-p.done:
			sh.t.Fatalf("the script ended before it waited for %s: %s", key, p)
		default:
		}
		if time.Now().After(deadline) {
			sh.t.Fatalf("nothing waited for %s within 10s: %s", key, p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (sh *shellEnv) checkFree(key string) {
	sh.t.Helper()
	if st, ok := sh.ts.Table().Status([]byte(key)); ok && st.Held {
		sh.t.Errorf("%s is still held after the script: %+v", key, st)
	}
}

// expect checks a finished script's exit status and its whole stdout against
// a pattern ({n}: a number).
func expect(t *testing.T, p *proc, exit int, stdout string) {
	t.Helper()
	q := strings.ReplaceAll(regexp.QuoteMeta(stdout), `\{n\}`, `[0-9]+`)
	if p.exit != exit || !regexp.MustCompile(`\A`+q+`\z`).MatchString(p.stdout.String()) {
		t.Fatalf("want exit %d and stdout %q; got %s", exit, stdout, p)
	}
}

// TestShellScriptsLint runs shellcheck over the client script and over the
// benchmark, which nothing else runs in CI.
func TestShellScriptsLint(t *testing.T) {
	t.Parallel()
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		// Debian has it; where apt has not, make deps says so and only this lint is skipped.
		if out, aerr := exec.Command("apt-cache", "show", "shellcheck").CombinedOutput(); aerr != nil || len(out) == 0 {
			t.Skip("shellcheck is not installed, and apt has none: lint skipped")
		}
		missing(t, "shellcheck not found")
	}
	p := start(t, testutil.Environ(), "", sc, "--shell=bash",
		repoPath(t, "scripts/leasehold.sh"), repoPath(t, "scripts/bench.sh")).wait()
	if p.exit != 0 {
		t.Fatalf("shellcheck: %s", p)
	}
}

func TestLeaseholdShAcquireRelease(t *testing.T) {
	t.Parallel()
	sh := newShell(t)
	p := sh.run(`
st() { "$@" && echo "status 0" || echo "status $?"; }
tok=$(leasehold_acquire k 30000)
echo "token $tok"
st leasehold_acquire k 30000            # held: nothing printed
st leasehold_verify k "$tok"
st leasehold_verify k 1
st leasehold_extend k "$tok" 60000
st leasehold_extend k 1 60000
st leasehold_release k "$tok"
st leasehold_release k "$tok"           # not held any more
st leasehold_verify k "$tok"
st leasehold_acquire k 0                # an error reply
st leasehold_release k abc              # an error reply
st leasehold_acquire k                  # usage
st leasehold_release k
st leasehold_extend k 1
st leasehold_verify k
export LEASEHOLD_OWNER=me
a=$(leasehold_acquire o 30000)
b=$(leasehold_acquire o 30000)          # the same owner: the same token
[ "$a" = "$b" ] && echo "same owner, same token"
unset LEASEHOLD_OWNER
st leasehold_acquire o 30000
LEASEHOLD_ADDR=$DEAD st leasehold_acquire k 1000
LEASEHOLD_ADDR=$DEAD st leasehold_release k 1
echo done
`, "DEAD=127.0.0.1:"+closedPort(t))
	expect(t, p, 0, `token {n}
status 1
status 0
status 1
status 0
status 1
status 0
status 1
status 1
status 2
status 2
status 2
status 2
status 2
status 2
same owner, same token
status 1
status 2
status 2
done
`)
	for _, want := range []string{
		"leasehold_acquire: ERR invalid expire time in 'acquire' command\n",
		"leasehold_release: ERR invalid token: must be an unsigned 64-bit integer\n",
		"usage: leasehold_acquire KEY TTL_MS [WAIT_MS]\n",
		"usage: leasehold_release KEY TOKEN\n",
		"usage: leasehold_extend KEY TOKEN TTL_MS\n",
		"usage: leasehold_verify KEY TOKEN\n",
		"leasehold_acquire: no reply from the leasehold server at 127.0.0.1:",
		"leasehold_release: no reply from the leasehold server at 127.0.0.1:",
	} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("stderr lacks %q: %s", want, p)
		}
	}
	sh.checkFree("k")
}

func TestLeaseholdShAcquireWait(t *testing.T) {
	t.Parallel()
	sh := newShell(t)
	// Held by another client: a WAIT of 100ms ends nil, one of 30s is
	// granted once that client releases the lock while it waits.
	held, ok, err := sh.ts.Table().Acquire(&locker.Request{Key: []byte("w"), TTL: 30 * time.Second})
	if !ok || err != nil {
		t.Fatalf("Acquire: %v %v", ok, err)
	}
	p := sh.start(`
rc=0; leasehold_acquire w 30000 100 || rc=$?
echo "short wait: $rc"
tok=$(leasehold_acquire w 30000 30000)
echo "long wait: $tok"
`)
	p.waitOutput("short wait: ")
	sh.waiting("w", p)
	if !sh.ts.Table().Release([]byte("w"), held) {
		t.Fatal("could not release w")
	}
	p.wait()
	expect(t, p, 0, "short wait: 1\nlong wait: {n}\n")
}

// shAcquireCase is leasehold_acquire run with env under a stand-in
// redis-cli, ending with status exit and saying says on stderr.
type shAcquireCase struct {
	name string
	env  []string
	exit int
	says string
}

// runShAcquire runs c as a parallel subtest; fakeCLI defines the redis-cli
// function, which answers 42.
func runShAcquire(t *testing.T, bash, lib, fakeCLI string, c shAcquireCase) {
	t.Run(c.name, func(t *testing.T) {
		t.Parallel()
		p := start(t, testutil.Environ(append([]string{"LH=" + lib}, c.env...)...), "", bash, "-c",
			"set -euo pipefail\nsource \"$LH\"\n"+fakeCLI+"rc=0; leasehold_acquire d 30000 || rc=$?\necho \"status $rc\"\n").wait()
		want := fmt.Sprintf("status %d\n", c.exit)
		if c.exit == 0 {
			want = "42\n" + want
		}
		if p.stdout.String() != want || !strings.Contains(p.stderr.String(), c.says) {
			t.Errorf("want stdout %q and %q on stderr; got %s", want, c.says, p)
		}
	})
}

func TestLeaseholdShAddress(t *testing.T) {
	t.Parallel()
	bash := lookTool(t, "bash", "bash")
	lib := repoPath(t, "scripts/leasehold.sh")
	// redis-cli here is a function that shows where it would connect.
	const fakeCLI = `redis-cli() { echo "redis-cli $1 $2 $3 $4" >&2; echo 42; }` + "\n"
	for _, c := range []shAcquireCase{
		// Under set -u, unset: the default.
		{"default", nil, 0, "redis-cli -h 127.0.0.1 -p 7379\n"},
		{"host and port", []string{"LEASEHOLD_ADDR=locks.internal:7400"}, 0, "redis-cli -h locks.internal -p 7400\n"},
		{"IPv6", []string{"LEASEHOLD_ADDR=[::1]:7400"}, 0, "redis-cli -h ::1 -p 7400\n"},
		{"no port", []string{"LEASEHOLD_ADDR=locks.internal"}, 2, "leasehold_acquire: LEASEHOLD_ADDR must be HOST:PORT, got 'locks.internal'\n"},
		{"bad port", []string{"LEASEHOLD_ADDR=locks.internal:http"}, 2, "LEASEHOLD_ADDR must be HOST:PORT"},
		// The old variables alone would have been ignored: an error, not
		// locks taken on another server.
		{"old variables", []string{"LEASEHOLD_HOST=locks.internal", "LEASEHOLD_PORT=7400"}, 2,
			"leasehold_acquire: LEASEHOLD_HOST and LEASEHOLD_PORT are no longer read: set LEASEHOLD_ADDR=HOST:PORT\n"},
		{"old and new", []string{"LEASEHOLD_HOST=elsewhere", "LEASEHOLD_ADDR=locks.internal:7400"}, 0, "redis-cli -h locks.internal -p 7400\n"},
	} {
		runShAcquire(t, bash, lib, fakeCLI, c)
	}
	// leasehold_with_lock checks the address before anything else.
	p := start(t, testutil.Environ("LH="+lib, "LEASEHOLD_PORT=7400"), "", bash, "-c",
		"source \"$LH\"\n"+fakeCLI+"leasehold_with_lock k 30000 echo ran\n").wait()
	if p.exit != 2 || p.stdout.String() != "" || strings.Contains(p.stderr.String(), "redis-cli -h") {
		t.Errorf("with_lock and LEASEHOLD_PORT alone: %s", p)
	}
}

// TestLeaseholdShTLSOptions checks the redis-cli options the TLS settings
// become, with a redis-cli that shows its arguments, and that a setting
// without LEASEHOLD_TLS is refused rather than sent in plain text.
func TestLeaseholdShTLSOptions(t *testing.T) {
	t.Parallel()
	bash := lookTool(t, "bash", "bash")
	lib := repoPath(t, "scripts/leasehold.sh")
	const fakeCLI = `redis-cli() { echo "redis-cli $*" >&2; echo 42; }` + "\n"
	const plain = "redis-cli -h 127.0.0.1 -p 7379 --raw ACQUIRE d 30000 OWNER leasehold.sh:"
	for _, c := range []shAcquireCase{
		{"none", nil, 0, plain},
		{"off", []string{"LEASEHOLD_TLS=0"}, 0, plain},
		{"on", []string{"LEASEHOLD_TLS=1"}, 0, "redis-cli -h 127.0.0.1 -p 7379 --tls --raw ACQUIRE"},
		{"every setting", []string{"LEASEHOLD_TLS=true", "LEASEHOLD_TLS_CACERT=/ca dir/ca.crt", "LEASEHOLD_TLS_CERT=c.crt",
			"LEASEHOLD_TLS_KEY=c.key", "LEASEHOLD_TLS_SNI=locks.internal", "LEASEHOLD_TLS_INSECURE=1", "LEASEHOLD_USER=alice"}, 0,
			"redis-cli -h 127.0.0.1 -p 7379 --user alice --tls --cacert /ca dir/ca.crt --cert c.crt --key c.key --sni locks.internal --insecure --raw ACQUIRE"},
		{"insecure off", []string{"LEASEHOLD_TLS=1", "LEASEHOLD_TLS_INSECURE=0"}, 0, "-p 7379 --tls --raw"},
		{"not a boolean", []string{"LEASEHOLD_TLS=yes"}, 2, "leasehold_acquire: LEASEHOLD_TLS must be 1 or 0, got 'yes'\n"},
		{"CA without TLS", []string{"LEASEHOLD_TLS_CACERT=ca.crt"}, 2, "leasehold_acquire: LEASEHOLD_TLS_CACERT is a setting of TLS: set LEASEHOLD_TLS=1\n"},
		{"insecure without TLS", []string{"LEASEHOLD_TLS=0", "LEASEHOLD_TLS_INSECURE=1"}, 2, "LEASEHOLD_TLS_INSECURE is a setting of TLS"},
	} {
		runShAcquire(t, bash, lib, fakeCLI, c)
	}
	// leasehold_with_lock checks them before anything else, and exports
	// them to COMMAND.
	p := start(t, testutil.Environ("LH="+lib, "LEASEHOLD_TLS_CERT=c.crt"), "", bash, "-c",
		"source \"$LH\"\n"+fakeCLI+"leasehold_with_lock k 30000 echo ran\n").wait()
	if p.exit != 2 || p.stdout.String() != "" || strings.Contains(p.stderr.String(), "redis-cli -h") {
		t.Errorf("with_lock and LEASEHOLD_TLS_CERT alone: %s", p)
	}
}

// TestLeaseholdShWithLockBinary: under leasehold_with_lock, as under
// leasehold run, the leasehold binary reaches the same server with no
// address given: LEASEHOLD_ADDR is in the command's environment, even when
// the caller set it in its shell only.
//
// Not parallel: it runs before the parallel tests, so that its go build does
// not take the CPU from their lease renewals.
func TestLeaseholdShWithLockBinary(t *testing.T) {
	sh := newShell(t)
	bin := testutil.BuildLeasehold(t)
	p := sh.run(`
export -n LEASEHOLD_ADDR
leasehold_with_lock bin 30000 bash -c '
	echo "addr $LEASEHOLD_ADDR"
	leasehold verify "$LEASEHOLD_KEY" "$LEASEHOLD_TOKEN"
	leasehold verify "$LEASEHOLD_KEY" 1 || echo "status $?"
	leasehold status "$LEASEHOLD_KEY" | grep -q "^state *held" && echo held'
`, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	expect(t, p, 0, "addr "+sh.ts.Addr().String()+"\ntrue\nfalse\nstatus 1\nheld\n")
	sh.checkFree("bin")
}

func TestLeaseholdShWithLock(t *testing.T) {
	t.Parallel()
	sh := newShell(t)
	// The command sees the key and token, reads the caller's stdin, holds the
	// lock while it runs, and its status comes back; the lock is released.
	p := sh.start(`
# Not exported: with_lock hands it to the command all the same.
export -n LEASEHOLD_ADDR
rc=0
echo "from stdin" | leasehold_with_lock wl 30000 bash -c '
	source "$LH"
	echo "$(cat): $LEASEHOLD_KEY $LEASEHOLD_TOKEN"
	leasehold_verify "$LEASEHOLD_KEY" "$LEASEHOLD_TOKEN" && echo "verified"
	exit 7' || rc=$?
echo "status $rc"
leasehold_with_lock wl 30000 true
echo "true: $?"
rc=0; leasehold_with_lock wl 30000 false || rc=$?
echo "false: $rc"
rc=0; leasehold_with_lock wl 30000 no-such-command-here 2>/dev/null || rc=$?
echo "missing command: $rc"
`)
	p.wait()
	expect(t, p, 0, "from stdin: wl {n}\nverified\nstatus 7\ntrue: 0\nfalse: 1\nmissing command: 127\n")
	tok := regexp.MustCompile(`wl ([0-9]+)`).FindStringSubmatch(p.stdout.String())[1]
	sh.checkFree("wl")
	if st := sh.ts.Table().Stats(); st.Released != 4 {
		t.Errorf("leases released: %d, want 4 (%+v); token %s", st.Released, st, tok)
	}
}

func TestLeaseholdShWithLockRefused(t *testing.T) {
	t.Parallel()
	sh := newShell(t)
	// Held by another client until the script waits for it.
	busy, ok, err := sh.ts.Table().Acquire(&locker.Request{Key: []byte("busy"), TTL: 30 * time.Second})
	if !ok || err != nil {
		t.Fatalf("Acquire: %v %v", ok, err)
	}
	// Held by another client until more than the script's ttl after the
	// script asked for it.
	late, ok, err := sh.ts.Table().Acquire(&locker.Request{Key: []byte("late"), TTL: 30 * time.Second})
	if !ok || err != nil {
		t.Fatalf("Acquire: %v %v", ok, err)
	}
	p := sh.start(`
# Granted after longer than its 1s ttl: renewed before the command starts.
rc=0; LEASEHOLD_WAIT_MS=30000 leasehold_with_lock late 1000 bash -c '
	source "$LH"; leasehold_verify "$LEASEHOLD_KEY" "$LEASEHOLD_TOKEN" && echo "late but live"' || rc=$?
echo "waited long: $rc"
rc=0; leasehold_with_lock busy 30000 echo ran || rc=$?
echo "held: $rc"
rc=0; LEASEHOLD_WAIT_MS=10000 leasehold_with_lock busy 30000 echo ran || rc=$?
echo "waited: $rc"
rc=0; LEASEHOLD_ADDR=$DEAD leasehold_with_lock busy 30000 echo ran || rc=$?
echo "no server: $rc"
rc=0; leasehold_with_lock busy 30000 || rc=$?
echo "usage: $rc"
rc=0; leasehold_with_lock busy 0 echo ran || rc=$?
echo "ttl 0: $rc"
rc=0; LEASEHOLD_WAIT_MS=soon leasehold_with_lock busy 1000 echo ran || rc=$?
echo "bad wait: $rc"
`, "DEAD=127.0.0.1:"+closedPort(t))
	sh.waiting("late", p)
	time.Sleep(1200 * time.Millisecond) // longer than the waiting lease's ttl
	if !sh.ts.Table().Release([]byte("late"), late) {
		t.Fatal("could not release late")
	}
	p.waitOutput("held: ")
	sh.waiting("busy", p)
	if !sh.ts.Table().Release([]byte("busy"), busy) {
		t.Fatal("could not release busy")
	}
	p.wait()
	expect(t, p, 0, "late but live\nwaited long: 0\nheld: 1\nran\nwaited: 0\nno server: 2\nusage: 2\nttl 0: 2\nbad wait: 2\n")
	for _, want := range []string{
		"leasehold_with_lock: busy is held elsewhere\n",
		"leasehold_with_lock: no reply from the leasehold server",
		"usage: leasehold_with_lock KEY TTL_MS COMMAND [ARG...]\n",
	} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("stderr lacks %q: %s", want, p)
		}
	}
	// The no-server case retried: three tries, three messages.
	if n := strings.Count(p.stderr.String(), "no reply from the leasehold server"); n != 3 {
		t.Errorf("%d tries without a server, want 3: %s", n, p)
	}
	sh.checkFree("busy")
	sh.checkFree("late")
	if st := sh.ts.Table().Stats(); st.Renewed < 1 {
		t.Errorf("the lease granted late was not renewed at once: %+v", st)
	}
}

func TestLeaseholdShWithLockRenews(t *testing.T) {
	t.Parallel()
	sh := newShell(t)
	// A 1.5s lease outlives a 3.6s command (more than two ttls): the command
	// checks its token every 300ms. (Each renewal starts redis-cli: on a
	// busy two-core machine under -race one took over 200ms to answer, so a
	// 300ms ttl, renewed every 100ms, was sometimes lost; at a load average
	// of 10, so was a 900ms one.)
	p := sh.run(`
leasehold_with_lock alive 1500 bash -c '
	source "$LH"
	for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
		sleep 0.3
		if leasehold_verify "$LEASEHOLD_KEY" "$LEASEHOLD_TOKEN"; then echo live; else echo dead; fi
	done'
`)
	expect(t, p, 0, strings.Repeat("live\n", 12))
	if p.elapsed > 20*time.Second {
		t.Errorf("took %s", p.elapsed)
	}
	if st := sh.ts.Table().Stats(); st.Renewed < 5 || st.Expired != 0 || st.Released != 1 {
		t.Errorf("renewed %d, expired %d, released %d: want at least 5 renewals, no expiry, one release", st.Renewed, st.Expired, st.Released)
	}
	if strings.Contains(p.stderr.String(), "leasehold_with_lock") {
		t.Errorf("unexpected complaints: %s", p)
	}
	sh.checkFree("alive")
}

// stubborn runs until SIGTERM or SIGHUP, which it reports once (it may get
// both, or two SIGTERMs: from the process group and from with_lock), then
// exits 42. It prints "started" once its trap is set.
const stubborn = `bash -c 'trap "trap : TERM HUP; echo got TERM; exit 42" TERM HUP; echo started; while :; do sleep 0.05; done'`

func TestLeaseholdShWithLockLost(t *testing.T) {
	t.Parallel()
	t.Run("renewal refused", func(t *testing.T) {
		t.Parallel()
		sh := newShell(t)
		p := sh.start(`
rc=0; leasehold_with_lock lost 3000 ` + stubborn + ` || rc=$?
echo "status $rc"
`)
		tok := sh.holder("lost", p)
		p.waitOutput("started\n")
		// A 3 s ttl, renewals every second: with 900 ms (and 300 ms
		// before it), a redis-cli slow to start on a machine at load 10
		// to 17 lost the lease by its deadline before a renewal could be
		// refused.
		if !sh.ts.Table().Release([]byte("lost"), tok) {
			t.Fatal("could not release the script's lease")
		}
		released := time.Now()
		p.wait()
		expect(t, p, 0, "started\ngot TERM\nstatus 75\n")
		if d := time.Since(released); d > 6*time.Second {
			t.Errorf("the command stopped %s after the lease was lost", d)
		}
		if !strings.Contains(p.stderr.String(), "leasehold_with_lock: the lease on lost (token ") ||
			!strings.Contains(p.stderr.String(), "is lost: a renewal was refused; stopping the command (SIGTERM)") {
			t.Errorf("stderr: %s", p)
		}
	})
	t.Run("SIGTERM ignored", func(t *testing.T) {
		t.Parallel()
		sh := newShell(t)
		p := sh.start(`
rc=0; leasehold_with_lock lost 3000 bash -c 'trap "" TERM; echo started; exec sleep 30' || rc=$?
echo "status $rc"
`, "LEASEHOLD_KILL_GRACE_MS=300")
		tok := sh.holder("lost", p)
		p.waitOutput("started\n")
		if !sh.ts.Table().Release([]byte("lost"), tok) {
			t.Fatal("could not release the script's lease")
		}
		p.wait()
		expect(t, p, 0, "started\nstatus 75\n")
		if !strings.Contains(p.stderr.String(), "the command is still running 300 ms after SIGTERM; SIGKILL") {
			t.Errorf("stderr: %s", p)
		}
		if p.elapsed > 10*time.Second {
			t.Errorf("took %s", p.elapsed)
		}
	})
	t.Run("server gone", func(t *testing.T) {
		t.Parallel()
		sh := newShell(t)
		p := sh.start(`
rc=0; leasehold_with_lock lost 900 ` + stubborn + ` || rc=$?
echo "status $rc"
`)
		sh.holder("lost", p)
		p.waitOutput("started\n")
		sh.ts.Close() // renewals get no reply from here on
		gone := time.Now()
		p.wait()
		expect(t, p, 0, "started\ngot TERM\nstatus 75\n")
		if d := time.Since(gone); d > 5*time.Second {
			t.Errorf("the command stopped %s after the server went", d)
		}
		for _, want := range []string{
			"leasehold_with_lock: renewing lost failed",
			"may be lost: no renewal was confirmed before its deadline; stopping the command (SIGTERM)",
		} {
			if !strings.Contains(p.stderr.String(), want) {
				t.Errorf("stderr lacks %q: %s", want, p)
			}
		}
	})
}

func TestLeaseholdShWithLockSignals(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			sh := newShell(t)
			// The signal goes to the whole process group, as a terminal's
			// Ctrl-C or a service manager's stop would. The caller traps it
			// to print what with_lock returned.
			p := sh.start(`
trap 'echo "caller got the signal"' TERM INT HUP
rc=0; leasehold_with_lock sig 30000 ` + stubborn + ` || rc=$?
echo "status $rc"
`)
			sh.holder("sig", p)
			p.waitOutput("started\n")
			if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
				t.Fatal(err)
			}
			p.wait()
			// The command gets SIGTERM and SIGHUP from the group, and SIGTERM
			// from with_lock. Asynchronous commands of a shell without job
			// control ignore SIGINT: with_lock's SIGTERM is what stops it.
			expect(t, p, 0, "started\ngot TERM\ncaller got the signal\nstatus 42\n")
			sh.checkFree("sig")
		})
	}
}

// TestLeaseholdShPassword runs the functions against a server with a
// password, which they take from LEASEHOLD_PASSWORD or REDISCLI_AUTH and
// hand to redis-cli in its environment.
func TestLeaseholdShPassword(t *testing.T) {
	t.Parallel()
	const pw = "s3cret"
	sh := newShell(t)
	sh.ts = startServerWith(t, func(c *server.Config) { c.RequirePass = pw })
	script := `
st() { "$@" && echo "status 0" || echo "status $?"; }
tok=$(leasehold_acquire k 30000) && echo "token $tok"
st leasehold_release k "$tok"
`
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"LEASEHOLD_PASSWORD", []string{"LEASEHOLD_PASSWORD=" + pw}, "token {n}\nstatus 0\n"},
		{"REDISCLI_AUTH", []string{"REDISCLI_AUTH=" + pw}, "token {n}\nstatus 0\n"},
		{"user", []string{"LEASEHOLD_PASSWORD=" + pw, "LEASEHOLD_USER=default"}, "token {n}\nstatus 0\n"},
		{"wrong user", []string{"LEASEHOLD_PASSWORD=" + pw, "LEASEHOLD_USER=bob"}, ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := sh.run(script, tc.env...)
			if tc.want == "" {
				expect(t, p, 0, "status 2\n") // the ACQUIRE failed too
				if !strings.Contains(p.stderr.String(), "NOAUTH Authentication required.") {
					t.Errorf("stderr lacks NOAUTH: %s", p)
				}
				return
			}
			expect(t, p, 0, tc.want)
		})
	}
}

// TestLeaseholdShTLS runs the functions with redis-cli over TLS, with a
// client certificate and a password, and leasehold_with_lock's COMMAND
// reaching the server the same way when the caller set the TLS settings in
// its shell only.
func TestLeaseholdShTLS(t *testing.T) {
	t.Parallel()
	const pw = "s3cret"
	sh := newShell(t)
	ts := startTLSServer(t, pw)
	sh.ts = ts.lockServer
	p := sh.run(`
st() { "$@" && echo "status 0" || echo "status $?"; }
tok=$(leasehold_acquire k 30000) && echo "token $tok"
st leasehold_verify k "$tok"
st leasehold_release k "$tok"
`, ts.env...)
	expect(t, p, 0, "token {n}\nstatus 0\nstatus 0\n")

	// Shell variables, not exported: leasehold_with_lock exports them for
	// COMMAND (the password, exported here, COMMAND inherits).
	var settings strings.Builder
	for _, kv := range ts.env {
		if name, _, _ := strings.Cut(kv, "="); name != "LEASEHOLD_PASSWORD" && name != "LEASEHOLD_ADDR" {
			fmt.Fprintf(&settings, "%s=%q\n", name, kv[len(name)+1:])
			fmt.Fprintf(&settings, "export -n %s\n", name)
		}
	}
	p = sh.run(settings.String()+`
leasehold_with_lock w 30000 bash -c 'source "$LH"; leasehold_verify "$LEASEHOLD_KEY" "$LEASEHOLD_TOKEN" && echo "verified over $LEASEHOLD_TLS"'
`, ts.env...)
	expect(t, p, 0, "verified over 1\n")
	sh.checkFree("w")

	// Without TLS, against the TLS port: an error, not a hang.
	p = sh.run(`rc=0; leasehold_acquire k 30000 || rc=$?; echo "status $rc"`, "LEASEHOLD_ADDR="+ts.TLSAddr().String(), "LEASEHOLD_PASSWORD="+pw)
	expect(t, p, 0, "status 2\n")
}

// TestLeaseholdShAddressList: LEASEHOLD_ADDR may list the nodes of a
// cluster. redis-cli here is a function that cannot connect to hosts named
// down*, answers an error from err*, loses the connection after the
// command went out at drop*, and answers 42 elsewhere, saying where.
func TestLeaseholdShAddressList(t *testing.T) {
	t.Parallel()
	bash := lookTool(t, "bash", "bash")
	lib := repoPath(t, "scripts/leasehold.sh")
	const fakeCLI = `redis-cli() {
	case $2 in
	down*) echo "Could not connect to Redis at $2:$4: Connection refused" >&2; return 1 ;;
	err*) echo "ERR no such thing"; return 0 ;;
	drop*) echo "Error: Server closed the connection" >&2; return 1 ;;
	esac
	echo "redis-cli -h $2 -p $4" >&2; echo 42
}
`
	for _, c := range []struct {
		shAcquireCase
		notSays string // not on stderr
	}{
		{shAcquireCase{"first down", []string{"LEASEHOLD_ADDR=down1:7379,up:7379"}, 0, "redis-cli -h up -p 7379\n"}, "Could not connect"},
		{shAcquireCase{"two down", []string{"LEASEHOLD_ADDR=down1:1,down2:2,up:3"}, 0, "redis-cli -h up -p 3\n"}, "down"},
		{shAcquireCase{"first up", []string{"LEASEHOLD_ADDR=up1:1,up2:2"}, 0, "redis-cli -h up1 -p 1\n"}, "up2"},
		{shAcquireCase{"spaces, IPv6", []string{"LEASEHOLD_ADDR=down:1, [::1]:7400"}, 0, "redis-cli -h ::1 -p 7400\n"}, "down"},
		{shAcquireCase{"all down", []string{"LEASEHOLD_ADDR=down1:1,down2:2"}, 2,
			"Could not connect to Redis at down1:1: Connection refused\nCould not connect to Redis at down2:2: Connection refused\nleasehold_acquire: no reply from the leasehold server at down1:1,down2:2\n"}, ""},
		// A reply, even an error, or a connection lost once the command
		// went out (the server may have acted on it), does not move on.
		{shAcquireCase{"error reply", []string{"LEASEHOLD_ADDR=err:1,up:2"}, 2, "leasehold_acquire: ERR no such thing\n"}, "-h up"},
		{shAcquireCase{"connection lost", []string{"LEASEHOLD_ADDR=drop:1,up:2"}, 2, "Error: Server closed the connection\n"}, "-h up"},
		{shAcquireCase{"not an address", []string{"LEASEHOLD_ADDR=up:1,junk"}, 2,
			"leasehold_acquire: LEASEHOLD_ADDR must be HOST:PORT or a comma-separated list of them, got 'junk' in 'up:1,junk'\n"}, "redis-cli"},
		{shAcquireCase{"a comma too many", []string{"LEASEHOLD_ADDR=up:1,"}, 2, "got '' in 'up:1,'"}, "redis-cli"},
		{shAcquireCase{"IPv6 without brackets", []string{"LEASEHOLD_ADDR=::1:7400"}, 2, "LEASEHOLD_ADDR must be HOST:PORT, got '::1:7400'"}, "redis-cli"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, testutil.Environ(append([]string{"LH=" + lib}, c.env...)...), "", bash, "-c",
				"set -euo pipefail\nsource \"$LH\"\n"+fakeCLI+"rc=0; leasehold_acquire d 30000 || rc=$?\necho \"status $rc\"\n").wait()
			want := fmt.Sprintf("status %d\n", c.exit)
			if c.exit == 0 {
				want = "42\n" + want
			}
			errOut := p.stderr.String()
			if p.stdout.String() != want || !strings.Contains(errOut, c.says) || c.notSays != "" && strings.Contains(errOut, c.notSays) {
				t.Errorf("want stdout %q, %q on stderr and not %q; got %s", want, c.says, c.notSays, p)
			}
		})
	}
}

// TestLeaseholdShAddressListFailover: with the first address dead, a real
// redis-cli takes, verifies, renews and releases locks at the second; a
// leasehold_with_lock outlives its ttl on renewals through it.
func TestLeaseholdShAddressListFailover(t *testing.T) {
	t.Parallel()
	sh := newShell(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	list := dead + "," + sh.ts.Addr().String()
	p := sh.run(`
tok=$(leasehold_acquire k 30000)
leasehold_verify k "$tok" && echo verified
leasehold_extend k "$tok" 30000 && echo extended
leasehold_release k "$tok" && echo released
leasehold_with_lock wl 1500 bash -c 'echo "addr $LEASEHOLD_ADDR"; sleep 2; source "$LH"; leasehold_verify "$LEASEHOLD_KEY" "$LEASEHOLD_TOKEN" && echo still held'
`, "LEASEHOLD_ADDR="+list)
	expect(t, p, 0, "verified\nextended\nreleased\naddr "+list+"\nstill held\n")
	if strings.Contains(p.stderr.String(), "Could not connect") {
		t.Errorf("the dead address shows on stderr: %s", p)
	}
	sh.checkFree("k")
	sh.checkFree("wl")
}
