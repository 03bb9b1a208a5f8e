package locker

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// waiter is a Wait whose grants land in a channel.
func waiter() (*Wait, chan uint64) {
	ch := make(chan uint64, 1)
	return &Wait{Notify: func(tok uint64) { ch <- tok }}, ch
}

// mustQueue makes req wait, and fails t unless it is queued.
func mustQueue(t *testing.T, tb *Table, req *Request) (*Wait, chan uint64) {
	t.Helper()
	w, ch := waiter()
	if tok, granted, err := tb.AcquireWait(req, w); granted || err != nil {
		t.Fatalf("AcquireWait(%q) = %d, %v, %v; want queued", req.Key, tok, granted, err)
	}
	return w, ch
}

func granted(t *testing.T, ch chan uint64) uint64 {
	t.Helper()
	select {
	case tok := <-ch:
		return tok
	default:
		t.Fatal("waiter not granted")
		return 0
	}
}

func notGranted(t *testing.T, ch chan uint64) {
	t.Helper()
	select {
	case tok := <-ch:
		t.Fatalf("waiter granted token %d too early", tok)
	default:
	}
}

func TestWaitersServedInPriorityThenArrivalOrder(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("q")
	tok := mustAcquire(t, tb, "q", time.Second, "")
	type queued struct {
		name string
		ch   chan uint64
	}
	var order []queued
	for _, p := range []struct {
		name     string
		priority int
	}{{"a", 0}, {"b", 0}, {"urgent", 5}, {"c", 0}, {"urgent2", 5}, {"low", -1}} {
		_, ch := mustQueue(t, tb, &Request{Key: []byte("q"), TTL: time.Second, Priority: p.priority})
		order = append(order, queued{p.name, ch})
	}
	if st, _ := tb.Status(k); st.Waiters != 6 {
		t.Fatalf("status waiters %d, want 6", st.Waiters)
	}
	want := []string{"urgent", "urgent2", "a", "b", "c", "low"}
	byName := map[string]chan uint64{}
	for _, q := range order {
		byName[q.name] = q.ch
	}
	last := tok
	for n, name := range want {
		if !tb.Release(k, last) {
			t.Fatalf("release of %d failed", last)
		}
		next := granted(t, byName[name])
		if next <= last {
			t.Fatalf("%s got token %d after %d", name, next, last)
		}
		for _, other := range want[n+1:] {
			notGranted(t, byName[other])
		}
		last = next
	}
	tb.Release(k, last)
	if _, ok := tb.Status(k); ok {
		t.Fatal("on-the-fly lock left behind after its queue drained")
	}
}

func TestWaiterGetsExpiredLockWithoutTheReaper(t *testing.T) {
	tb, clock := newTestTable(t)
	mustAcquire(t, tb, "e", 100*time.Millisecond, "")
	_, ch := mustQueue(t, tb, &Request{Key: []byte("e"), TTL: time.Second})
	clock.Advance(100 * time.Millisecond)
	notGranted(t, ch)
	// Any look at the lock settles the expiry and hands it over.
	if st, _ := tb.Status([]byte("e")); !st.Held || st.Waiters != 0 {
		t.Fatalf("status after expiry %+v; want held by the waiter", st)
	}
	granted(t, ch)

	// And the reaper does it when nobody looks.
	mustAcquire(t, tb, "r", 100*time.Millisecond, "")
	_, ch = mustQueue(t, tb, &Request{Key: []byte("r"), TTL: time.Second})
	clock.Advance(100 * time.Millisecond)
	tb.ExpireDue()
	granted(t, ch)
}

func TestWaitersWaitThroughLockDelay(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.LockDelay = 500 * time.Millisecond })
	mustAcquire(t, tb, "d", 100*time.Millisecond, "")
	_, ch := mustQueue(t, tb, &Request{Key: []byte("d"), TTL: time.Second})
	clock.Advance(100 * time.Millisecond)
	tb.ExpireDue()
	notGranted(t, ch) // in the delay
	clock.Advance(499 * time.Millisecond)
	tb.ExpireDue()
	notGranted(t, ch)
	clock.Advance(10 * time.Millisecond)
	tb.ExpireDue()
	granted(t, ch)
}

func TestPlainAcquireNeverOvertakesTheQueue(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.LockDelay = 50 * time.Millisecond })
	mustAcquire(t, tb, "o", 10*time.Millisecond, "")
	w, ch := mustQueue(t, tb, &Request{Key: []byte("o"), TTL: time.Second})
	clock.Advance(10 * time.Millisecond) // expired; delayed
	mustNotAcquire(t, tb, "o", time.Second, "")
	mustQueue(t, tb, &Request{Key: []byte("o"), TTL: time.Second, Priority: 100}) // even a higher priority waits for the delay
	clock.Advance(50 * time.Millisecond)
	tb.ExpireDue()
	notGranted(t, ch) // w2 has the higher priority
	if _, ok := tb.CancelWait(w); ok {
		t.Fatal("cancelled waiter reported granted")
	}
}

func TestCancelWait(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("c")
	tok := mustAcquire(t, tb, "c", time.Second, "")
	w, ch := mustQueue(t, tb, &Request{Key: []byte("c"), TTL: time.Second})
	if _, ok := tb.CancelWait(w); ok {
		t.Fatal("queued waiter reported granted on cancel")
	}
	tb.Release(k, tok)
	notGranted(t, ch)
	if _, ok := tb.Status(k); ok {
		t.Fatal("lock kept after its only waiter left and its lease ended")
	}

	// A grant that beats the cancel is reported by CancelWait.
	tok = mustAcquire(t, tb, "c", time.Second, "")
	w, ch = mustQueue(t, tb, &Request{Key: []byte("c"), TTL: time.Second})
	tb.Release(k, tok)
	got, ok := tb.CancelWait(w)
	if !ok || got != granted(t, ch) || !tb.Verify(k, got) {
		t.Fatalf("CancelWait after the grant = %d, %v", got, ok)
	}
	if _, ok := tb.CancelWait(&Wait{}); ok {
		t.Fatal("CancelWait of a Wait never queued reported granted")
	}
}

func TestAcquireWaitGrantsAtOnceWhenFree(t *testing.T) {
	tb, _ := newTestTable(t)
	w, ch := waiter()
	tok, ok, err := tb.AcquireWait(&Request{Key: []byte("f"), TTL: time.Second, Owner: []byte("me")}, w)
	if !ok || err != nil {
		t.Fatalf("AcquireWait of a free lock = %d, %v, %v", tok, ok, err)
	}
	notGranted(t, ch) // granted directly, not through Notify
	w2, _ := waiter()
	if again, ok, _ := tb.AcquireWait(&Request{Key: []byte("f"), TTL: 2 * time.Second, Owner: []byte("me")}, w2); !ok || again != tok {
		t.Fatalf("owner retry with wait = %d, %v; want the same token %d", again, ok, tok)
	}
	if _, err := tb.Delete([]byte("f")); !errors.Is(err, ErrInUse) {
		t.Fatalf("Delete of a held lock: %v", err)
	}
	w3, _ := waiter()
	if _, _, err := tb.AcquireWait(&Request{Key: []byte("nodefault")}, w3); !errors.Is(err, ErrNoTTL) {
		t.Fatalf("AcquireWait without a ttl: %v", err)
	}
	tb.Create([]byte("busy"), CreateOptions{})
	t4 := mustAcquire(t, tb, "busy", time.Second, "")
	mustQueue(t, tb, &Request{Key: []byte("busy"), TTL: time.Second})
	tb.Release([]byte("busy"), t4)
	if _, err := tb.Delete([]byte("busy")); !errors.Is(err, ErrInUse) {
		t.Fatalf("Delete of a lock its waiter now holds: %v", err)
	}
}

// TestWaitersUnderConcurrency runs many goroutines that wait for a few
// locks, some giving up, and checks that every grant went to exactly one
// waiter at a time and that tokens only grow.
func TestWaitersUnderConcurrency(t *testing.T) {
	tb, _ := newTestTable(t)
	var mu sync.Mutex
	holder := map[string]uint64{} // key -> current holder's token
	last := map[string]uint64{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				key := fmt.Sprint("k", (g+i)%3)
				w, ch := waiter()
				tok, ok, err := tb.AcquireWait(&Request{Key: []byte(key), TTL: time.Minute, Priority: i % 3}, w)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					if i%5 == 0 { // give up
						if tok, ok = tb.CancelWait(w); !ok {
							continue
						}
					} else {
						tok = <-ch
					}
				}
				mu.Lock()
				if h := holder[key]; h != 0 {
					t.Errorf("%s granted %d while %d holds it", key, tok, h)
				}
				if tok <= last[key] {
					t.Errorf("%s token %d after %d", key, tok, last[key])
				}
				holder[key], last[key] = tok, tok
				mu.Unlock()
				// The critical section: nobody else may be granted key now.
				mu.Lock()
				delete(holder, key)
				mu.Unlock()
				if !tb.Release([]byte(key), tok) {
					t.Errorf("%s: release of %d failed", key, tok)
				}
			}
		}()
	}
	wg.Wait()
	if st := tb.Stats(); st.Held != 0 || st.Locks != 0 {
		t.Fatalf("left behind: %+v", st)
	}
}

// TestOwnerRetryTakesItsPlaceInTheQueue: a waiting request retried with the
// same OWNER (from a new connection, say) does not queue twice.
func TestOwnerRetryTakesItsPlaceInTheQueue(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("r")
	tok := mustAcquire(t, tb, "r", time.Second, "")
	_, firstCh := mustQueue(t, tb, &Request{Key: []byte("r"), TTL: time.Second})
	_, oldCh := mustQueue(t, tb, &Request{Key: []byte("r"), TTL: time.Second, Owner: []byte("job-42")})
	_, lastCh := mustQueue(t, tb, &Request{Key: []byte("r"), TTL: time.Second})
	_, retryCh := mustQueue(t, tb, &Request{Key: []byte("r"), TTL: time.Second, Priority: 9, Owner: []byte("job-42")})
	if got := granted(t, oldCh); got != 0 {
		t.Fatalf("the superseded wait was notified with %d, want 0", got)
	}
	if st, _ := tb.Status(k); st.Waiters != 3 {
		t.Fatalf("%d waiters, want 3: the retry took the old place", st.Waiters)
	}
	tb.Release(k, tok)
	t1 := granted(t, firstCh)
	notGranted(t, retryCh) // its place is the old one's, behind first, despite PRIORITY 9
	tb.Release(k, t1)
	t2 := granted(t, retryCh)
	notGranted(t, lastCh)
	// Granted, the owner's retry returns the same token.
	again, _ := waiter()
	if tok, ok, _ := tb.AcquireWait(&Request{Key: k, TTL: time.Second, Owner: []byte("job-42")}, again); !ok || tok != t2 {
		t.Fatalf("retry of the holder = %d, %v; want %d", tok, ok, t2)
	}
}

// TestGiveBack: a lease a queue granted to a waiter who is gone is given
// back, unless it was renewed since (its owner's later ACQUIRE was
// answered with it, or an EXTEND named it): then it is someone's, and it
// stays. Exclusive leases and shared ones alike.
func TestGiveBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  Mode
		renew func(tb *Table, key string, token uint64)
	}{
		{"untouched", Exclusive, nil},
		{"owner's retry", Exclusive, func(tb *Table, key string, _ uint64) {
			mustAcquire(t, tb, key, time.Minute, "me")
		}},
		{"extend", Exclusive, func(tb *Table, key string, token uint64) {
			if ok, err := tb.Extend([]byte(key), token, time.Minute); !ok || err != nil {
				t.Fatalf("Extend: %v, %v", ok, err)
			}
		}},
		{"shared untouched", Shared, nil},
		{"shared owner's retry", Shared, func(tb *Table, key string, _ uint64) {
			mustAcquireShared(t, tb, key, time.Minute, "me")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, _ := newTestTable(t)
			held := mustAcquire(t, tb, "k", time.Minute, "")
			_, ch := mustQueue(t, tb, &Request{Key: []byte("k"), TTL: time.Minute, Owner: []byte("me"), Mode: tc.mode, Wait: time.Minute})
			tb.Release([]byte("k"), held)
			token := granted(t, ch)
			if tc.renew != nil {
				tc.renew(tb, "k", token)
			}
			gave := tb.GiveBack([]byte("k"), token)
			if want := tc.renew == nil; gave != want {
				t.Fatalf("GiveBack = %v, want %v", gave, want)
			}
			if live := tb.Verify([]byte("k"), token); live == gave {
				t.Fatalf("after GiveBack = %v the lease is live: %v", gave, live)
			}
		})
	}
	// A lease granted again after one that was renewed starts unrenewed.
	tb, _ := newTestTable(t)
	first := mustAcquire(t, tb, "k", time.Minute, "")
	if ok, _ := tb.Extend([]byte("k"), first, time.Minute); !ok {
		t.Fatal("Extend failed")
	}
	_, ch := mustQueue(t, tb, &Request{Key: []byte("k"), TTL: time.Minute, Wait: time.Minute})
	tb.Release([]byte("k"), first)
	if token := granted(t, ch); !tb.GiveBack([]byte("k"), token) {
		t.Fatal("a fresh grant after a renewed lease was not given back")
	}
}
