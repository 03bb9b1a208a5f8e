package contention

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func newStats(t testing.TB, top, shards int) *Stats {
	t.Helper()
	s, err := New(Config{Top: top, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"default", Config{Top: DefaultTop, Shards: 8}, true},
		{"zero top", Config{Top: 0, Shards: 8}, false},
		{"huge top", Config{Top: 100001, Shards: 8}, false},
		{"zero shards", Config{Top: 1, Shards: 0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestHistogramQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		samples  []time.Duration
		q        float64
		atLeast  time.Duration
		atMostUp float64 // the bound may exceed the truth by this factor
	}{
		{"empty", nil, 0.5, 0, 1},
		{"one exact small", []time.Duration{3 * time.Microsecond}, 0.5, 3 * time.Microsecond, 1},
		{"one ms", []time.Duration{time.Millisecond}, 0.99, time.Millisecond, 1.25},
		{"median of spread", []time.Duration{time.Millisecond, 2 * time.Millisecond, 100 * time.Millisecond}, 0.5, 2 * time.Millisecond, 1.25},
		{"p99 of tail", append(repeat(time.Millisecond, 98), time.Second, time.Second), 0.99, time.Second, 1.25},
		{"beyond range", []time.Duration{100 * time.Hour}, 0.5, time.Duration(upperBound(buckets-1)) * time.Microsecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h histogram
			for _, d := range tc.samples {
				h.add(d)
			}
			got := h.quantile(tc.q)
			if got < tc.atLeast || float64(got) > float64(tc.atLeast)*tc.atMostUp {
				t.Fatalf("quantile(%v) = %v, want within [%v, %v×]", tc.q, got, tc.atLeast, tc.atMostUp)
			}
		})
	}
}

func TestBucketBounds(t *testing.T) {
	// Every duration falls in a bucket whose upper bound is at least it and
	// under 25% above it, and buckets are in order.
	for us := uint64(0); us < 1<<20; us += 1 + us/7 {
		i := bucketOf(us)
		ub := upperBound(i)
		if ub < us || float64(ub) > float64(us)*1.25+1 {
			t.Fatalf("%d µs: bucket %d bound %d", us, i, ub)
		}
		if i > 0 && upperBound(i-1) >= us {
			t.Fatalf("%d µs: bucket %d, but bucket %d's bound %d covers it", us, i, i-1, upperBound(i-1))
		}
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d
	}
	return s
}

func TestStatsCounts(t *testing.T) {
	s := newStats(t, 10, 4)
	// hot: 3 grants, two after a wait, one wait timed out; 2 holds of 10 ms
	// and 30 ms, one expiry.
	s.Acquired("hot")
	s.Ended("hot", 10*time.Millisecond, false)
	s.Acquired("hot")
	s.Waited("hot", 5*time.Millisecond, true)
	s.Acquired("hot")
	s.Ended("hot", 30*time.Millisecond, true)
	s.Waited("hot", 50*time.Millisecond, false)
	s.Acquired("cold")
	s.Ended("cold", 0, false) // a lease whose grant was not seen: no hold time

	got, err := s.Report(0, ByWaits, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "hot" || got[1].Key != "cold" {
		t.Fatalf("report = %+v", got)
	}
	hot := got[0]
	if hot.Acquisitions != 3 || hot.Waits != 2 || hot.Timeouts != 1 || hot.Expiries != 1 {
		t.Fatalf("hot = %+v", hot)
	}
	if hot.HoldP50 < 10*time.Millisecond || hot.HoldP50 > 13*time.Millisecond {
		t.Fatalf("hold p50 = %v, want about 10ms", hot.HoldP50)
	}
	if hot.HoldP99 < 30*time.Millisecond || hot.HoldP99 > 38*time.Millisecond {
		t.Fatalf("hold p99 = %v, want about 30ms", hot.HoldP99)
	}
	if hot.WaitP99 < 50*time.Millisecond || hot.WaitP99 > 63*time.Millisecond {
		t.Fatalf("wait p99 = %v, want about 50ms", hot.WaitP99)
	}
	if got[1].HoldP50 != 0 {
		t.Fatalf("cold hold p50 = %v, want 0 (no hold time known)", got[1].HoldP50)
	}
}

func TestReportOrders(t *testing.T) {
	s := newStats(t, 10, 2)
	// a: most acquisitions; b: most waits; c: longest wait; d: most
	// expiries; e: longest hold.
	for range 5 {
		s.Acquired("a")
	}
	for range 3 {
		s.Waited("b", time.Millisecond, true)
	}
	s.Waited("c", time.Second, false)
	for range 2 {
		s.Acquired("d")
		s.Ended("d", time.Millisecond, true)
	}
	s.Acquired("e")
	s.Ended("e", time.Minute, false)
	for _, tc := range []struct{ by, first string }{
		{ByAcquisitions, "a"}, {ByWaits, "b"}, {ByWaitTime, "c"}, {ByExpiries, "d"}, {ByHoldTime, "e"},
	} {
		t.Run(tc.by, func(t *testing.T) {
			got, err := s.Report(0, tc.by, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 5 || got[0].Key != tc.first {
				t.Fatalf("first = %q, want %q (%+v)", got[0].Key, tc.first, got)
			}
		})
	}
	if _, err := s.Report(0, "nonsense", nil); !errors.Is(err, ErrUnknownOrder) {
		t.Fatalf("unknown order: %v", err)
	}
	if got, _ := s.Report(2, ByAcquisitions, nil); len(got) != 2 {
		t.Fatalf("top 2: %d entries", len(got))
	}
	if got, _ := s.Report(0, ByAcquisitions, func(k string) bool { return k != "a" }); len(got) != 4 || got[0].Key == "a" {
		t.Fatalf("filtered: %+v", got)
	}
}

func TestHeavyHittersSurviveChurn(t *testing.T) {
	// Four hot keys among 1e5 cold ones, each seen once: a key with more
	// than events/capacity events is tracked at the end (Space-Saving's
	// guarantee), with a count at least its true count.
	s := newStats(t, 50, 1)
	for i := range 100000 {
		s.Acquired(fmt.Sprintf("cold-%d", i))
		if i%4 == 0 {
			s.Acquired(fmt.Sprintf("hot-%d", i%16/4))
		}
	}
	got, err := s.Report(4, ByAcquisitions, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range got {
		if !strings.HasPrefix(st.Key, "hot-") || st.Count < 6250 {
			t.Fatalf("top %d = %+v, want a hot key counted at least 6250 times", i, st)
		}
	}
}

func TestMemoryBounded(t *testing.T) {
	const top, shards, keys = 50, 4, 100000
	s := newStats(t, top, shards)
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		s.Acquired(k)
		s.Waited(k, time.Millisecond, i%2 == 0)
		s.Ended(k, time.Microsecond, i%3 == 0)
	}
	if n := s.Tracked(); n > top*shards {
		t.Fatalf("tracks %d locks, want at most %d", n, top*shards)
	}
	for i := range s.shards {
		sh := &s.shards[i]
		if len(sh.byKey) > top || len(sh.minHeap) > top || len(sh.byKey) != len(sh.minHeap) {
			t.Fatalf("shard %d: %d keys, %d in heap", i, len(sh.byKey), len(sh.minHeap))
		}
		for j, e := range sh.minHeap {
			if e.index != j || sh.byKey[e.key] != e {
				t.Fatalf("shard %d: heap and index disagree at %d", i, j)
			}
		}
	}
	if got, _ := s.Report(0, ByWaits, nil); len(got) != top {
		t.Fatalf("report has %d locks, want %d", len(got), top)
	}
}

// TestBorrowedKeys: Stats copies the keys it keeps, so a caller may pass a
// key whose bytes it reuses afterwards (a lock table's event), and a report
// keeps its keys when the sketch later reuses an entry for another lock.
func TestBorrowedKeys(t *testing.T) {
	s := newStats(t, 1, 1)
	buf := []byte("alpha")
	borrowed := unsafe.String(&buf[0], len(buf))
	s.Acquired(borrowed)
	copy(buf, "omega")
	report, _ := s.Report(0, ByAcquisitions, nil)
	if len(report) != 1 || report[0].Key != "alpha" {
		t.Fatalf("report %+v, want the lock alpha", report)
	}
	s.Acquired("bravo") // displaces alpha, reusing its entry
	s.Acquired("bravo")
	if report[0].Key != "alpha" {
		t.Fatalf("an earlier report's key became %q", report[0].Key)
	}
	if now, _ := s.Report(0, ByAcquisitions, nil); len(now) != 1 || now[0].Key != "bravo" || now[0].Acquisitions != 2 {
		t.Fatalf("report %+v, want bravo with 2 acquisitions", now)
	}
}

// TestTrackedKeysAllocateNothing: the events of a tracked lock, and those
// of locks displacing each other once the entries' buffers fit their keys,
// allocate nothing.
func TestTrackedKeysAllocateNothing(t *testing.T) {
	s := newStats(t, 2, 1)
	keys := []string{"lock:1", "lock:2", "lock:3"}
	for _, k := range keys {
		s.Acquired(k) // every entry's buffer sized
	}
	for _, tc := range []struct {
		name string
		keys []string
	}{{"tracked", keys[2:]}, {"displacing", keys}} {
		allocs := testing.AllocsPerRun(100, func() {
			for _, k := range tc.keys {
				s.Acquired(k)
				s.Ended(k, time.Millisecond, false)
				s.Waited(k, time.Millisecond, true)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per round, want 0", tc.name, allocs)
		}
	}
}
