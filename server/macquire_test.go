package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// MACQUIRE and MRELEASE over the wire; helpers in sharing_test.go.

// tokensOf asserts MACQUIRE's granted reply, n tokens, and returns them.
func (r reply) tokensOf(n int) []uint64 {
	r.t.Helper()
	s := r.Slice()
	if len(s) != n {
		r.t.Fatalf("want %d tokens: %s", n, r)
	}
	toks := make([]uint64, n)
	for j, v := range s {
		tok, ok := v.(int64)
		if !ok || tok <= 0 {
			r.t.Fatalf("element %d is not a token: %s", j, r)
		}
		toks[j] = uint64(tok)
	}
	return toks
}

// rawTokens reads MACQUIRE's granted reply off a raw connection.
func rawTokens(t *testing.T, rc *rawConn, n int) []uint64 {
	t.Helper()
	v := rc.reply()
	s, ok := v.([]any)
	if !ok || len(s) != n {
		t.Fatalf("want %d tokens, got %#v", n, v)
	}
	toks := make([]uint64, n)
	for j, e := range s {
		tok, ok := e.(int64)
		if !ok || tok <= 0 {
			t.Fatalf("element %d of %#v is not a token", j, v)
		}
		toks[j] = uint64(tok)
	}
	return toks
}

// wantHeldBy checks that each key's live lease is exactly the token given
// for it: STATUS names it and VERIFY accepts it.
func wantHeldBy(t *testing.T, rdb doer, keys []string, toks []uint64) {
	t.Helper()
	for j, k := range keys {
		wantStatus(t, status(t, rdb, k), map[string]string{"state": "held", "token": u(toks[j]), "mode": "exclusive"})
		do(t, rdb, "VERIFY", k, toks[j]).Is(1)
	}
}

func TestMAcquire(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()

	// Tokens come back in the order the keys were named, not sorted.
	keys := []string{"zeta", "mid", "alpha", "beta"}
	toks := do(t, rdb, "MACQUIRE", 30000, 4, "zeta", "mid", "alpha", "beta").tokensOf(4)
	wantHeldBy(t, rdb, keys, toks)
	for _, k := range keys {
		if ttl, _ := strconv.Atoi(status(t, rdb, k)["ttl"]); ttl > 30000 || ttl < 25000 {
			t.Errorf("%s ttl %d, want the 30000 asked for", k, ttl)
		}
		// Held: a second MACQUIRE of any of them is refused.
		do(t, rdb, "MACQUIRE", 1000, 2, "fresh", k).Nil()
		do(t, rdb, "ACQUIRE", k, 1000).Nil()
	}
	do(t, rdb, "STATUS", "fresh").Nil() // the refused attempts left nothing

	// MRELEASE counts what it ended; wrong and stale tokens end nothing.
	do(t, rdb, "MRELEASE", "zeta", toks[0], "mid", toks[1]+1000, "nope", 1).Is(1)
	do(t, rdb, "MRELEASE", "zeta", toks[0]).Is(0)
	do(t, rdb, "VERIFY", "mid", toks[1]).Is(1)
	do(t, rdb, "mrelease", "mid", toks[1], "alpha", toks[2], "beta", toks[3]).Is(3)
	for _, k := range keys {
		do(t, rdb, "STATUS", k).Nil()
	}

	// An owner's retry gets the same tokens back, renewed.
	o := do(t, rdb, "MACQUIRE", 1000, 2, "p", "q", "OWNER", "job").tokensOf(2)
	if again := do(t, rdb, "MACQUIRE", 5000, 2, "q", "p", "OWNER", "job").tokensOf(2); again[0] != o[1] || again[1] != o[0] {
		t.Fatalf("owner's retry got %v, want %v reversed", again, o)
	}
	// Renewed to the 5000 asked for, not left at 1000: the real clock has
	// moved on by the time STATUS runs, so not exactly 5000.
	st := status(t, rdb, "p")
	wantStatus(t, st, map[string]string{"owner": "job"})
	if ttl, _ := strconv.Atoi(st["ttl"]); ttl > 5000 || ttl < 4000 {
		t.Errorf("p's ttl %d after the owner's retry, want the 5000 asked for", ttl)
	}
	do(t, rdb, "MACQUIRE", 1000, 1, "p", "OWNER", "other").Nil()

	// SHARED: read leases on every key, joining other readers.
	r := do(t, rdb, "ACQUIRE", "r1", 30000, "SHARED").Token()
	sh := do(t, rdb, "MACQUIRE", 30000, 2, "r1", "r2", "SHARED").tokensOf(2)
	wantStatus(t, status(t, rdb, "r1"), map[string]string{"mode": "shared", "holders": fmt.Sprintf("%d/ %d/", r, sh[0])})
	wantStatus(t, status(t, rdb, "r2"), map[string]string{"mode": "shared", "holders": u(sh[1]) + "/"})
	do(t, rdb, "MACQUIRE", 30000, 3, "r1", "other", "").Err("ERR empty key")
	do(t, rdb, "STATUS", "other").Nil()
	do(t, rdb, "MACQUIRE", 30000, 2, "r2", "other").Nil() // exclusive: readers hold r2

	// A semaphore's permits, exclusively; SHARED is refused for it.
	do(t, rdb, "CREATE", "sem", "LIMIT", 2).Is(1)
	m := do(t, rdb, "MACQUIRE", 30000, 2, "sem", "s2").tokensOf(2)
	wantStatus(t, status(t, rdb, "sem"), map[string]string{"mode": "permits", "holders": u(m[0]) + "/"})
	do(t, rdb, "MACQUIRE", 30000, 2, "s3", "sem", "SHARED").Err(`ERR a semaphore has no shared leases "sem"`)
	do(t, rdb, "STATUS", "s3").Nil()

	// The largest numkeys: 1000 keys at once, all released together.
	args := []any{"MACQUIRE", 30000, 1000}
	rel := []any{"MRELEASE"}
	for j := range 1000 {
		args = append(args, fmt.Sprintf("many:%d", j))
	}
	for j, tok := range do(t, rdb, args...).tokensOf(1000) {
		rel = append(rel, fmt.Sprintf("many:%d", j), tok)
	}
	do(t, rdb, rel...).Is(1000)
	do(t, rdb, "STATUS", "many:999").Nil()
}

// TestMAcquireRefusedLeavesNothing: the atomic attempt grants every key or
// none; a refused one neither holds nor counts a token on the free keys.
func TestMAcquireRefusedLeavesNothing(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	do(t, rdb, "CREATE", "made", "TTL", 5000).Is(1)
	pre := do(t, rdb, "ACQUIRE", "made", 100).Token()
	do(t, rdb, "RELEASE", "made", pre).Is(1)
	held := do(t, rdb, "ACQUIRE", "held", 30000).Token()

	do(t, rdb, "MACQUIRE", 30000, 4, "a", "made", "held", "z").Nil()
	do(t, rdb, "MACQUIRE", 30000, 4, "z", "held", "made", "a", "SHARED", "OWNER", "x").Nil()
	do(t, rdb, "STATUS", "a").Nil()
	do(t, rdb, "STATUS", "z").Nil()
	// No lease was granted on the free lock and taken back: its last token
	// is still the one before.
	wantStatus(t, status(t, rdb, "made"), map[string]string{"state": "free", "last-token": u(pre), "holders": ""})
	wantStatus(t, status(t, rdb, "held"), map[string]string{"token": u(held), "holders": u(held) + "/", "waiters": "0"})

	// A free reader's slot is not taken over a queued writer's head.
	rd := do(t, rdb, "ACQUIRE", "rw", 30000, "SHARED").Token()
	w := ts.dial()
	w.send("ACQUIRE rw 30000 WAIT 20000\r\n")
	waitForWaiters(t, ts, "rw", 1)
	do(t, rdb, "MACQUIRE", 30000, 2, "b", "rw", "SHARED").Nil()
	do(t, rdb, "STATUS", "b").Nil()
	wantStatus(t, status(t, rdb, "rw"), map[string]string{"mode": "shared", "waiters": "1", "holders": u(rd) + "/"})
	if got := ts.Table().Stats().Held; got != 2 {
		t.Fatalf("%d leases held after the refused MACQUIREs, want 2", got)
	}
}

func TestMAcquireErrors(t *testing.T) {
	ts := startServer(t)
	cn := stickyConn(t, ts.client())
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"MACQUIRE", 1000, 2, "a", "a"}, `ERR a key is named more than once "a"`},
		{[]any{"MACQUIRE", 1000, 3, "a", "b", "a", "WAIT", 1000}, `ERR a key is named more than once "a"`},
		{[]any{"MACQUIRE", 1000, 3, "b", "a", "b", "SHARED"}, `ERR a key is named more than once "b"`},
		{[]any{"MACQUIRE", 1000, 0, "a"}, "ERR numkeys must be between 1 and 1000"},
		{[]any{"MACQUIRE", 1000, -1, "a"}, "ERR numkeys must be between 1 and 1000"},
		{[]any{"MACQUIRE", 1000, 1001, "a"}, "ERR numkeys must be between 1 and 1000"},
		{[]any{"MACQUIRE", 1000, "x", "a"}, "ERR value is not an integer or out of range"},
		{[]any{"MACQUIRE", 1000, 3, "a", "b"}, "ERR syntax error"},
		{[]any{"MACQUIRE", 1000, 1, "a", "OWNER"}, "ERR syntax error"},
		{[]any{"MACQUIRE", 1000, 1, "a", "b"}, "ERR syntax error"},
		{[]any{"MACQUIRE", 0, 1, "a"}, "ERR invalid expire time in 'macquire' command"},
		{[]any{"MACQUIRE", "a", 1, "b"}, "ERR value is not an integer or out of range"},
		{[]any{"MACQUIRE", 1000, 1}, "ERR wrong number of arguments for 'macquire' command"},
		{[]any{"MACQUIRE", 1000, 1, "a", "WAIT", -1}, "ERR WAIT must be a non-negative number of milliseconds"},
		{[]any{"MRELEASE", "a"}, "ERR wrong number of arguments for 'mrelease' command"},
		{[]any{"MRELEASE", "a", 1, "b"}, "ERR wrong number of arguments for 'mrelease' command"},
		{[]any{"MRELEASE", "a", "x"}, "ERR invalid token: must be an unsigned 64-bit integer"},
	} {
		t.Run(strings.TrimSuffix(fmt.Sprintln(tc.args...), "\n"), func(t *testing.T) {
			do(t, cn, tc.args...).Err(tc.want)
			do(t, cn, "PING").Str("PONG")
		})
	}
	for _, k := range []string{"a", "b"} {
		if st := status(t, cn, k); st != nil {
			t.Errorf("STATUS %s = %v after refused commands, want nil", k, st)
		}
	}
}

// TestMAcquireWaitTakesKeysInOrder: a waiting MACQUIRE holds the keys before
// the one it waits for (in sorted order) and returns every token in the
// caller's order once granted, each renewed to the ttl asked for.
func TestMAcquireWaitTakesKeysInOrder(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	hm := do(t, rdb, "ACQUIRE", "m", 30000).Token()
	w := ts.dial()
	w.send("MACQUIRE 30000 4 z m a b OWNER mw WAIT 20000\r\nPING\r\n")
	// Sorted: a, b, then m, which it waits for; z is not touched yet.
	waitForWaiters(t, ts, "m", 1)
	for _, k := range []string{"a", "b"} {
		st := status(t, rdb, k)
		wantStatus(t, st, map[string]string{"state": "held", "owner": "mw"})
		// Held for ttl plus the wait meanwhile.
		if ttl, _ := strconv.Atoi(st["ttl"]); ttl <= 30000 {
			t.Errorf("%s taken on the way has ttl %d, want more than 30000", k, ttl)
		}
	}
	do(t, rdb, "STATUS", "z").Nil()
	do(t, rdb, "ACQUIRE", "a", 1000).Nil()

	do(t, rdb, "RELEASE", "m", hm).Is(1)
	toks := rawTokens(t, w, 4)
	w.expect("PONG")
	wantHeldBy(t, rdb, []string{"z", "m", "a", "b"}, toks)
	for _, k := range []string{"z", "m", "a", "b"} {
		if ttl, _ := strconv.Atoi(status(t, rdb, k)["ttl"]); ttl > 30000 || ttl < 25000 {
			t.Errorf("%s ttl %d once granted, want the 30000 asked for", k, ttl)
		}
	}
	w.send(fmt.Sprintf("MRELEASE z %d m %d a %d b %d\r\n", toks[0], toks[1], toks[2], toks[3]))
	w.expect(int64(4))
	if got := infoField(t, rdb, "clients", "blocked_clients"); got != "0" {
		t.Fatalf("blocked_clients = %s after the grant", got)
	}
}

// TestMAcquireTimeoutReleasesWhatItTook: a MACQUIRE whose WAIT runs out
// replies a nil array and gives back the keys it took on the way.
func TestMAcquireTimeoutReleasesWhatItTook(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	do(t, rdb, "CREATE", "a1", "TTL", 5000).Is(1)
	hb := do(t, rdb, "ACQUIRE", "b", 30000).Token()
	w := ts.dial()
	start := time.Now()
	w.send("MACQUIRE 30000 4 c b a2 a1 OWNER mt WAIT 400\r\n")
	waitForWaiters(t, ts, "b", 1)
	wantStatus(t, status(t, rdb, "a1"), map[string]string{"state": "held", "owner": "mt"})
	wantStatus(t, status(t, rdb, "a2"), map[string]string{"state": "held", "owner": "mt"})
	last, _ := strconv.ParseUint(status(t, rdb, "a2")["last-token"], 10, 64)

	if l := w.line(); l != "*-1" {
		t.Fatalf("MACQUIRE past its WAIT replied %q, want a nil array *-1", l)
	}
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Fatalf("answered after %v, before the 400ms wait ended", waited)
	}
	wantStatus(t, status(t, rdb, "a1"), map[string]string{"state": "free", "created": "1", "holders": ""})
	do(t, rdb, "STATUS", "a2").Nil()
	do(t, rdb, "STATUS", "c").Nil()
	wantStatus(t, status(t, rdb, "b"), map[string]string{"token": u(hb), "waiters": "0"})
	if got := infoField(t, rdb, "locks", "wait_timeouts"); got != "1" {
		t.Fatalf("wait_timeouts = %s, want 1", got)
	}
	if n := do(t, rdb, "ACQUIRE", "a2", 1000).Token(); n <= last {
		t.Fatalf("a2's token %d after the timeout, not above %d", n, last)
	}
	// The connection goes on.
	w.send("PING\r\n")
	w.expect("PONG")
}

// TestMAcquireHangUpReleasesWhatItTook: a client that hangs up while its
// MACQUIRE is parked loses every key it took, and is granted nothing later.
func TestMAcquireHangUpReleasesWhatItTook(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	do(t, rdb, "CREATE", "a1").Is(1)
	hb := do(t, rdb, "ACQUIRE", "b", 30000).Token()
	w := ts.dial()
	w.send("MACQUIRE 30000 3 b a2 a1 WAIT 20000\r\n")
	waitForWaiters(t, ts, "b", 1)
	for _, k := range []string{"a1", "a2"} {
		if st, ok := lockState(ts, k); !ok || !st.Held {
			t.Fatalf("%s not held while the MACQUIRE waits for b: %+v", k, st)
		}
	}
	w.Close()
	testutil.Eventually(t, 5*time.Second, "the parked MACQUIRE's keys are released", func() bool {
		a1, _ := lockState(ts, "a1")
		_, a2 := lockState(ts, "a2")
		b, _ := lockState(ts, "b")
		return !a1.Held && !a2 && b.Waiters == 0
	})
	if got := infoField(t, rdb, "clients", "blocked_clients"); got != "0" {
		t.Fatalf("blocked_clients = %s after the hang-up", got)
	}
	// b, released, goes to nobody.
	do(t, rdb, "RELEASE", "b", hb).Is(1)
	do(t, rdb, "STATUS", "b").Nil()
	if st := ts.Table().Stats(); st.Held != 0 {
		t.Fatalf("%d leases held after everything was released", st.Held)
	}
}

// TestMAcquireOwnerRetryTakesOver: a waiting MACQUIRE with OWNER, retried
// on a new connection, takes the old request's place and the keys it took;
// the old one is answered nil, and releases nothing.
func TestMAcquireOwnerRetryTakesOver(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	hm := do(t, rdb, "ACQUIRE", "m", 30000).Token()
	old := ts.dial()
	old.send("MACQUIRE 30000 3 z m a OWNER job-1 WAIT 20000\r\n")
	waitForWaiters(t, ts, "m", 1)
	ta := status(t, rdb, "a")["token"]
	retry := ts.dial()
	retry.send("MACQUIRE 30000 3 z m a OWNER job-1 WAIT 20000\r\n")
	if l := old.line(); l != "*-1" {
		t.Fatalf("superseded MACQUIRE replied %q, want *-1", l)
	}
	old.Close()
	waitForWaiters(t, ts, "m", 1) // the retry, in the old one's place
	wantStatus(t, status(t, rdb, "a"), map[string]string{"state": "held", "owner": "job-1", "token": ta})
	do(t, rdb, "RELEASE", "m", hm).Is(1)
	toks := rawTokens(t, retry, 3)
	if u(toks[2]) != ta {
		t.Fatalf("retry's token for a = %d, want %s, the one the old request took", toks[2], ta)
	}
	wantHeldBy(t, rdb, []string{"z", "m", "a"}, toks)
}

// TestMAcquireEphemeral: every key of an EPHEMERAL MACQUIRE, granted at once
// or after waiting, is released when its connection closes.
func TestMAcquireEphemeral(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	c := ts.dial()
	c.send("MACQUIRE 600000 3 x y z EPHEMERAL\r\n")
	rawTokens(t, c, 3)
	c.send("MACQUIRE 600000 1 keep\r\n") // not ephemeral: survives the close
	keep := rawTokens(t, c, 1)

	hq := do(t, rdb, "ACQUIRE", "q", 30000).Token()
	c2 := ts.dial()
	c2.send("MACQUIRE 600000 2 q p EPHEMERAL WAIT 20000\r\n")
	waitForWaiters(t, ts, "q", 1)
	do(t, rdb, "RELEASE", "q", hq).Is(1)
	pq := rawTokens(t, c2, 2)
	wantHeldBy(t, rdb, []string{"q", "p"}, pq)

	c.Close()
	c2.Close()
	testutil.Eventually(t, 5*time.Second, "the EPHEMERAL leases are released", func() bool {
		for _, k := range []string{"x", "y", "z", "q", "p"} {
			if _, ok := lockState(ts, k); ok {
				return false
			}
		}
		return true
	})
	do(t, rdb, "VERIFY", "keep", keep[0]).Is(1)
}

// TestMAcquireManyClients: clients take random subsets of a few keys, named
// in random orders, waiting for them. Every request completes (taking keys in
// one global order, none can deadlock), and no key is ever held by two.
func TestMAcquireManyClients(t *testing.T) {
	ts := startServer(t)
	const nkeys, workers, rounds = 6, 12, 30
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var (
		mu       sync.Mutex
		holderOf = map[string]int{} // key -> worker holding it
		wg       sync.WaitGroup
	)
	c := context.Background()
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(g)))
			rdb := ts.waitClient()
			for round := range rounds {
				n := 2 + rnd.IntN(3)
				var keys []string
				for _, j := range rnd.Perm(nkeys)[:n] {
					keys = append(keys, fmt.Sprintf("mk%d", j))
				}
				args := []any{"MACQUIRE", 10000, n}
				for _, k := range keys {
					args = append(args, k)
				}
				waiting := round%4 != 3 // every fourth try is an atomic attempt
				if waiting {
					args = append(args, "WAIT", 15000)
				}
				v, err := rdb.Do(c, args...).Slice()
				switch {
				case errors.Is(err, redis.Nil) && !waiting:
					continue
				case errors.Is(err, redis.Nil):
					t.Errorf("worker %d: %v timed out: deadlocked?", g, args)
					return
				case err != nil || len(v) != n:
					t.Errorf("worker %d: %v = %v, %v", g, args, v, err)
					return
				}
				mu.Lock()
				for _, k := range keys {
					if other, held := holderOf[k]; held {
						t.Errorf("worker %d granted %s, which worker %d holds", g, k, other)
					}
					holderOf[k] = g
				}
				mu.Unlock()
				rel := []any{"MRELEASE"}
				for j, k := range keys {
					tok, _ := v[j].(int64)
					if ok, err := rdb.Do(c, "VERIFY", k, tok).Int(); err != nil || ok != 1 {
						t.Errorf("worker %d: VERIFY %s %d (position %d of %v) = %d, %v", g, k, tok, j, keys, ok, err)
					}
					rel = append(rel, k, tok)
				}
				mu.Lock()
				for _, k := range keys {
					delete(holderOf, k)
				}
				mu.Unlock()
				if got, err := rdb.Do(c, rel...).Int(); err != nil || got != n {
					t.Errorf("worker %d: %v = %d, %v", g, rel, got, err)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("MACQUIRE workers not done after 30s")
	}
	if st := ts.Table().Stats(); st.Held != 0 || st.Locks != 0 {
		t.Fatalf("after the workers: %d leases held, %d locks", st.Held, st.Locks)
	}
}

// TestMAcquireRedisCli drives MACQUIRE, MRELEASE and the STATUS of a shared
// lock through the real redis-cli, raw and formatted.
func TestMAcquireRedisCli(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	ts := startServer(t)
	host, port := ts.hostPort()
	run := func(args ...string) string {
		t.Helper()
		res := runTool(t, "", cli, append([]string{"-h", host, "-p", port}, args...)...)
		if res.exit != 0 || res.stderr != "" {
			t.Fatalf("redis-cli %q: exit %d, stderr %q, stdout %q", args, res.exit, res.stderr, res.stdout)
		}
		return res.stdout
	}
	match := func(args []string, got, want string) {
		t.Helper()
		if !outputPattern(want, "").MatchString(got) {
			t.Fatalf("redis-cli %q printed\n%q\nwant\n%q ({n} any number)", args, got, want)
		}
	}

	out := run("MACQUIRE", "30000", "2", "a", "b")
	toks := regexp.MustCompile(`\A([0-9]+)\n([0-9]+)\n\z`).FindStringSubmatch(out)
	if toks == nil {
		t.Fatalf("MACQUIRE 30000 2 a b printed %q, want two tokens a line", out)
	}
	t1, t2 := toks[1], toks[2]
	match([]string{"STATUS a"}, run("STATUS", "a"),
		"state\nheld\ntoken\n"+t1+"\nowner\n\nttl\n{n}\nlast-token\n"+t1+"\ndefault-ttl\n0\ncreated\n0\nlock-delay\n0\ndelay-left\n0\nwaiters\n0\nlimit\n0\nmode\nexclusive\nholders-total\n1\nholders\ntoken\n"+t1+"\nowner\n\nttl\n{n}\n")
	match([]string{"VERIFY b"}, run("VERIFY", "b", t2), "1\n")
	// Held: the nil array prints as an empty line raw, as (nil) formatted.
	match([]string{"MACQUIRE b c"}, run("MACQUIRE", "30000", "2", "b", "c"), "\n")
	match([]string{"--no-raw MACQUIRE b c"}, run("--no-raw", "MACQUIRE", "30000", "2", "b", "c"), "(nil)\n")
	match([]string{"MACQUIRE a a"}, run("MACQUIRE", "30000", "2", "a", "a"), "ERR a key is named more than once \"a\"\n\n")
	match([]string{"MRELEASE"}, run("MRELEASE", "a", t1, "b", t2), "2\n")
	match([]string{"STATUS a"}, run("STATUS", "a"), "\n")
	match([]string{"--no-raw MACQUIRE c d"}, run("--no-raw", "MACQUIRE", "30000", "2", "c", "d"), "1) (integer) {n}\n2) (integer) {n}\n")

	r1 := strings.TrimSpace(run("ACQUIRE", "s", "30000", "SHARED", "OWNER", "r1"))
	r2 := strings.TrimSpace(run("ACQUIRE", "s", "30000", "SHARED", "OWNER", "r2"))
	match([]string{"STATUS s"}, run("STATUS", "s"),
		"state\nheld\ntoken\n0\nowner\n\nttl\n0\nlast-token\n"+r2+"\ndefault-ttl\n0\ncreated\n0\nlock-delay\n0\ndelay-left\n0\nwaiters\n0\nlimit\n0\nmode\nshared\n"+
			"holders-total\n2\nholders\ntoken\n"+r1+"\nowner\nr1\nttl\n{n}\ntoken\n"+r2+"\nowner\nr2\nttl\n{n}\n")
	match([]string{"--no-raw STATUS s"}, run("--no-raw", "STATUS", "s"), strings.Join([]string{
		` 1) "state"`, ` 2) "held"`, ` 3) "token"`, ` 4) "0"`, ` 5) "owner"`, ` 6) ""`,
		` 7) "ttl"`, ` 8) "0"`, ` 9) "last-token"`, `10) "` + r2 + `"`, `11) "default-ttl"`, `12) "0"`,
		`13) "created"`, `14) "0"`, `15) "lock-delay"`, `16) "0"`, `17) "delay-left"`, `18) "0"`,
		`19) "waiters"`, `20) "0"`, `21) "limit"`, `22) "0"`, `23) "mode"`, `24) "shared"`,
		`25) "holders-total"`, `26) "2"`, `27) "holders"`,
		`28) 1) 1) "token"`, `       2) "` + r1 + `"`, `       3) "owner"`, `       4) "r1"`, `       5) "ttl"`, `       6) "{n}"`,
		`    2) 1) "token"`, `       2) "` + r2 + `"`, `       3) "owner"`, `       4) "r2"`, `       5) "ttl"`, `       6) "{n}"`,
	}, "\n")+"\n")
}
