package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/servertest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/persist"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Restarts against the in-process server: a server on a data directory is
// closed and a new one started on the same directory, as a clean restart
// of the binary would. Crashes (kill -9) are tested with the binary, in
// package command (crash_test.go).

// persistServer is a server on a data directory, stopped by stop (Close)
// and started again on the same directory by startPersist.
type persistServer struct {
	t    testing.TB
	srv  *Server
	addr string
	rdb  *redis.Client
	run  *servertest.Running
}

// persistConfig is startServer's configuration (including the transport
// servertest.IOLoopsEnv asks for) on the data directory dir, fsync always.
// The token sequence starts at 1 in every run, not at the boot-epoch
// token: only the data directory keeps a restarted server's tokens above the
// earlier run's, so the tests see it do so.
func persistConfig(t testing.TB, dir string, opts ...option) Config {
	t.Helper()
	onDir := func(c *Config) {
		c.Locker.FirstToken = 1
		c.Persist.Dir = dir
		c.Persist.Fsync = persist.FsyncAlways
	}
	return testConfig(t, append([]option{onDir}, opts...)...)
}

func persistGrace(d time.Duration) option {
	return func(c *Config) { c.Persist.RestartGrace = d }
}

func persistFsync(p persist.Policy) option { return func(c *Config) { c.Persist.Fsync = p } }

// startPersist starts a server on dir; the test's cleanup stops it if the
// test did not.
func startPersist(t testing.TB, dir string, opts ...option) *persistServer {
	t.Helper()
	srv, err := New(persistConfig(t, dir, opts...), zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatal(err)
	}
	run := servertest.Start(t, srv, ErrServerClosed)
	rdb := run.Client(func(o *redis.Options) { o.MaxRetries = -1 })
	return &persistServer{t: t, srv: srv, addr: run.Addr, rdb: rdb, run: run}
}

// stop closes the server, as a clean shutdown does, and waits for Serve.
func (p *persistServer) stop() {
	if err := p.run.Close(); err != nil {
		p.t.Error(err)
	}
}

// restart stops p and starts a new server on the same directory.
func (p *persistServer) restart(opts ...option) *persistServer {
	p.t.Helper()
	p.stop()
	return startPersist(p.t, p.srv.cfg.Persist.Dir, opts...)
}

// persistTokenFloor tracks the tokens a test has seen: every token granted after a
// restart must be above every token granted before it (a restart starts
// above the highest reservation on disk, so this holds across locks, not
// only per lock; tokens of one run may coincide across locks).
type persistTokenFloor struct {
	floor uint64 // the highest token granted before the last restart
	max   uint64 // the highest token seen
}

func (m *persistTokenFloor) see(toks ...uint64) {
	for _, t := range toks {
		m.max = max(m.max, t)
	}
}

// restarted is called at a restart: everything seen so far is before it.
func (m *persistTokenFloor) restarted() { m.floor = m.max }

// above asserts that tok, granted after the last restart, is above every
// token granted before it, and sees it.
func (m *persistTokenFloor) above(t testing.TB, what string, tok uint64) uint64 {
	t.Helper()
	if tok <= m.floor {
		t.Errorf("%s: token %d after a restart, want above %d, the highest token granted before", what, tok, m.floor)
	}
	m.see(tok)
	return tok
}

// persistStableFields are STATUS's fields that a restart must keep as
// they are (ttl and delay-left run down meanwhile).
var persistStableFields = []string{"state", "token", "owner", "last-token", "default-ttl", "created", "lock-delay", "waiters", "limit", "mode", "holders"}

// persistStatuses returns the STATUS of each key, nil for an unknown lock.
func persistStatuses(t testing.TB, rdb doer, keys []string) map[string]map[string]string {
	t.Helper()
	out := make(map[string]map[string]string, len(keys))
	for _, k := range keys {
		out[k] = status(t, rdb, k)
	}
	return out
}

// persistWantSame checks that each key's stable STATUS fields are as
// before the restart, and that its ttl did not grow.
func persistWantSame(t testing.TB, before, after map[string]map[string]string) {
	t.Helper()
	for k, b := range before {
		a := after[k]
		if (a == nil) != (b == nil) {
			t.Errorf("STATUS %s: %v after the restart, %v before", k, a, b)
		}
		if a == nil || b == nil {
			continue
		}
		for _, f := range persistStableFields {
			if a[f] != b[f] {
				t.Errorf("STATUS %s %s: %q after the restart, %q before\nbefore: %v\nafter:  %v", k, f, a[f], b[f], b, a)
			}
		}
		if bt, at := persistAtoi(t, b["ttl"]), persistAtoi(t, a["ttl"]); at > bt || (bt > 0) != (at > 0) {
			t.Errorf("STATUS %s ttl: %d after the restart, %d before", k, at, bt)
		}
	}
}

func persistAtoi(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not an integer", s)
	}
	return n
}

// TestPersistRestartKeepsTable takes leases of every kind, releases and
// deletes some, restarts twice, and checks that the table came back as it
// was: holders, tokens, owners, settings, and the token sequence.
func TestPersistRestartKeepsTable(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	rdb := p.rdb
	var seen persistTokenFloor

	do(t, rdb, "CREATE", "sem", "LIMIT", 3).Is(1)
	do(t, rdb, "CREATE", "conf", "TTL", 50000, "LOCKDELAY", 2000).Is(1)
	do(t, rdb, "CREATE", "gone", "TTL", 1000).Is(1)
	do(t, rdb, "CREATE", "idle", "LOCKDELAY", 700).Is(1) // created, never held

	ex := do(t, rdb, "ACQUIRE", "ex", 60000, "OWNER", "alice").Token()
	plain := do(t, rdb, "ACQUIRE", "plain", 60000).Token()
	r1 := do(t, rdb, "ACQUIRE", "rd", 60000, "SHARED", "OWNER", "reader-1").Token()
	r2 := do(t, rdb, "ACQUIRE", "rd", 60000, "SHARED").Token()
	r3 := do(t, rdb, "ACQUIRE", "rd", 60000, "SHARED", "OWNER", "reader-3").Token()
	do(t, rdb, "RELEASE", "rd", r3).Is(1)
	s1 := do(t, rdb, "ACQUIRE", "sem", 60000, "OWNER", "permit-1").Token()
	s2 := do(t, rdb, "ACQUIRE", "sem", 60000).Token()
	m := do(t, rdb, "MACQUIRE", 60000, 3, "m3", "m1", "m2", "OWNER", "batch").tokensOf(3)
	rel := do(t, rdb, "ACQUIRE", "rel", 60000, "OWNER", "gone-soon").Token()
	do(t, rdb, "RELEASE", "rel", rel).Is(1)
	ext := do(t, rdb, "ACQUIRE", "ext", 1000).Token()
	do(t, rdb, "EXTEND", "ext", ext, 60000).Is(1)
	conf := do(t, rdb, "ACQUIRE", "conf").Token() // the lock's default ttl
	mr := do(t, rdb, "MACQUIRE", 60000, 2, "mr1", "mr2").tokensOf(2)
	do(t, rdb, "MRELEASE", "mr1", mr[0], "mr2", mr[1]).Is(2)
	g := do(t, rdb, "ACQUIRE", "gone", 500).Token()
	do(t, rdb, "RELEASE", "gone", g).Is(1)
	do(t, rdb, "DELETE", "gone").Is(1)
	seen.see(ex, plain, r1, r2, r3, s1, s2, rel, ext, conf, g)
	seen.see(m...)
	seen.see(mr...)

	held := map[string][]uint64{
		"ex": {ex}, "plain": {plain}, "rd": {r1, r2}, "sem": {s1, s2},
		"m1": {m[1]}, "m2": {m[2]}, "m3": {m[0]}, "ext": {ext}, "conf": {conf},
	}
	keys := []string{"ex", "plain", "rd", "sem", "m1", "m2", "m3", "ext", "conf", "idle", "rel", "gone", "mr1", "mr2"}
	before := persistStatuses(t, rdb, keys)
	for _, k := range []string{"rel", "gone", "mr1", "mr2"} {
		if before[k] != nil {
			t.Fatalf("STATUS %s before the restart: %v, want an unknown lock", k, before[k])
		}
	}
	wantStatus(t, before["rd"], map[string]string{"mode": "shared", "holders": u(r1) + "/reader-1 " + u(r2) + "/"})
	wantStatus(t, before["sem"], map[string]string{"mode": "permits", "limit": "3", "holders": u(s1) + "/permit-1 " + u(s2) + "/"})

	for round := 1; round <= 2; round++ {
		seen.restarted()
		p = p.restart()
		rdb = p.rdb
		persistWantSame(t, before, persistStatuses(t, rdb, keys))
		for k, toks := range held {
			for _, tok := range toks {
				do(t, rdb, "VERIFY", k, tok).Is(1)
			}
		}
		if ttl := persistAtoi(t, status(t, rdb, "ext")["ttl"]); ttl <= 1000 {
			t.Errorf("round %d: ext ttl %d: the EXTEND to 60000 was lost", round, ttl)
		}
		if ttl := persistAtoi(t, status(t, rdb, "conf")["ttl"]); ttl <= 1000 || ttl > 50000 {
			t.Errorf("round %d: conf ttl %d, want the lock's default ttl 50000", round, ttl)
		}
		do(t, rdb, "VERIFY", "rd", r3).Is(0)
		do(t, rdb, "VERIFY", "rel", rel).Is(0)
		do(t, rdb, "VERIFY", "gone", g).Is(0)
		do(t, rdb, "VERIFY", "mr1", mr[0]).Is(0)
		// CREATE of a lock the restart kept is a no-op.
		do(t, rdb, "CREATE", "sem", "LIMIT", 3).Is(0)
		do(t, rdb, "CREATE", "idle").Is(0)

		// Retries of restored leases by their owners get their tokens back.
		if tok := do(t, rdb, "ACQUIRE", "ex", 60000, "OWNER", "alice").Token(); tok != ex {
			t.Errorf("round %d: owner retry of ex: token %d, want %d", round, tok, ex)
		}
		if tok := do(t, rdb, "ACQUIRE", "rd", 60000, "SHARED", "OWNER", "reader-1").Token(); tok != r1 {
			t.Errorf("round %d: owner retry of reader-1: token %d, want %d", round, tok, r1)
		}
		if tok := do(t, rdb, "ACQUIRE", "sem", 60000, "OWNER", "permit-1").Token(); tok != s1 {
			t.Errorf("round %d: owner retry of permit-1: token %d, want %d", round, tok, s1)
		}
		if toks := do(t, rdb, "MACQUIRE", 60000, 3, "m3", "m1", "m2", "OWNER", "batch").tokensOf(3); fmt.Sprint(toks) != fmt.Sprint(m) {
			t.Errorf("round %d: owner retry of MACQUIRE: tokens %d, want %d", round, toks, m)
		}
		// The restored leases still exclude others.
		do(t, rdb, "ACQUIRE", "ex", 60000, "OWNER", "bob").Nil()
		do(t, rdb, "ACQUIRE", "plain", 60000).Nil()
		do(t, rdb, "ACQUIRE", "rd", 60000).Nil() // a writer, while readers hold it
		do(t, rdb, "DELETE", "conf").Err("INUSE")
		if round == 1 {
			// The third permit is free, the fourth is not: the restored
			// permits count against the limit.
			s3 := seen.above(t, "sem's third permit", do(t, rdb, "ACQUIRE", "sem", 60000, "OWNER", "permit-3").Token())
			held["sem"] = append(held["sem"], s3)
			do(t, rdb, "ACQUIRE", "sem", 60000).Nil()
			r4 := seen.above(t, "a new reader of rd", do(t, rdb, "ACQUIRE", "rd", 60000, "SHARED", "OWNER", "reader-4").Token())
			held["rd"] = append(held["rd"], r4)
		} else {
			do(t, rdb, "ACQUIRE", "sem", 60000).Nil()
		}
		// New grants, on new keys and on the old ones, are above every
		// token granted before.
		seen.above(t, "a new lock", do(t, rdb, "ACQUIRE", fmt.Sprintf("new-%d", round), 60000).Token())
		tok := seen.above(t, "rel again", do(t, rdb, "ACQUIRE", "rel", 60000).Token())
		do(t, rdb, "RELEASE", "rel", tok).Is(1)
		do(t, rdb, "CREATE", "gone").Is(1)
		tok = seen.above(t, "gone again", do(t, rdb, "ACQUIRE", "gone", 60000).Token())
		do(t, rdb, "RELEASE", "gone", tok).Is(1)
		do(t, rdb, "DELETE", "gone").Is(1)
		toks := do(t, rdb, "MACQUIRE", 60000, 2, "mr1", "mr2").tokensOf(2)
		seen.above(t, "mr1 again", toks[0])
		seen.above(t, "mr2 again", toks[1])
		do(t, rdb, "MRELEASE", "mr1", toks[0], "mr2", toks[1]).Is(2)
		before = persistStatuses(t, rdb, keys)
	}
}

// TestPersistRestartExpiresLeases: a lease whose deadline passes while the
// server is down is expired at start; into its lock-delay if it has one.
func TestPersistRestartExpiresLeases(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	rdb := p.rdb
	do(t, rdb, "CREATE", "delayed", "LOCKDELAY", 30000).Is(1)
	do(t, rdb, "CREATE", "rdelay", "LOCKDELAY", 30000).Is(1)
	do(t, rdb, "CREATE", "sem", "LIMIT", 2).Is(1)
	do(t, rdb, "CREATE", "early", "LOCKDELAY", 30000).Is(1)

	// early expires while the server runs (expiry is not logged) and is
	// in its lock-delay when the server stops.
	early := do(t, rdb, "ACQUIRE", "early", 100).Token()
	testutil.Eventually(t, 10*time.Second, "early's lease to expire into its lock-delay", func() bool {
		return status(t, rdb, "early")["state"] == "delayed"
	})

	const ttl = 300 * time.Millisecond
	short := do(t, rdb, "ACQUIRE", "short", ttl.Milliseconds()).Token()
	delayed := do(t, rdb, "ACQUIRE", "delayed", ttl.Milliseconds(), "OWNER", "o").Token()
	rshort := do(t, rdb, "ACQUIRE", "rdelay", ttl.Milliseconds(), "SHARED").Token()
	sshort := do(t, rdb, "ACQUIRE", "sem", ttl.Milliseconds()).Token()
	slong := do(t, rdb, "ACQUIRE", "sem", 60000).Token()
	rd := do(t, rdb, "ACQUIRE", "rd", ttl.Milliseconds(), "SHARED").Token()
	long := do(t, rdb, "ACQUIRE", "long", 60000).Token()
	granted := time.Now() // every short lease ends before granted+ttl
	p.stop()
	// Wait out the deadlines with the server down.
	for time.Since(granted) < ttl+20*time.Millisecond {
		time.Sleep(10 * time.Millisecond)
	}

	p = startPersist(t, dir)
	rdb = p.rdb
	do(t, rdb, "VERIFY", "short", short).Is(0)
	if st := status(t, rdb, "short"); st != nil {
		t.Errorf("STATUS short: %v, want an unknown lock (its only lease expired while the server was down)", st)
	}
	do(t, rdb, "VERIFY", "rd", rd).Is(0)
	if st := status(t, rdb, "rd"); st != nil {
		t.Errorf("STATUS rd: %v, want an unknown lock", st)
	}
	do(t, rdb, "VERIFY", "long", long).Is(1)
	// The lease expired into its lock-delay, which runs from its deadline.
	do(t, rdb, "VERIFY", "delayed", delayed).Is(0)
	st := status(t, rdb, "delayed")
	wantStatus(t, st, map[string]string{"state": "delayed", "token": "0", "last-token": u(delayed), "mode": ""})
	if left := persistAtoi(t, st["delay-left"]); left <= 0 || left > 30000 {
		t.Errorf("delayed: delay-left %d, want in (0, 30000]", left)
	}
	do(t, rdb, "ACQUIRE", "delayed", 60000, "OWNER", "o").Nil()
	do(t, rdb, "DELETE", "delayed").Err("INUSE")
	// An expired reader in its lock-delay keeps writers out, not readers.
	do(t, rdb, "VERIFY", "rdelay", rshort).Is(0)
	wantStatus(t, status(t, rdb, "rdelay"), map[string]string{"state": "delayed"})
	do(t, rdb, "ACQUIRE", "rdelay", 60000).Nil()
	r := do(t, rdb, "ACQUIRE", "rdelay", 60000, "SHARED").Token()
	if r <= rshort {
		t.Errorf("rdelay: reader token %d, want above %d", r, rshort)
	}
	// The expired permit freed its place (no lock-delay on sem), the live
	// one did not.
	do(t, rdb, "VERIFY", "sem", sshort).Is(0)
	do(t, rdb, "VERIFY", "sem", slong).Is(1)
	wantStatus(t, status(t, rdb, "sem"), map[string]string{"holders": u(slong) + "/"})
	s := do(t, rdb, "ACQUIRE", "sem", 60000).Token()
	do(t, rdb, "ACQUIRE", "sem", 60000).Nil()
	if s <= slong {
		t.Errorf("sem: token %d, want above %d", s, slong)
	}
	// The lease that expired before the stop is still in its lock-delay.
	do(t, rdb, "VERIFY", "early", early).Is(0)
	wantStatus(t, status(t, rdb, "early"), map[string]string{"state": "delayed", "last-token": u(early)})
	do(t, rdb, "ACQUIRE", "early", 60000).Nil()
	// The freed lock takes a new lease, above the expired one.
	if tok := do(t, rdb, "ACQUIRE", "short", 60000).Token(); tok <= max(short, long, delayed) {
		t.Errorf("short: token %d after the restart, want above %d", tok, max(short, long, delayed))
	}
}

// TestPersistRestartGrace: with a restart grace, a lease that has less
// left at start runs at least the grace after the start; longer leases and
// expired ones are untouched.
func TestPersistRestartGrace(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	rdb := p.rdb
	do(t, rdb, "CREATE", "sem", "LIMIT", 2).Is(1)
	start := time.Now()
	brief := do(t, rdb, "ACQUIRE", "brief", 2000, "OWNER", "o").Token()
	reader := do(t, rdb, "ACQUIRE", "rd", 2000, "SHARED").Token()
	permit := do(t, rdb, "ACQUIRE", "sem", 2000).Token()
	granted := time.Now() // the 2s leases end before granted+2s
	long := do(t, rdb, "ACQUIRE", "long", 60000).Token()
	gone := do(t, rdb, "ACQUIRE", "gone", 50).Token()
	goneBy := time.Now().Add(50 * time.Millisecond)
	p.stop()
	for time.Now().Before(goneBy.Add(20 * time.Millisecond)) {
		time.Sleep(5 * time.Millisecond) // gone's deadline passes while down
	}

	const grace = 10 * time.Second
	restarted := time.Now() // before the start: the grace runs from a moment after this
	p = startPersist(t, dir, persistGrace(grace))
	rdb = p.rdb
	if time.Since(start) >= 2*time.Second {
		t.Fatalf("the restart took %s, longer than the 2s leases: the grace cannot be told from their ttl", time.Since(start))
	}
	graceLeft := func() int64 { return (grace - time.Since(restarted)).Milliseconds() }
	for _, key := range []string{"brief", "rd", "sem"} {
		hs := holders(t, rdb, key)
		if len(hs) != 1 {
			t.Fatalf("%s holders %v, want one", key, hs)
		}
		if ttl := persistAtoi(t, hs[0]["ttl"]); ttl < graceLeft() || ttl > grace.Milliseconds() {
			t.Errorf("%s: ttl %d ms after a restart with a %s grace, want about %d", key, ttl, grace, graceLeft())
		}
	}
	if ttl := persistAtoi(t, status(t, rdb, "long")["ttl"]); ttl <= grace.Milliseconds() || ttl > 60000 {
		t.Errorf("long: ttl %d, want its own (above the grace, at most 60000)", ttl)
	}
	do(t, rdb, "VERIFY", "gone", gone).Is(0) // expired while down: the grace does not revive it
	// Past their own deadlines, within the grace, they still hold.
	for time.Since(granted) < 2100*time.Millisecond {
		time.Sleep(10 * time.Millisecond)
	}
	do(t, rdb, "VERIFY", "brief", brief).Is(1)
	do(t, rdb, "VERIFY", "rd", reader).Is(1)
	do(t, rdb, "VERIFY", "sem", permit).Is(1)
	do(t, rdb, "VERIFY", "long", long).Is(1)
	if tok := do(t, rdb, "ACQUIRE", "brief", 60000, "OWNER", "o").Token(); tok != brief {
		t.Errorf("owner retry of brief: token %d, want %d", tok, brief)
	}
}

// TestPersistRestartWithoutGrace: with no grace a lease keeps its own
// deadline across a restart, and runs out on it.
func TestPersistRestartWithoutGrace(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	tok := do(t, p.rdb, "ACQUIRE", "brief", 1000).Token()
	acked := time.Now()
	p = p.restart()
	if ttl := persistAtoi(t, status(t, p.rdb, "brief")["ttl"]); ttl > 1000 {
		t.Errorf("ttl %d after a restart, want at most the 1000 left before it", ttl)
	}
	testutil.Eventually(t, 10*time.Second, "brief's lease to expire", func() bool {
		return do(t, p.rdb, "VERIFY", "brief", tok).Int() == 0
	})
	if d := time.Since(acked); d > 1500*time.Millisecond {
		t.Errorf("a 1s lease expired %s after its grant, across a restart", d)
	}
}

// TestPersistCompactionRestart compacts the log (snapshot, new log, old
// files removed) while clients change the table, then restarts: the table
// comes back as it was, from the snapshot and the log after it.
func TestPersistCompactionRestart(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	do(t, p.rdb, "CREATE", "sem", "LIMIT", 4).Is(1)
	do(t, p.rdb, "CREATE", "kept", "TTL", 40000, "LOCKDELAY", 1234).Is(1)
	keys := []string{"sem", "kept"}
	for k := range 16 {
		keys = append(keys, fmt.Sprintf("k%d", k))
	}

	var seen persistTokenFloor
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := keys[rng.IntN(len(keys))]
				args := []any{"ACQUIRE", key, 60000}
				if key != "sem" && rng.IntN(3) == 0 {
					args = append(args, "SHARED")
				}
				c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				tok, err := p.rdb.Do(c, args...).Uint64()
				switch {
				case errors.Is(err, redis.Nil): // not free
				case err != nil:
					t.Errorf("%q: %v", args, err)
				default:
					mu.Lock()
					seen.see(tok)
					mu.Unlock()
					var n int64
					if rng.IntN(2) == 0 {
						n, err = p.rdb.Do(c, "RELEASE", key, tok).Int64()
					} else {
						n, err = p.rdb.Do(c, "EXTEND", key, tok, 50000).Int64()
					}
					if n != 1 || err != nil {
						t.Errorf("after %q = %d: RELEASE or EXTEND = %d, %v", args, tok, n, err)
					}
				}
				cancel()
				if t.Failed() {
					return
				}
			}
		}()
	}
	for range 5 {
		time.Sleep(20 * time.Millisecond)
		if err := p.srv.store.Compact(); err != nil {
			t.Fatalf("Compact: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	var snaps, logs []string
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch {
		case strings.HasPrefix(e.Name(), "snap-"):
			snaps = append(snaps, e.Name())
		case strings.HasPrefix(e.Name(), "log-"):
			logs = append(logs, e.Name())
		}
	}
	if len(snaps) != 1 || len(logs) != 1 {
		t.Errorf("after compaction the directory holds snapshots %q and logs %q, want one of each", snaps, logs)
	}
	before := persistStatuses(t, p.rdb, keys)
	seen.restarted()
	p = p.restart()
	persistWantSame(t, before, persistStatuses(t, p.rdb, keys))
	for k, st := range before {
		if st == nil {
			continue
		}
		for _, h := range strings.Fields(st["holders"]) {
			tok, _, _ := strings.Cut(h, "/")
			do(t, p.rdb, "VERIFY", k, tok).Is(1)
		}
	}
	seen.above(t, "a grant after compaction and restart", do(t, p.rdb, "ACQUIRE", "fresh", 60000).Token())
	// And once more, from a log that has a snapshot before it.
	before = persistStatuses(t, p.rdb, append(keys, "fresh"))
	p = p.restart()
	persistWantSame(t, before, persistStatuses(t, p.rdb, append(keys, "fresh")))
}

// TestPersistDirectoryLocked: one server per data directory.
func TestPersistDirectoryLocked(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	if srv, err := New(persistConfig(t, dir), zerolog.Nop()); err == nil {
		srv.Close()
		t.Fatal("a second server opened a data directory in use")
	}
	do(t, p.rdb, "PING").Str("PONG")
}

// TestPersistFsyncPoliciesKeepGrantsOnRestart: a clean restart keeps the
// acknowledged grants under every policy, and tokens keep rising.
func TestPersistFsyncPoliciesKeepGrantsOnRestart(t *testing.T) {
	for _, pol := range []persist.Policy{persist.FsyncAlways, persist.FsyncEverySec, persist.FsyncNo} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			p := startPersist(t, dir, persistFsync(pol))
			var seen persistTokenFloor
			toks := map[string]uint64{}
			for k := range 20 {
				key := fmt.Sprintf("k%d", k)
				toks[key] = do(t, p.rdb, "ACQUIRE", key, 60000).Token()
				seen.see(toks[key])
			}
			seen.restarted()
			p = p.restart(persistFsync(pol))
			for key, tok := range toks {
				do(t, p.rdb, "VERIFY", key, tok).Is(1)
				do(t, p.rdb, "RELEASE", key, tok).Is(1)
				seen.above(t, key, do(t, p.rdb, "ACQUIRE", key, 60000).Token())
			}
		})
	}
}

// TestPersistRestoreFailureFailsStart: a data directory holding a lock
// whose name the new configuration refuses (here: longer than a smaller
// --max-key-len) makes locker.Table.Restore fail inside persist.Store.Load.
// The start must fail (or go on), not hang, and must leave the directory
// free. (It hung until 33f57c8: Load had set the store's table without
// starting its background goroutine, and the Close in server.New waited for
// that goroutine for ever, holding the directory's lock.)
func TestPersistRestoreFailureFailsStart(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	do(t, p.rdb, "ACQUIRE", "a-rather-long-lock-name", 60000).Token()
	p.stop()

	type result struct {
		srv *Server
		err error
	}
	done := make(chan result, 1)
	go func() {
		srv, err := New(persistConfig(t, dir, func(c *Config) { c.Locker.MaxKeyLen = 8 }), zerolog.Nop())
		done <- result{srv, err}
	}()
	select {
	case r := <-done:
		t.Logf("New: %v", r.err)
		if r.err == nil {
			r.srv.Close()
		} else if !strings.Contains(r.err.Error(), "a-rather-long-lock-name") {
			t.Errorf("New: %v, want an error naming the lock", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("server.New did not return within 5s on a data directory with a lock name longer than --max-key-len")
	}
	// The directory is free again for a server with the old settings.
	p = startPersist(t, dir)
	do(t, p.rdb, "STATUS", "a-rather-long-lock-name").Slice()
}

// TestPersistRestartWithOtherShards: the table is rebuilt by key, not by
// shard, so a restart with another shard count keeps it, and the token
// sequence of every new shard starts above the old run's.
func TestPersistRestartWithOtherShards(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	var seen persistTokenFloor
	toks := map[string]uint64{}
	for k := range 32 {
		key := fmt.Sprintf("k%d", k)
		toks[key] = do(t, p.rdb, "ACQUIRE", key, 60000, "OWNER", key).Token()
		seen.see(toks[key])
	}
	for _, shards := range []int{2, 32} {
		seen.restarted()
		p = p.restart(func(c *Config) { c.Locker.Shards = shards })
		for key, tok := range toks {
			do(t, p.rdb, "VERIFY", key, tok).Is(1)
			if got := do(t, p.rdb, "ACQUIRE", key, 60000, "OWNER", key).Token(); got != tok {
				t.Errorf("%d shards: owner retry of %s: token %d, want %d", shards, key, got, tok)
			}
			fresh := fmt.Sprintf("new-%d-%s", shards, key)
			seen.above(t, fmt.Sprintf("%d shards: %s", shards, fresh), do(t, p.rdb, "ACQUIRE", fresh, 60000).Token())
		}
	}
}

// TestPersistRestartKeepsQueuedGrant: a lease handed from the WAIT queue
// (by another client's RELEASE) is logged as the grant it is.
func TestPersistRestartKeepsQueuedGrant(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	first := do(t, p.rdb, "ACQUIRE", "q", 60000).Token()
	waiter := redis.NewClient(&redis.Options{Addr: p.addr, ReadTimeout: 10 * time.Second, MaxRetries: -1})
	defer waiter.Close()
	got := make(chan reply, 1)
	go func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, err := waiter.Do(c, "ACQUIRE", "q", 60000, "OWNER", "waiter", "WAIT", 5000).Result()
		got <- reply{t: t, args: []any{"ACQUIRE q WAIT"}, val: v, err: err}
	}()
	testutil.Eventually(t, 10*time.Second, "the waiter to queue", func() bool { return status(t, p.rdb, "q")["waiters"] == "1" })
	do(t, p.rdb, "RELEASE", "q", first).Is(1)
	second := (<-got).Token()
	if second <= first {
		t.Fatalf("queued grant %d, want above %d", second, first)
	}
	p = p.restart()
	do(t, p.rdb, "VERIFY", "q", second).Is(1)
	wantStatus(t, status(t, p.rdb, "q"), map[string]string{"state": "held", "token": u(second), "owner": "waiter", "waiters": "0"})
}

// A log missing from the directory is damage (docs/persistence.md,
// "Recovery": "a missing log ... stops the start with an error that names
// the file"); starting without it would silently forget the leases it held.
// The cases: which of three logs (three runs) goes missing.
type missingLogCase struct {
	name    string
	compact bool // compact in the first run, so the directory has a snapshot
	missing func(logs []string) string
}

// TestPersistMissingLogRefusesToStart: a gap between logs.
func TestPersistMissingLogRefusesToStart(t *testing.T) {
	testMissingLog(t, []missingLogCase{
		{"middle log", false, func(logs []string) string { return logs[1] }},
		{"middle log after a snapshot", true, func(logs []string) string { return logs[1] }},
	})
}

// TestPersistMissingFirstLogRefusesToStart: the first log to replay must be
// there too, not only consecutive with the next: log 1 when the directory
// has no snapshot, log n after snapshot n (compaction starts log n before it
// writes snapshot n). Once, a missing first log went unnoticed and the
// server started without the leases and settings it held.
func TestPersistMissingFirstLogRefusesToStart(t *testing.T) {
	testMissingLog(t, []missingLogCase{
		{"first log", false, func(logs []string) string { return logs[0] }},
		{"log after the snapshot", true, func(logs []string) string { return logs[0] }},
	})
}

func testMissingLog(t *testing.T, cases []missingLogCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := startPersist(t, dir)
			if tc.compact {
				do(t, p.rdb, "ACQUIRE", "before-snapshot", 60000).Token()
				if err := p.srv.store.Compact(); err != nil {
					t.Fatal(err)
				}
			}
			toks := map[string]uint64{}
			for run, key := range []string{"one", "two", "three"} {
				if run > 0 {
					p = p.restart()
				}
				toks[key] = do(t, p.rdb, "ACQUIRE", key, 60000).Token()
			}
			p.stop()
			logs, err := filepath.Glob(filepath.Join(dir, "log-*.lh"))
			if err != nil || len(logs) != 3 {
				t.Fatalf("logs %q, %v; want three", logs, err)
			}
			missing := tc.missing(logs)
			if err := os.Remove(missing); err != nil {
				t.Fatal(err)
			}
			srv, err := New(persistConfig(t, dir), zerolog.Nop())
			if err == nil {
				var lost []string
				for key, tok := range toks {
					if !srv.Table().Verify([]byte(key), tok) {
						lost = append(lost, key)
					}
				}
				srv.Close()
				t.Fatalf("the server started on a directory missing %s, silently without the leases %q it held",
					filepath.Base(missing), lost)
			}
			if !strings.Contains(err.Error(), filepath.Base(missing)) || !strings.Contains(err.Error(), "--repair") {
				t.Errorf("New: %v; want an error naming %s and --repair", err, missing)
			}
		})
	}
}

// persistFsyncs reads INFO persistence's fsync count.
func persistFsyncs(t testing.TB, rdb doer) int64 {
	t.Helper()
	for _, line := range strings.Split(do(t, rdb, "INFO", "persistence").Text(), "\r\n") {
		if v, ok := strings.CutPrefix(line, "fsyncs:"); ok {
			return persistAtoi(t, v)
		}
	}
	t.Fatal("INFO persistence has no fsyncs line")
	return 0
}

// TestPersistGroupCommit: under fsync always, the grants of a pipeline
// share their commit rather than each paying an fsync of its own
// (docs/persistence.md: "concurrent grants share one write and ... one
// fsync"), and every one of them was fsynced before its reply.
func TestPersistGroupCommit(t *testing.T) {
	p := startPersist(t, t.TempDir())
	do(t, p.rdb, "ACQUIRE", "warm-up", 60000).Token() // the first token reservation
	before := persistFsyncs(t, p.rdb)
	const n = 200
	c := ctx(t)
	pipe := p.rdb.Pipeline()
	cmds := make([]*redis.Cmd, n)
	for i := range cmds {
		cmds[i] = pipe.Do(c, "ACQUIRE", fmt.Sprintf("k%d", i), 60000)
	}
	if _, err := pipe.Exec(c); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if tok, err := cmd.Uint64(); err != nil || tok == 0 {
			t.Fatalf("ACQUIRE k%d = %d, %v", i, tok, err)
		}
	}
	fsyncs := persistFsyncs(t, p.rdb) - before
	t.Logf("%d pipelined grants, %d fsyncs", n, fsyncs)
	if fsyncs < 1 || fsyncs > n/10 {
		t.Errorf("%d pipelined grants took %d fsyncs; want at least one, and far fewer than one each", n, fsyncs)
	}
}
