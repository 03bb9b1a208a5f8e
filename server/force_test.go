package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
)

// TestForceReleaseOverTheWire: FORCE-RELEASE ends a lease whoever holds it,
// every lease of a lock without a token, and a lock-delay in progress; the
// waiter queued is granted a token above every earlier one; every call is
// logged at warn level with the peer and the client's name.
func TestForceReleaseOverTheWire(t *testing.T) {
	var logs lockedBuffer
	clock := &locker.ManualClock{}
	ts := startServerLogging(t, zerolog.New(&logs), withManualClock(clock))
	rdb := ts.client()

	do(t, rdb, "FORCE-RELEASE", "unknown").Is(0)
	stuck := do(t, rdb, "ACQUIRE", "job", 60000, "OWNER", "crashed").Token()
	waiter := ts.dial()
	waiter.send(resp("ACQUIRE", "job", "1000", "WAIT", "60000"))
	testutil.Eventually(t, 10*time.Second, "the waiter to queue", func() bool { return status(t, rdb, "job")["waiters"] == "1" })

	op := ts.dial()
	op.send(resp("CLIENT", "SETNAME", "oncall"))
	op.expect("OK")
	op.send(resp("FORCE-RELEASE", "job", u(stuck+1)))
	op.expect(int64(0)) // a token that does not hold it ends nothing
	op.send(resp("FORCE-RELEASE", "job", "0"))
	op.expect(int64(0))
	op.send(resp("FORCE-RELEASE", "job", u(stuck)))
	op.expect(int64(1))
	next, ok := waiter.reply().(int64)
	if !ok || uint64(next) <= stuck {
		t.Fatalf("waiter granted %v, want a token above the forced %d", next, stuck)
	}
	do(t, rdb, "VERIFY", "job", stuck).Is(0)
	do(t, rdb, "VERIFY", "job", next).Is(1)
	op.send(resp("FORCE-RELEASE", "job"))
	op.expect(int64(1))
	do(t, rdb, "FORCE-RELEASE", "job", "x").Err("ERR invalid token")
	do(t, rdb, "FORCE-RELEASE").Err("ERR wrong number of arguments for 'force-release' command")

	// Every lease: readers, and a semaphore's permits.
	for range 3 {
		do(t, rdb, "ACQUIRE", "rw", 60000, "SHARED").Token()
	}
	do(t, rdb, "FORCE-RELEASE", "rw").Is(3)
	do(t, rdb, "CREATE", "sem", "LIMIT", 2).Is(1)
	do(t, rdb, "ACQUIRE", "sem", 60000).Token()
	last := do(t, rdb, "ACQUIRE", "sem", 60000).Token()
	do(t, rdb, "FORCE-RELEASE", "sem").Is(2)
	if tok := do(t, rdb, "ACQUIRE", "sem", 60000).Token(); tok <= last {
		t.Fatalf("permit after FORCE-RELEASE %d, want above %d", tok, last)
	}

	// The attack of issue 14: a day's lock-delay on someone's lock.
	do(t, rdb, "CREATE", "victim", "LOCKDELAY", 86400000).Is(1)
	do(t, rdb, "ACQUIRE", "victim", 100).Token()
	clock.Advance(200 * time.Millisecond)
	do(t, rdb, "ACQUIRE", "victim", 1000).Nil()
	do(t, rdb, "FORCE-RELEASE", "victim").Is(1)
	do(t, rdb, "ACQUIRE", "victim", 1000).Token()
	// 1 (job's stuck lease) + 1 (job, all) + 3 (rw) + 2 (sem) + 1 (victim).
	if got := infoField(t, rdb, "locks", "leases_forced"); got != "8" {
		t.Errorf("INFO leases_forced = %s, want 8", got)
	}

	var forced []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "FORCE-RELEASE") {
			forced = append(forced, l)
		}
	}
	if len(forced) != 8 { // the two refused calls ended nothing and are not logged
		t.Fatalf("%d FORCE-RELEASE log lines, want one a call that parsed (8):\n%s", len(forced), logs.String())
	}
	want := []string{`"level":"warn"`, `"client_name":"oncall"`, `"remote":"` + op.LocalAddr().String() + `"`,
		`"key":"job"`, fmt.Sprintf(`"token":%d`, stuck), `"ended":1`, `"user":"default"`}
	for _, w := range want {
		if !strings.Contains(forced[3], w) {
			t.Errorf("log line %s: want %s", forced[3], w)
		}
	}
	if !strings.Contains(forced[4], `"token":"all"`) {
		t.Errorf("log line %s: want token all", forced[4])
	}
}

// TestForceReleaseNeedsAuth: with a password, FORCE-RELEASE needs an
// authenticated connection, as every command does.
func TestForceReleaseNeedsAuth(t *testing.T) {
	ts := startServer(t, withRequirePass(testPassword))
	rc := ts.dial()
	rc.send(resp("FORCE-RELEASE", "k"))
	rc.expectErr("NOAUTH")
	rc.send(resp("AUTH", testPassword))
	rc.expect("OK")
	rc.send(resp("FORCE-RELEASE", "k"))
	rc.expect(int64(0))
}

// TestForceReleaseEvent: subscribers see a forced event, with the lease's
// token and owner, and then the waiter's grant.
func TestForceReleaseEvent(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	sub := ts.dial()
	sub.send("SUBSCRIBE __lock__:k\r\n")
	if got := nextMessage(t, sub); !slices.Equal(got, []any{"subscribe", "__lock__:k", int64(1)}) {
		t.Fatalf("subscribe reply %#v", got)
	}
	tok := do(t, rdb, "ACQUIRE", "k", 60000, "OWNER", "w 1").Token()
	do(t, rdb, "FORCE-RELEASE", "k").Is(1)
	for _, want := range []string{fmt.Sprintf("acquired %d w 1", tok), fmt.Sprintf("forced %d w 1", tok)} {
		if got := nextMessage(t, sub); !slices.Equal(got, []any{"message", "__lock__:k", want}) {
			t.Fatalf("got %#v, want message %q", got, want)
		}
	}
}

// TestForceReleaseRedisCli: redis-cli sends it and shows the count.
func TestForceReleaseRedisCli(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	do(t, rdb, "ACQUIRE", "rw", 60000, "SHARED").Token()
	do(t, rdb, "ACQUIRE", "rw", 60000, "SHARED").Token()
	host, port := ts.hostPort()
	res := runTool(t, "", redisTool(t, "redis-cli"), "-h", host, "-p", port, "FORCE-RELEASE", "rw")
	if res.exit != 0 || strings.TrimSpace(res.stdout) != "2" {
		t.Fatalf("redis-cli FORCE-RELEASE rw: %+v, want 2", res)
	}
	res = runTool(t, "", redisTool(t, "redis-cli"), "-h", host, "-p", port, "--no-raw", "FORCE-RELEASE", "rw")
	if strings.TrimSpace(res.stdout) != "(integer) 0" {
		t.Fatalf("redis-cli --no-raw FORCE-RELEASE rw: %+v, want (integer) 0", res)
	}
}

// TestPersistForceRelease: a forced release, of a lease and of a lock-delay,
// survives a restart, and tokens after it stay above every earlier one.
func TestPersistForceRelease(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	rdb := p.rdb
	held := do(t, rdb, "ACQUIRE", "held", 60000).Token()
	kept := do(t, rdb, "ACQUIRE", "kept", 60000).Token()
	do(t, rdb, "CREATE", "victim", "LOCKDELAY", 86400000).Is(1)
	victim := do(t, rdb, "ACQUIRE", "victim", 50).Token()
	testutil.Eventually(t, 10*time.Second, "victim's lease to expire into its lock-delay", func() bool {
		return status(t, rdb, "victim")["state"] == "delayed"
	})
	do(t, rdb, "FORCE-RELEASE", "held", held).Is(1)
	do(t, rdb, "FORCE-RELEASE", "victim").Is(1)

	p = p.restart()
	rdb = p.rdb
	do(t, rdb, "VERIFY", "held", held).Is(0)
	do(t, rdb, "VERIFY", "kept", kept).Is(1)
	if st := status(t, rdb, "held"); st != nil {
		t.Errorf("STATUS held after restart: %v, want an unknown lock", st)
	}
	floor := max(held, kept, victim)
	for _, k := range []string{"held", "victim"} {
		if tok := do(t, rdb, "ACQUIRE", k, 60000).Token(); tok <= floor {
			t.Errorf("ACQUIRE %s after restart: token %d, want above %d", k, tok, floor)
		}
	}
}
