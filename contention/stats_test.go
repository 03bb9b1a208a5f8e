package contention

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ ns int64 }

func (c *fakeClock) now() int64              { return c.ns }
func (c *fakeClock) advance(d time.Duration) { c.ns += int64(d) }

func newStats(t testing.TB, top, shards int) (*Stats, *fakeClock) {
	t.Helper()
	clk := &fakeClock{ns: 1}
	s, err := New(Config{Top: top, Shards: shards, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func TestConfigValidate(t *testing.T) {
	now := func() int64 { return 0 }
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"default", Config{Top: DefaultTop, Shards: 8, Now: now}, true},
		{"zero top", Config{Top: 0, Shards: 8, Now: now}, false},
		{"huge top", Config{Top: 100001, Shards: 8, Now: now}, false},
		{"zero shards", Config{Top: 1, Shards: 0, Now: now}, false},
		{"no clock", Config{Top: 1, Shards: 1}, false},
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
	s, clk := newStats(t, 10, 4)
	// hot: 3 grants, two after a wait, one wait timed out; 2 holds of 10 ms
	// and 30 ms, one expiry.
	s.Acquired("hot", 1)
	clk.advance(10 * time.Millisecond)
	s.Ended("hot", 1, false)
	s.Acquired("hot", 2)
	s.Waited("hot", 5*time.Millisecond, true)
	s.Acquired("hot", 3)
	clk.advance(30 * time.Millisecond)
	s.Ended("hot", 3, true)
	s.Waited("hot", 50*time.Millisecond, false)
	s.Acquired("cold", 9)
	s.Ended("cold", 9, false)
	s.Ended("cold", 12345, false) // a lease whose grant was not seen: no hold time

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
	if got[1].HoldP50 != 0 && got[1].HoldP50 > time.Microsecond {
		t.Fatalf("cold hold p50 = %v, want 0 (no time passed)", got[1].HoldP50)
	}
}

func TestReportOrders(t *testing.T) {
	s, clk := newStats(t, 10, 2)
	// a: most acquisitions; b: most waits; c: longest wait; d: most
	// expiries; e: longest hold.
	for i := range 5 {
		s.Acquired("a", uint64(i+1))
	}
	for range 3 {
		s.Waited("b", time.Millisecond, true)
	}
	s.Waited("c", time.Second, false)
	for i := range 2 {
		s.Acquired("d", uint64(i+1))
		s.Ended("d", uint64(i+1), true)
	}
	s.Acquired("e", 1)
	clk.advance(time.Minute)
	s.Ended("e", 1, false)
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
	s, _ := newStats(t, 50, 1)
	for i := range 100000 {
		s.Acquired(fmt.Sprintf("cold-%d", i), 1)
		if i%4 == 0 {
			s.Acquired(fmt.Sprintf("hot-%d", i%16/4), uint64(i+1))
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
	s, clk := newStats(t, top, shards)
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		s.Acquired(k, uint64(i+1))
		clk.advance(time.Microsecond)
		s.Waited(k, time.Millisecond, i%2 == 0)
		s.Ended(k, uint64(i+1), i%3 == 0)
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
