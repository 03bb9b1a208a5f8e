package locker

import (
	"testing"
	"time"
)

func TestBucketOf(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		d    int64
		want int
	}{
		{-5, 0}, {0, 0}, {1, 0}, {ms, 0}, {ms + 1, 1}, {2 * ms, 1}, {2*ms + 1, 2},
		{3 * ms, 2}, {4 * ms, 2}, {600 * 1000 * ms, 20}, {1 << 20 * ms, 20}, {1<<20*ms + 1, DurationBuckets},
		{1 << 62, DurationBuckets},
	} {
		if got := bucketOf(tc.d); got != tc.want {
			t.Errorf("bucketOf(%v) = %d, want %d", time.Duration(tc.d), got, tc.want)
		}
		if tc.want < DurationBuckets && tc.d > 0 && time.Duration(tc.d) > BucketBound(tc.want) {
			t.Errorf("%v counted in the bucket up to %v", time.Duration(tc.d), BucketBound(tc.want))
		}
	}
}

// only returns the one bucket of h that counts anything, and fails unless
// there is exactly one, counting n.
func only(t *testing.T, name string, h Histogram, n uint64) int {
	t.Helper()
	found := -1
	for k, c := range h.Counts {
		if c != 0 {
			if found >= 0 || c != n {
				t.Fatalf("%s: counts %v, want %d in one bucket", name, h.Counts, n)
			}
			found = k
		}
	}
	if found < 0 || h.Count != n {
		t.Fatalf("%s: counts %v (count %d), want %d in one bucket", name, h.Counts, h.Count, n)
	}
	return found
}

func TestHoldTime(t *testing.T) {
	tb, clock := newTestTable(t)
	tok := mustAcquire(t, tb, "x", time.Second, "")
	clock.Advance(3 * time.Millisecond)
	tb.Release([]byte("x"), tok)
	st := tb.Stats()
	if k := only(t, "hold", st.HoldTime, 1); BucketBound(k) != 4*time.Millisecond || st.HoldTime.Sum != 3*time.Millisecond {
		t.Fatalf("a 3 ms hold counted up to %v, sum %v", BucketBound(k), st.HoldTime.Sum)
	}

	// An expired lease is held up to its deadline, however late the reaper.
	tb2, clock2 := newTestTable(t)
	mustAcquire(t, tb2, "x", 10*time.Millisecond, "")
	mustAcquireShared(t, tb2, "r", 100*time.Millisecond, "")
	clock2.Advance(time.Second)
	if n := tb2.ExpireDue(); n != 2 {
		t.Fatalf("ExpireDue = %d, want 2", n)
	}
	st = tb2.Stats()
	if st.HoldTime.Count != 2 || st.HoldTime.Counts[bucketOf(int64(10*time.Millisecond))] != 1 ||
		st.HoldTime.Counts[bucketOf(int64(100*time.Millisecond))] != 1 || st.HoldTime.Sum != 110*time.Millisecond {
		t.Fatalf("holds of 10 and 100 ms: %+v", st.HoldTime)
	}
	// The reaper expired them 990 and 900 ms late.
	if st.ReaperLateness.Count != 2 || st.ReaperLateness.Sum != 1890*time.Millisecond ||
		st.ReaperLateness.Counts[bucketOf(int64(990*time.Millisecond))] != 2 {
		t.Fatalf("reaper lateness %+v, want 990 ms and 900 ms", st.ReaperLateness)
	}
}

func TestReaperLatenessNotCountedOnTouch(t *testing.T) {
	tb, clock := newTestTable(t)
	mustAcquire(t, tb, "x", 10*time.Millisecond, "")
	clock.Advance(50 * time.Millisecond)
	mustAcquire(t, tb, "x", time.Second, "") // expires the old lease first
	tb.ExpireDue()
	st := tb.Stats()
	if st.ReaperLateness.Count != 0 || st.Expired != 1 || st.HoldTime.Count != 1 {
		t.Fatalf("lateness %+v, expired %d, holds %d; want no lateness, 1 expiry, 1 hold", st.ReaperLateness, st.Expired, st.HoldTime.Count)
	}
}

func TestWaitTimeAndHandOffs(t *testing.T) {
	tb, clock := newTestTable(t)
	k := []byte("x")
	tok := mustAcquire(t, tb, "x", time.Second, "")
	_, ch := mustQueue(t, tb, &Request{Key: k, TTL: 10 * time.Millisecond})
	clock.Advance(5 * time.Millisecond)
	tb.Release(k, tok) // hands the lock to the waiter
	granted(t, ch)
	mustQueue(t, tb, &Request{Key: k, TTL: time.Second})
	clock.Advance(15 * time.Millisecond)
	tb.ExpireDue() // the waiter's lease expires: a second hand-off
	cancelled, _ := mustQueue(t, tb, &Request{Key: k, TTL: time.Second, Owner: []byte("late")})
	clock.Advance(100 * time.Millisecond)
	tb.CancelWait(cancelled) // gave up after 100 ms
	st := tb.Stats()
	if st.HandOffs != 2 || st.WaitGrants != 2 {
		t.Fatalf("hand-offs %d, wait grants %d; want 2, 2", st.HandOffs, st.WaitGrants)
	}
	want := map[int]uint64{bucketOf(int64(5 * time.Millisecond)): 1, bucketOf(int64(15 * time.Millisecond)): 1, bucketOf(int64(100 * time.Millisecond)): 1}
	for b, c := range st.WaitTime.Counts {
		if c != want[b] {
			t.Fatalf("wait time buckets %v, want 5, 15 and 100 ms", st.WaitTime.Counts)
		}
	}
	if st.WaitTime.Sum != 120*time.Millisecond {
		t.Fatalf("wait time sum %v, want 120ms", st.WaitTime.Sum)
	}
}

// TestGrantOnArrivalIsNoHandOff: a reader queued by its priority ahead of
// a writer that waits for readers to leave is granted as it arrives; the
// lock passed from no one.
func TestGrantOnArrivalIsNoHandOff(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("rw")
	mustAcquireShared(t, tb, "rw", time.Second, "a")
	mustQueue(t, tb, &Request{Key: k, TTL: time.Second}) // a writer waits
	w, _ := waiter()
	if _, ok, err := tb.AcquireWait(&Request{Key: k, TTL: time.Second, Mode: Shared, Priority: 1}, w); !ok || err != nil {
		t.Fatalf("a reader ahead of the writer: granted %v, %v; want at once", ok, err)
	}
	if st := tb.Stats(); st.HandOffs != 0 || st.WaitGrants != 1 {
		t.Fatalf("hand-offs %d, wait grants %d; want 0, 1", st.HandOffs, st.WaitGrants)
	}
}

func TestLockDelayRefusals(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.LockDelay = time.Second })
	mustAcquire(t, tb, "x", 10*time.Millisecond, "")
	mustNotAcquire(t, tb, "x", time.Second, "") // held: no lock-delay refusal
	clock.Advance(20 * time.Millisecond)
	mustNotAcquire(t, tb, "x", time.Second, "") // expired, in its lock-delay
	mustNotAcquire(t, tb, "x", time.Second, "")
	if n := tb.Stats().LockDelayRefusals; n != 2 {
		t.Fatalf("lock-delay refusals %d, want 2", n)
	}
	// A semaphore full of a permit's lock-delay refuses for it too.
	if _, err := tb.Create([]byte("sem"), CreateOptions{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, tb, "sem", 10*time.Millisecond, "")
	clock.Advance(20 * time.Millisecond)
	mustNotAcquire(t, tb, "sem", time.Second, "")
	if n := tb.Stats().LockDelayRefusals; n != 3 {
		t.Fatalf("lock-delay refusals %d, want 3", n)
	}
	clock.Advance(2 * time.Second)
	mustAcquire(t, tb, "x", time.Second, "")
	if n := tb.Stats().LockDelayRefusals; n != 3 {
		t.Fatalf("lock-delay refusals %d after the delay, want 3", n)
	}
}

func TestHeldByMode(t *testing.T) {
	tb, clock := newTestTable(t)
	if _, err := tb.Create([]byte("sem"), CreateOptions{Limit: 3}); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, tb, "x", time.Second, "")
	r := mustAcquireShared(t, tb, "rw", time.Second, "a")
	mustAcquireShared(t, tb, "rw", 10*time.Millisecond, "b")
	mustAcquire(t, tb, "sem", time.Second, "")
	mustAcquire(t, tb, "sem", time.Second, "")
	check := func(when string, held, shared, permits int) {
		t.Helper()
		if st := tb.Stats(); st.Held != held || st.HeldShared != shared || st.HeldPermits != permits {
			t.Fatalf("%s: held %d (shared %d, permits %d), want %d (%d, %d)", when, st.Held, st.HeldShared, st.HeldPermits, held, shared, permits)
		}
	}
	check("granted", 5, 2, 2)
	tb.Release([]byte("rw"), r)
	check("a reader released", 4, 1, 2)
	clock.Advance(20 * time.Millisecond)
	tb.ExpireDue()
	check("a reader expired", 3, 0, 2)
	tb.ForceRelease([]byte("sem"), AllLeases)
	check("the permits forced", 1, 0, 0)
}
