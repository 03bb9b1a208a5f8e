package locker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func keysOf(names ...string) [][]byte {
	out := make([][]byte, len(names))
	for j, n := range names {
		out[j] = []byte(n)
	}
	return out
}

// multiWaiter is a MultiWait whose progress reports land in a channel.
func multiWaiter() (*MultiWait, chan struct{}) {
	ch := make(chan struct{}, 1)
	return &MultiWait{Notify: func() { ch <- struct{}{} }}, ch
}

func TestAcquireAllAtOnce(t *testing.T) {
	tb, _ := newTestTable(t)
	toks, ok, err := tb.AcquireAll(&Request{Keys: keysOf("c", "a", "b"), TTL: time.Second})
	if err != nil || !ok || len(toks) != 3 {
		t.Fatalf("AcquireAll = %v, %v, %v", toks, ok, err)
	}
	for j, k := range []string{"c", "a", "b"} {
		if !tb.Verify([]byte(k), toks[j]) {
			t.Fatalf("token %d is not %q's", toks[j], k)
		}
	}
	// One key taken: none is granted, and nothing is left held.
	if _, ok, _ := tb.AcquireAll(&Request{Keys: keysOf("d", "a"), TTL: time.Second}); ok {
		t.Fatal("granted with a key held")
	}
	if _, ok := tb.Status([]byte("d")); ok {
		t.Fatal("a failed AcquireAll left a key behind")
	}
	if _, _, err := tb.AcquireAll(&Request{Keys: keysOf("x", "y", "x"), TTL: time.Second}); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("duplicate keys: %v", err)
	}
	if _, _, err := tb.AcquireAll(&Request{Keys: keysOf("x"), TTL: 0}); !errors.Is(err, ErrTTLRange) {
		t.Fatalf("no ttl: %v", err)
	}
	// An owner's retry gets its tokens back.
	first, _, _ := tb.AcquireAll(&Request{Keys: keysOf("p", "q"), TTL: time.Second, Owner: []byte("me")})
	again, ok, _ := tb.AcquireAll(&Request{Keys: keysOf("q", "p"), TTL: time.Second, Owner: []byte("me")})
	if !ok || again[0] != first[1] || again[1] != first[0] {
		t.Fatalf("owner's retry: %v then %v", first, again)
	}
	// Readers share keys.
	r1, ok1, _ := tb.AcquireAll(&Request{Keys: keysOf("r", "s"), TTL: time.Second, Mode: Shared})
	r2, ok2, _ := tb.AcquireAll(&Request{Keys: keysOf("s", "r"), TTL: time.Second, Mode: Shared})
	if !ok1 || !ok2 || r1[0] == r2[1] {
		t.Fatalf("shared AcquireAll: %v %v", r1, r2)
	}
}

func TestAcquireAllWaits(t *testing.T) {
	tb, clock := newTestTable(t)
	held := mustAcquire(t, tb, "b", time.Second, "")
	mw, ch := multiWaiter()
	toks, granted, err := tb.AcquireAllWait(&Request{Keys: keysOf("c", "b", "a"), TTL: time.Second, Wait: 10 * time.Second}, mw)
	if granted || err != nil || !mw.Waiting() {
		t.Fatalf("AcquireAllWait = %v, %v, %v, waiting %v; want waiting", toks, granted, err, mw.Waiting())
	}
	// "a" comes before "b" in the taking order: it is held while "b" is waited for.
	if st, _ := tb.Status([]byte("a")); !st.Held || st.TTL != 11*time.Second {
		t.Fatalf("a while waiting for b: %+v", st)
	}
	if _, ok := tb.Status([]byte("c")); ok {
		t.Fatal("c taken before b")
	}
	if toks, granted := tb.ContinueAll(mw); granted || !mw.Waiting() {
		t.Fatalf("ContinueAll before its turn: %v", toks)
	}
	clock.Advance(500 * time.Millisecond)
	tb.Release([]byte("b"), held)
	<-ch
	toks, granted = tb.ContinueAll(mw)
	if !granted || len(toks) != 3 || mw.Waiting() {
		t.Fatalf("ContinueAll = %v, %v, waiting %v", toks, granted, mw.Waiting())
	}
	for j, k := range []string{"c", "b", "a"} {
		st, _ := tb.Status([]byte(k))
		if st.Token != toks[j] || st.TTL != time.Second {
			t.Fatalf("%q after the grant: %+v, want token %d and 1s", k, st, toks[j])
		}
	}
}

func TestCancelAllReleasesWhatItTook(t *testing.T) {
	tb, _ := newTestTable(t)
	held := mustAcquire(t, tb, "m", time.Second, "")
	mw, _ := multiWaiter()
	if tb.AcquireAllWait(&Request{Keys: keysOf("z", "m", "a"), TTL: time.Second, Wait: time.Second}, mw); !mw.Waiting() {
		t.Fatal("not waiting")
	}
	tb.CancelAll(mw)
	for _, k := range []string{"a", "z"} {
		if _, ok := tb.Status([]byte(k)); ok {
			t.Fatalf("%q still there after CancelAll", k)
		}
	}
	if st, _ := tb.Status([]byte("m")); st.Waiters != 0 || st.Token != held {
		t.Fatalf("m after CancelAll: %+v", st)
	}
	tb.CancelAll(mw) // twice is harmless
}

func TestCancelAllAfterAGrantItHadNotSeen(t *testing.T) {
	tb, _ := newTestTable(t)
	held := mustAcquire(t, tb, "b", time.Second, "")
	mw, ch := multiWaiter()
	tb.AcquireAllWait(&Request{Keys: keysOf("a", "b"), TTL: time.Second, Wait: time.Second}, mw)
	tb.Release([]byte("b"), held)
	<-ch // granted, but the owner times out before it carries on
	tb.CancelAll(mw)
	for _, k := range []string{"a", "b"} {
		if _, ok := tb.Status([]byte(k)); ok {
			t.Fatalf("%q still held after CancelAll", k)
		}
	}
}

func TestAcquireAllOwnerRetryTakesOver(t *testing.T) {
	tb, _ := newTestTable(t)
	held := mustAcquire(t, tb, "b", time.Second, "")
	req := &Request{Keys: keysOf("a", "b"), TTL: time.Second, Wait: time.Minute, Owner: []byte("job-7")}
	old, oldCh := multiWaiter()
	tb.AcquireAllWait(req, old)
	aTok, _ := tb.Status([]byte("a"))
	// The client's connection broke; it retries with the same owner.
	req.Keys = keysOf("b", "a")
	retry, retryCh := multiWaiter()
	if tb.AcquireAllWait(req, retry); !retry.Waiting() {
		t.Fatal("retry not waiting")
	}
	<-oldCh
	if toks, granted := tb.ContinueAll(old); granted || toks != nil || old.Waiting() {
		t.Fatalf("superseded request: %v, %v, waiting %v", toks, granted, old.Waiting())
	}
	tb.CancelAll(old) // must not release what the retry now holds
	if st, _ := tb.Status([]byte("b")); st.Waiters != 1 {
		t.Fatalf("the queue for b: %+v", st)
	}
	tb.Release([]byte("b"), held)
	<-retryCh
	toks, granted := tb.ContinueAll(retry)
	if !granted || toks[1] != aTok.Token {
		t.Fatalf("retry: %v, %v; want a's token %d", toks, granted, aTok.Token)
	}
}

// TestAcquireAllNoDeadlockNoOverlap has many goroutines take random sets of
// keys, named in random orders, waiting for each other; no lease ever runs
// out (the clock stands still), so a deadlock would hang until the watchdog
// fails the test. Each holder marks its keys in a shared map, which must
// never show two holders of one key.
func TestAcquireAllNoDeadlockNoOverlap(t *testing.T) {
	const workers, rounds, nkeys = 8, 200, 6
	tb, _ := newTestTable(t)
	var mu sync.Mutex
	holder := map[string]int{}
	var waited atomic.Int64
	var wg sync.WaitGroup
	finished := make(chan struct{})
	for g := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for r := range rounds {
				names := []string{}
				for k := range nkeys {
					if rng.IntN(2) == 0 {
						names = append(names, fmt.Sprint("k", k))
					}
				}
				if len(names) == 0 {
					continue
				}
				rng.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
				req := &Request{Keys: keysOf(names...), TTL: time.Minute, Wait: time.Minute}
				if r%5 == 0 {
					req.Owner = []byte(fmt.Sprint("w", g, "-", r))
				}
				mw, ch := multiWaiter()
				toks, granted, err := tb.AcquireAllWait(req, mw)
				if mw.Waiting() {
					waited.Add(1)
				}
				for mw.Waiting() {
					<-ch
					toks, granted = tb.ContinueAll(mw)
				}
				if err != nil || !granted {
					t.Errorf("worker %d: %v, %v", g, toks, err)
					return
				}
				mu.Lock()
				for _, n := range names {
					if other, ok := holder[n]; ok {
						t.Errorf("%s held by %d and %d", n, other, g)
					}
					holder[n] = g
				}
				mu.Unlock()
				for j, n := range names {
					if !tb.Verify([]byte(n), toks[j]) {
						t.Errorf("%s: token %d not live while held", n, toks[j])
					}
				}
				runtime.Gosched()
				mu.Lock()
				for _, n := range names {
					delete(holder, n)
				}
				mu.Unlock()
				for j, n := range names {
					if !tb.Release([]byte(n), toks[j]) {
						t.Errorf("release of %s failed", n)
					}
				}
			}
		})
	}
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("multi-lock workers deadlocked")
	}
	if st := tb.Stats(); st.Held != 0 || st.Locks != 0 {
		t.Fatalf("left behind: %+v", st)
	}
	if waited.Load() == 0 {
		t.Fatal("no request ever waited: the test did not exercise the ordered path")
	}
	t.Logf("%d of %d requests waited", waited.Load(), workers*rounds)
}

// jumpyClock stands still until armed, then moves by step at every reading:
// a process suspended between the steps of one request.
type jumpyClock struct{ now, step atomic.Int64 }

func (c *jumpyClock) Now() time.Duration { return time.Duration(c.now.Add(c.step.Load())) }

// TestAcquireAllWaitEndsUngrantedWhenAKeyIsLostOnTheWay: taking every key in
// its first call, a request whose first key ran out meanwhile is neither
// granted nor waiting, and holds nothing.
func TestAcquireAllWaitEndsUngrantedWhenAKeyIsLostOnTheWay(t *testing.T) {
	clock := &jumpyClock{}
	tb, _ := newTestTable(t, func(c *Config) { c.Clock = clock })
	mustAcquire(t, tb, "b", 2500*time.Millisecond, "")
	// From now on each reading is 1s later: the atomic attempt (1s) finds
	// b held, a is taken at 2s for 1.5s, b at 3s, and a's renewal at 4s is
	// too late.
	clock.step.Store(int64(time.Second))
	mw, ch := multiWaiter()
	toks, granted, err := tb.AcquireAllWait(&Request{Keys: keysOf("a", "b"), TTL: time.Second, Wait: 500 * time.Millisecond}, mw)
	clock.step.Store(0)
	if granted || err != nil || toks != nil || mw.Waiting() {
		t.Fatalf("AcquireAllWait = %v, %v, %v, waiting %v; want ended ungranted", toks, granted, err, mw.Waiting())
	}
	for _, k := range []string{"a", "b"} {
		if st, _ := tb.Status([]byte(k)); st.Held {
			t.Errorf("%s held after an ungranted request: %+v", k, st)
		}
	}
	select {
	case <-ch:
		t.Fatal("Notify called for a request that ended in its first call")
	default:
	}
}

// A snapshot keeps a multi-wait in progress as its State; restored (here
// into the same table, its old Wait taken out of the queue), it carries on
// with the keys it took.
func TestRestoreMultiWaitCarriesOn(t *testing.T) {
	tb, _ := newTestTable(t)
	held := mustAcquire(t, tb, "b", time.Second, "")
	mw, _ := multiWaiter()
	if _, granted, err := tb.AcquireAllWait(&Request{Keys: keysOf("c", "b", "a"), TTL: time.Second, Wait: 10 * time.Second, Owner: []byte("o"), Priority: 3}, mw); granted || err != nil {
		t.Fatalf("AcquireAllWait: %v, %v", granted, err)
	}
	st, queued := mw.State()
	if queued == nil || queued != mw.Queued() || st.Next != 1 || string(st.Keys[0]) != "a" || len(st.Tokens) != 1 {
		t.Fatalf("State = %+v, %p", st, queued)
	}
	q := tb.Queue([]byte("b"))
	if len(q) != 1 || q[0].Wait != queued {
		t.Fatalf("queue of b = %+v, want the multi-wait's Wait", q)
	}
	if _, granted := tb.CancelWait(queued); granted {
		t.Fatal("the old wait was granted")
	}
	mw2, ch2 := multiWaiter()
	restored, w, err := RestoreMultiWait(st, mw2.Notify)
	if err != nil {
		t.Fatal(err)
	}
	q[0].Wait = w
	if err := tb.RestoreQueue([]byte("b"), q); err != nil {
		t.Fatal(err)
	}
	tb.Release([]byte("b"), held)
	<-ch2
	toks, granted := tb.ContinueAll(restored)
	if !granted || len(toks) != 3 || toks[2] != st.Tokens[0] {
		t.Fatalf("ContinueAll = %v, %v; want a's token %d kept", toks, granted, st.Tokens[0])
	}
	for j, k := range []string{"c", "b", "a"} {
		if s, _ := tb.Status([]byte(k)); s.Token != toks[j] || s.TTL != time.Second {
			t.Fatalf("%q: %+v, want token %d for 1s", k, s, toks[j])
		}
	}
}

func TestRestoreMultiWaitRefusesBadShapes(t *testing.T) {
	two := keysOf("a", "b")
	for _, st := range []MultiWaitState{
		{},
		{Keys: two, Order: []int{0}, Next: 0},
		{Keys: two, Order: []int{0, 0}, Next: 0},
		{Keys: two, Order: []int{0, 2}, Next: 0},
		{Keys: two, Order: []int{1, 0}, Next: 2, Tokens: []uint64{1, 2}},
		{Keys: two, Order: []int{1, 0}, Next: 1},
	} {
		if _, _, err := RestoreMultiWait(st, func() {}); !errors.Is(err, ErrQueueState) {
			t.Errorf("RestoreMultiWait(%+v) = %v, want ErrQueueState", st, err)
		}
	}
}
