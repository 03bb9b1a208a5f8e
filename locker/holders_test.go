package locker

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func mustAcquireShared(t *testing.T, tb *Table, key string, ttl time.Duration, owner string) uint64 {
	t.Helper()
	tok, ok, err := tb.Acquire(&Request{Key: []byte(key), TTL: ttl, Owner: []byte(owner), Mode: Shared})
	if err != nil || !ok {
		t.Fatalf("AcquireShared(%q) = %d, %v, %v; want granted", key, tok, ok, err)
	}
	return tok
}

// readerOf is a shared request for key.
func readerOf(key string, ttl time.Duration) *Request {
	return &Request{Key: []byte(key), TTL: ttl, Mode: Shared}
}

func TestSharedLeases(t *testing.T) {
	tb, clock := newTestTable(t)
	k := []byte("rw")
	r1 := mustAcquireShared(t, tb, "rw", time.Second, "")
	r2 := mustAcquireShared(t, tb, "rw", 2*time.Second, "")
	if r2 <= r1 {
		t.Fatalf("second reader's token %d not above first %d", r2, r1)
	}
	mustNotAcquire(t, tb, "rw", time.Second, "") // a writer waits for the readers

	st, _ := tb.Status(k)
	if !st.Held || !st.Shared || st.Token != 0 || len(st.Holders) != 2 || st.Holders[0].Token != r1 || !st.Holders[1].Shared {
		t.Fatalf("status of a read-held lock: %+v", st)
	}
	// Each reader's token works on its own.
	if !tb.Verify(k, r1) || !tb.Verify(k, r2) {
		t.Fatal("a reader's token does not verify")
	}
	if ok, _ := tb.Extend(k, r1, 3*time.Second); !ok {
		t.Fatal("extend of a reader's lease failed")
	}
	if !tb.Release(k, r2) || tb.Release(k, r2) || tb.Verify(k, r2) {
		t.Fatal("release of a reader's lease: not exactly once")
	}
	if !tb.Verify(k, r1) {
		t.Fatal("releasing one reader ended the other")
	}
	// The first reader's lease expires at 3s (extended); then a writer gets in.
	clock.Advance(2999 * time.Millisecond)
	mustNotAcquire(t, tb, "rw", time.Second, "")
	clock.Advance(time.Millisecond)
	w := mustAcquire(t, tb, "rw", time.Second, "")
	if w <= r2 {
		t.Fatalf("writer's token %d not above the readers' %d", w, r2)
	}
	// A reader waits for the writer.
	if _, ok, _ := tb.Acquire(&Request{Key: k, TTL: time.Second, Mode: Shared}); ok {
		t.Fatal("reader granted while a writer holds the lock")
	}
	tb.Release(k, w)
	if st, ok := tb.Status(k); ok {
		t.Fatalf("a free on-the-fly lock stays: %+v", st)
	}
}

func TestWriterNotStarvedByReaders(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("rw")
	r1 := mustAcquireShared(t, tb, "rw", time.Minute, "")
	_, wch := mustQueue(t, tb, &Request{Key: []byte("rw"), TTL: time.Minute})
	// Readers keep coming while the writer waits: none may overtake it.
	var later []chan uint64
	for range 5 {
		if _, ok, _ := tb.Acquire(&Request{Key: k, TTL: time.Minute, Mode: Shared}); ok {
			t.Fatal("a reader overtook the queued writer")
		}
		_, ch := mustQueue(t, tb, readerOf("rw", time.Minute))
		later = append(later, ch)
	}
	notGranted(t, wch)
	tb.Release(k, r1)
	wtok := granted(t, wch)
	for _, ch := range later {
		notGranted(t, ch)
	}
	// The writer's release hands the lock to every reader queued behind it at once.
	tb.Release(k, wtok)
	seen := map[uint64]bool{}
	for _, ch := range later {
		tok := granted(t, ch)
		if seen[tok] || !tb.Verify(k, tok) {
			t.Fatalf("reader token %d repeated or not live", tok)
		}
		seen[tok] = true
	}
	if st, _ := tb.Status(k); len(st.Holders) != 5 || st.Waiters != 0 {
		t.Fatalf("after the hand-off: %+v", st)
	}
}

func TestHandOffGrantsReadersUpToTheNextWriter(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("rw")
	w0 := mustAcquire(t, tb, "rw", time.Minute, "")
	_, c1 := mustQueue(t, tb, readerOf("rw", time.Minute))
	_, c2 := mustQueue(t, tb, readerOf("rw", time.Minute))
	_, c3 := mustQueue(t, tb, &Request{Key: k, TTL: time.Minute})
	_, c4 := mustQueue(t, tb, readerOf("rw", time.Minute))
	tb.Release(k, w0)
	t1, t2 := granted(t, c1), granted(t, c2)
	notGranted(t, c3)
	notGranted(t, c4)
	tb.Release(k, t1)
	notGranted(t, c3)
	tb.Release(k, t2)
	t3 := granted(t, c3)
	notGranted(t, c4)
	tb.Release(k, t3)
	granted(t, c4)
}

func TestSemaphore(t *testing.T) {
	tb, clock := newTestTable(t)
	k := []byte("sem")
	if ok, err := tb.Create(k, CreateOptions{Limit: 3}); !ok || err != nil {
		t.Fatalf("Create LIMIT 3 = %v, %v", ok, err)
	}
	var toks []uint64
	for range 3 {
		toks = append(toks, mustAcquire(t, tb, "sem", time.Second, ""))
	}
	mustNotAcquire(t, tb, "sem", time.Second, "")
	st, _ := tb.Status(k)
	if st.Limit != 3 || !st.Held || st.Shared || len(st.Holders) != 3 || st.Token != 0 {
		t.Fatalf("status of a full semaphore: %+v", st)
	}
	if _, _, err := tb.Acquire(&Request{Key: k, TTL: time.Second, Mode: Shared}); !errors.Is(err, ErrSharedSemaphore) {
		t.Fatalf("SHARED on a semaphore: %v", err)
	}
	// A waiter gets the first permit released.
	_, ch := mustQueue(t, tb, &Request{Key: []byte("sem"), TTL: time.Second})
	tb.Release(k, toks[1])
	got := granted(t, ch)
	if !tb.Verify(k, got) || tb.Verify(k, toks[1]) {
		t.Fatal("permit hand-off wrong")
	}
	// Expiry frees permits; the semaphore stays, being created.
	clock.Advance(time.Second)
	st, ok := tb.Status(k)
	if !ok || st.Held || len(st.Holders) != 0 || st.Limit != 3 {
		t.Fatalf("after expiry: %+v", st)
	}
	if deleted, err := tb.Delete(k); !deleted || err != nil {
		t.Fatalf("delete a free semaphore: %v, %v", deleted, err)
	}
}

func TestSemaphoreLockDelayKeepsThePermit(t *testing.T) {
	tb, clock := newTestTable(t)
	k := []byte("sem")
	tb.Create(k, CreateOptions{Limit: 2, LockDelay: time.Second, LockDelaySet: true})
	a := mustAcquire(t, tb, "sem", time.Second, "")
	mustAcquire(t, tb, "sem", 5*time.Second, "")
	clock.Advance(time.Second) // a expires: its permit stays taken for the delay
	if tb.Verify(k, a) {
		t.Fatal("an expired permit still verifies")
	}
	mustNotAcquire(t, tb, "sem", time.Second, "")
	st, _ := tb.Status(k)
	if !st.Held || len(st.Holders) != 1 || st.DelayLeft != time.Second {
		t.Fatalf("during the permit's delay: %+v", st)
	}
	if _, err := tb.Delete(k); !errors.Is(err, ErrInUse) {
		t.Fatalf("delete with a live permit: %v", err)
	}
	_, ch := mustQueue(t, tb, &Request{Key: []byte("sem"), TTL: time.Second})
	clock.Advance(999 * time.Millisecond)
	tb.ExpireDue()
	notGranted(t, ch)
	clock.Advance(time.Millisecond)
	tb.ExpireDue() // the reaper hands the freed permit on
	granted(t, ch)
}

func TestReaderLockDelayBlocksWritersOnly(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.LockDelay = time.Second })
	k := []byte("rw")
	mustAcquireShared(t, tb, "rw", time.Second, "")
	clock.Advance(time.Second)
	mustNotAcquire(t, tb, "rw", time.Second, "")    // a writer waits out the stale reader
	mustAcquireShared(t, tb, "rw", time.Second, "") // another reader does not
	st, _ := tb.Status(k)
	if !st.Shared || st.DelayLeft != time.Second {
		t.Fatalf("status: %+v", st)
	}
	clock.Advance(time.Second) // the second reader expires too, into its own delay
	if _, err := tb.Delete(k); !errors.Is(err, ErrInLockDelay) {
		t.Fatalf("delete during a reader's lock-delay: %v", err)
	}
	if st, _ := tb.Status(k); st.Held || !st.Delayed {
		t.Fatalf("only delays left: %+v", st)
	}
	clock.Advance(time.Second)
	mustAcquire(t, tb, "rw", time.Second, "")
}

func TestSharedOwners(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("rw")
	tok := mustAcquireShared(t, tb, "rw", time.Second, "reader-1")
	if again := mustAcquireShared(t, tb, "rw", 2*time.Second, "reader-1"); again != tok {
		t.Fatalf("owner's retry got %d, want %d", again, tok)
	}
	if _, _, err := tb.Acquire(&Request{Key: k, TTL: time.Second, Owner: []byte("reader-1")}); !errors.Is(err, ErrOwnerMode) {
		t.Fatalf("owner asking for the write lock it reads: %v", err)
	}
	tb.Release(k, tok)
	wtok := mustAcquire(t, tb, "rw", time.Second, "writer")
	if _, _, err := tb.Acquire(&Request{Key: k, TTL: time.Second, Owner: []byte("writer"), Mode: Shared}); !errors.Is(err, ErrOwnerMode) {
		t.Fatalf("owner asking for a read lease of the lock it writes: %v", err)
	}
	if st, _ := tb.Status(k); st.Owner != "writer" || len(st.Holders) != 1 || st.Holders[0] != (Holder{Token: wtok, Owner: "writer", TTL: time.Second}) {
		t.Fatalf("status: %+v", st)
	}
	// A semaphore's owner retries its permit.
	tb.Create([]byte("sem"), CreateOptions{Limit: 2})
	p := mustAcquire(t, tb, "sem", time.Second, "w1")
	if again := mustAcquire(t, tb, "sem", time.Second, "w1"); again != p {
		t.Fatalf("permit retry got %d, want %d", again, p)
	}
	if st, _ := tb.Status([]byte("sem")); len(st.Holders) != 1 {
		t.Fatalf("a retry took a second permit: %+v", st)
	}
}

func TestCreateLimit(t *testing.T) {
	tb, _ := newTestTable(t)
	for _, n := range []int{-1, MaxLimit + 1} {
		if _, err := tb.Create([]byte("x"), CreateOptions{Limit: n}); !errors.Is(err, ErrLimitRange) {
			t.Errorf("Limit %d: %v", n, err)
		}
	}
	// An on-the-fly lock that is held cannot turn into a semaphore.
	mustAcquire(t, tb, "busy", time.Second, "")
	if _, err := tb.Create([]byte("busy"), CreateOptions{Limit: 2}); !errors.Is(err, ErrInUse) {
		t.Fatalf("Create LIMIT on a held lock: %v", err)
	}
	mustAcquireShared(t, tb, "read", time.Second, "")
	if _, err := tb.Create([]byte("read"), CreateOptions{Limit: 2}); !errors.Is(err, ErrInUse) {
		t.Fatalf("Create LIMIT on a read-held lock: %v", err)
	}
	// Without a limit, a held on-the-fly lock is adopted as before.
	if ok, err := tb.Create([]byte("read"), CreateOptions{}); !ok || err != nil {
		t.Fatalf("adopting a read-held lock: %v, %v", ok, err)
	}
}

func TestHolderEvents(t *testing.T) {
	sink := &recordingSink{}
	sink.active.Store(true)
	tb, clock := newTestTable(t, func(c *Config) { c.Events = sink })
	k := []byte("rw")
	a := mustAcquireShared(t, tb, "rw", time.Second, "a")
	b := mustAcquireShared(t, tb, "rw", 2*time.Second, "b")
	tb.Extend(k, b, 3*time.Second)
	tb.Release(k, a)
	clock.Advance(3 * time.Second)
	tb.ExpireDue()
	want := []Event{
		{EventAcquired, "rw", a, "a", 0}, {EventAcquired, "rw", b, "b", 0}, {EventExtended, "rw", b, "b", 0},
		{EventReleased, "rw", a, "a", 0}, {EventExpired, "rw", b, "b", 3 * time.Second},
	}
	got := sink.take()
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	for n := range want {
		if got[n] != want[n] {
			t.Fatalf("event %d: %+v, want %+v", n, got[n], want[n])
		}
	}
}

// TestSemaphoreNeverExceedsLimit runs many goroutines taking and giving back
// permits, some waiting and some letting their leases expire, and checks
// after every step that no more than the limit hold at once.
func TestSemaphoreNeverExceedsLimit(t *testing.T) {
	const limit, workers, rounds = 3, 8, 300
	tb, clock := newTestTable(t)
	k := []byte("sem")
	tb.Create(k, CreateOptions{Limit: limit})
	var mu sync.Mutex
	holding := map[uint64]bool{}
	check := func() {
		st, _ := tb.Status(k)
		if len(st.Holders) > limit {
			t.Errorf("%d holders of a %d-permit semaphore", len(st.Holders), limit)
		}
	}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range rounds {
				var tok uint64
				var ok bool
				if rng.IntN(2) == 0 {
					tok, ok, _ = tb.Acquire(&Request{Key: k, TTL: time.Duration(1+rng.IntN(3)) * time.Second})
				} else {
					w, ch := waiter()
					if tok, ok, _ = tb.AcquireWait(&Request{Key: k, TTL: time.Second}, w); !ok {
						if tok, ok = tb.CancelWait(w); !ok {
							select {
							case tok = <-ch:
								ok = true
							default:
							}
						}
					}
				}
				check()
				if !ok {
					if rng.IntN(4) == 0 {
						clock.Advance(time.Second) // let some leases run out
						tb.ExpireDue()
					}
					continue
				}
				mu.Lock()
				if holding[tok] {
					t.Errorf("token %d granted twice", tok)
				}
				holding[tok] = true
				mu.Unlock()
				if rng.IntN(3) > 0 {
					tb.Release(k, tok)
				}
				check()
			}
		})
	}
	wg.Wait()
}

func TestReadersBehindAWriterThatGivesUpAreGranted(t *testing.T) {
	tb, _ := newTestTable(t)
	mustAcquireShared(t, tb, "rw", time.Minute, "")
	writer, _ := mustQueue(t, tb, &Request{Key: []byte("rw"), TTL: time.Minute})
	_, ch := mustQueue(t, tb, readerOf("rw", time.Minute))
	notGranted(t, ch)
	if _, ok := tb.CancelWait(writer); ok {
		t.Fatal("the writer was granted")
	}
	granted(t, ch) // at once, not at the next touch of the lock
}

func TestPriorityReaderAheadOfAWriterIsGrantedAtOnce(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("rw")
	mustAcquireShared(t, tb, "rw", time.Minute, "")
	_, wch := mustQueue(t, tb, &Request{Key: []byte("rw"), TTL: time.Minute})
	r, ch := waiter()
	tok, ok, err := tb.AcquireWait(&Request{Key: k, TTL: time.Minute, Mode: Shared, Priority: 5}, r)
	if !ok || err != nil || !tb.Verify(k, tok) {
		t.Fatalf("priority reader ahead of a writer: %d, %v, %v", tok, ok, err)
	}
	notGranted(t, ch) // granted directly, not through Notify
	notGranted(t, wch)
	// A reader of the writer's priority still queues behind it.
	mustQueue(t, tb, readerOf("rw", time.Minute))
}
