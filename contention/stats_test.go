package contention

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

var leases atomic.Uint64

// lease returns a new lease token: each call another, as a lock table's
// grants are.
func lease() uint64 { return leases.Add(1) }

// sampledLease returns a new lease token whose events on key the admission
// filter samples.
func sampledLease(s *Stats, key string) uint64 {
	for {
		if tok := lease(); s.sample(s.hash(key), tok, grant) {
			return tok
		}
	}
}

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
		name    string
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one exact small", []time.Duration{3 * time.Microsecond}, 0.5, 3 * time.Microsecond},
		{"one ms", []time.Duration{time.Millisecond}, 0.99, time.Millisecond},
		{"median of spread", []time.Duration{time.Millisecond, 2 * time.Millisecond, 100 * time.Millisecond}, 0.5, 2 * time.Millisecond},
		{"median of two is the lower", []time.Duration{time.Millisecond, time.Second}, 0.5, time.Millisecond},
		{"p99 of two is the higher", []time.Duration{time.Millisecond, time.Second}, 0.99, time.Second},
		{"p99 of tail", append(repeat(time.Millisecond, 98), time.Second, time.Second), 0.99, time.Second},
		{"beyond range is the largest", []time.Duration{time.Second, 100 * time.Hour}, 0.99, 100 * time.Hour},
		{"rounded to the microsecond", []time.Duration{1499 * time.Nanosecond}, 0.5, time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h histogram
			for _, d := range tc.samples {
				h.add(d)
			}
			if got := h.quantile(tc.q); !within(got, tc.want, 1.0/64) {
				t.Fatalf("quantile(%v) = %v, want %v within 1/64", tc.q, got, tc.want)
			}
		})
	}
}

// TestHistogramAccuracy: against known distributions, every percentile the
// histogram estimates is within 2% of the sample's true one (the nearest
// rank), including those a bucket's upper bound missed by up to 25%: a
// constant 60 s wait (a timeout) came out as 67108.863 ms.
func TestHistogramAccuracy(t *testing.T) {
	const n = 100000
	for _, tc := range []struct {
		name string
		draw func(r *rand.Rand) time.Duration
	}{
		{"constant 60 s", func(*rand.Rand) time.Duration { return 60 * time.Second }},
		{"constant 1 ms", func(*rand.Rand) time.Duration { return time.Millisecond }},
		{"uniform 1 ms to 100 ms", func(r *rand.Rand) time.Duration {
			return time.Millisecond + time.Duration(r.Int64N(int64(99*time.Millisecond)))
		}},
		{"uniform 0 to 60 s", func(r *rand.Rand) time.Duration { return time.Duration(r.Int64N(int64(60 * time.Second))) }},
		{"exponential mean 20 ms", func(r *rand.Rand) time.Duration {
			return time.Duration(r.ExpFloat64() * float64(20*time.Millisecond))
		}},
		{"exponential mean 300 µs", func(r *rand.Rand) time.Duration {
			return 50*time.Microsecond + time.Duration(r.ExpFloat64()*float64(300*time.Microsecond))
		}},
		{"bimodal 2 ms and 500 ms", func(r *rand.Rand) time.Duration {
			if r.IntN(10) < 7 {
				return time.Duration((2 + 0.2*r.NormFloat64()) * float64(time.Millisecond))
			}
			return time.Duration((500 + 50*r.NormFloat64()) * float64(time.Millisecond))
		}},
		{"bimodal constants 5 ms and 60 s", func(r *rand.Rand) time.Duration {
			if r.IntN(10) < 4 {
				return 5 * time.Millisecond
			}
			return 60 * time.Second
		}},
		{"log-uniform 40 µs to 9 hours", func(r *rand.Rand) time.Duration {
			return time.Duration(40e3 * math.Pow(float64(9*time.Hour)/40e3, r.Float64()))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var h histogram
			samples := make([]time.Duration, n)
			for i := range samples {
				samples[i] = tc.draw(r)
				h.add(samples[i])
			}
			slices.Sort(samples)
			for _, q := range []float64{0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1} {
				want := samples[int(math.Ceil(q*n))-1]
				if got := h.quantile(q); !within(got, want, 0.02) {
					t.Errorf("p%v = %v, want %v within 2%% (%.2f%% off)", q*100, got, want, 100*(float64(got)/float64(want)-1))
				}
			}
		})
	}
}

// within reports whether got is within frac of want.
func within(got, want time.Duration, frac float64) bool {
	return math.Abs(float64(got-want)) <= frac*float64(want)
}

func TestBucketBounds(t *testing.T) {
	// Every duration falls in a bucket that holds it and is at most 1/32 of
	// its lower bound wide (exact under 32 µs), and buckets are in order.
	prev := -1
	for us := uint64(0); us < 1<<maxOctave; us += 1 + us/97 {
		i := bucketOf(us)
		lower, width := bucketRange(i)
		if us < lower || us >= lower+width || (us >= subBuckets && width*subBuckets > lower) || (us < subBuckets && width != 1) {
			t.Fatalf("%d µs: bucket %d is [%d, %d)", us, i, lower, lower+width)
		}
		if i < prev {
			t.Fatalf("%d µs: bucket %d, after bucket %d", us, i, prev)
		}
		prev = i
	}
	if i := bucketOf(1<<maxOctave + 5); i != buckets-1 {
		t.Fatalf("beyond the range: bucket %d, want the last, %d", i, buckets-1)
	}
}

// TestHistogramReset: a reset histogram counts afresh, as an empty one.
func TestHistogramReset(t *testing.T) {
	var h histogram
	for _, d := range []time.Duration{time.Microsecond, time.Second, time.Hour} {
		h.add(d)
	}
	h.reset()
	if h != (histogram{}) {
		t.Fatalf("after reset: total %d, min %d, max %d, or a bucket left", h.total, h.min, h.max)
	}
	h.add(20 * time.Millisecond)
	if got := h.quantile(0.5); got != 20*time.Millisecond {
		t.Fatalf("quantile after reset = %v, want 20ms", got)
	}
}

func TestRoundedMillis(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{time.Microsecond, "0.001"},
		{159400 * time.Nanosecond, "0.159"},
		{20540 * time.Microsecond, "20.5"},
		{20550 * time.Microsecond, "20.6"},
		{999999 * time.Microsecond, "1000"},
		{60 * time.Second, "60000"},
		{67108863 * time.Microsecond, "67100"},
		{100 * time.Hour, "360000000"},
	} {
		if got := FormatMillis(tc.d); got != tc.want {
			t.Errorf("FormatMillis(%v) = %q, want %q", tc.d, got, tc.want)
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
	s.Acquired("hot", lease())
	s.Ended("hot", lease(), 10*time.Millisecond, false)
	s.Acquired("hot", lease())
	s.Waited("hot", 5*time.Millisecond, true)
	s.Acquired("hot", lease())
	s.Ended("hot", lease(), 30*time.Millisecond, true)
	s.Waited("hot", 50*time.Millisecond, false)
	s.Acquired("cold", lease())
	s.Ended("cold", lease(), 0, false) // a lease whose grant was not seen: no hold time

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
	for _, p := range []struct {
		name      string
		got, want time.Duration
	}{{"hold p50", hot.HoldP50, 10 * time.Millisecond}, {"hold p99", hot.HoldP99, 30 * time.Millisecond}, {"wait p99", hot.WaitP99, 50 * time.Millisecond}} {
		if !within(p.got, p.want, 0.02) {
			t.Errorf("%s = %v, want %v within 2%%", p.name, p.got, p.want)
		}
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
		s.Acquired("a", lease())
	}
	for range 3 {
		s.Waited("b", time.Millisecond, true)
	}
	s.Waited("c", time.Second, false)
	for range 2 {
		s.Acquired("d", lease())
		s.Ended("d", lease(), time.Millisecond, true)
	}
	s.Acquired("e", lease())
	s.Ended("e", lease(), time.Minute, false)
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
	// Four hot keys among 1e5 cold ones, each seen once: the hot keys,
	// tracked while the shard had room, are never displaced by a cold one
	// (whose estimate never reaches theirs), and count every grant.
	s := newStats(t, 50, 1)
	for i := range 100000 {
		s.Acquired(fmt.Sprintf("cold-%d", i), lease())
		if i%4 == 0 {
			s.Acquired(fmt.Sprintf("hot-%d", i%16/4), lease())
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
	per := Config{Top: top, Shards: shards}.PerShard()
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		s.Acquired(k, lease())
		s.Waited(k, time.Millisecond, i%2 == 0)
		s.Ended(k, lease(), time.Microsecond, i%3 == 0)
	}
	if n := s.Tracked(); n > per*shards {
		t.Fatalf("tracks %d locks, want at most %d", n, per*shards)
	}
	for i := range s.shards {
		sh := &s.shards[i]
		if len(sh.minHeap) > per {
			t.Fatalf("shard %d: %d locks tracked, want at most %d", i, len(sh.minHeap), per)
		}
		checkShard(t, sh)
	}
	if got, _ := s.Report(0, ByWaits, nil); len(got) != top {
		t.Fatalf("report has %d locks, want %d", len(got), top)
	}
}

// checkShard fails t unless sh's heap, index and entries agree: every
// entry in the heap at its index, under its key's hash, found by lookup,
// and nothing else in the index.
func checkShard(t *testing.T, sh *shard) {
	t.Helper()
	n := 0
	for i, h := range sh.index {
		if h != 0 {
			n++
			if e := sh.byIndex[i]; e == nil || e.hash != h {
				t.Fatalf("index place %d: hash %x, entry %+v", i, h, e)
			}
		}
	}
	if n != len(sh.minHeap) {
		t.Fatalf("index holds %d keys, heap %d", n, len(sh.minHeap))
	}
	present := make([]uint64, len(sh.present))
	for _, e := range sh.minHeap {
		slot := sh.presentSlot(e.hash)
		present[slot/64] |= 1 << (slot % 64)
	}
	for i := range present {
		if got := sh.present[i].Load(); got != present[i] {
			t.Fatalf("presence word %d is %x, want %x", i, got, present[i])
		}
	}
	for j, e := range sh.minHeap {
		if e.index != j || sh.lookup(e.hash, e.key) != e {
			t.Fatalf("heap and index disagree at %d (%q)", j, e.key)
		}
		if j > 0 && sh.minHeap[(j-1)/2].weight > e.weight {
			t.Fatalf("heap out of order at %d", j)
		}
	}
}

// TestBorrowedKeys: Stats copies the keys it keeps, so a caller may pass a
// key whose bytes it reuses afterwards (a lock table's event), and a report
// keeps its keys when the sketch later reuses an entry for another lock.
func TestBorrowedKeys(t *testing.T) {
	s := newStats(t, 1, 1)
	buf := []byte("alpha")
	borrowed := unsafe.String(&buf[0], len(buf))
	s.Acquired(borrowed, lease())
	copy(buf, "omega")
	report, _ := s.Report(0, ByAcquisitions, nil)
	if len(report) != 1 || report[0].Key != "alpha" {
		t.Fatalf("report %+v, want the lock alpha", report)
	}
	s.Acquired("bravo", lease()) // displaces alpha, reusing its entry
	s.Acquired("bravo", lease())
	if report[0].Key != "alpha" {
		t.Fatalf("an earlier report's key became %q", report[0].Key)
	}
	if now, _ := s.Report(0, ByAcquisitions, nil); len(now) != 1 || now[0].Key != "bravo" || now[0].Acquisitions != 2 {
		t.Fatalf("report %+v, want bravo with 2 acquisitions", now)
	}
}

// TestTrackedKeysAllocateNothing: the events of a tracked lock, those of
// keys the filter turns away, and those of locks displacing each other once
// the entries' buffers fit their keys, allocate nothing.
func TestTrackedKeysAllocateNothing(t *testing.T) {
	s := newStats(t, 1, 1)
	per := s.perShard
	var keys []string
	for i := range 4 * per {
		keys = append(keys, fmt.Sprintf("lock:%d", i))
	}
	for range 4 {
		for _, k := range keys {
			s.Acquired(k, sampledLease(s, k)) // every entry's buffer sized
		}
	}
	for _, tc := range []struct {
		name string
		keys []string
	}{{"tracked", keys[:1]}, {"filtered or displacing", keys}} {
		allocs := testing.AllocsPerRun(100, func() {
			for _, k := range tc.keys {
				tok := sampledLease(s, k)
				s.Acquired(k, tok)
				s.Ended(k, tok, time.Millisecond, false)
				s.Waited(k, time.Millisecond, true)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per round, want 0", tc.name, allocs)
		}
	}
}

// TestHashKey: every byte of a key counts in its hash, at every length
// around the word boundaries hashKey treats apart, and the seed does too.
func TestHashKey(t *testing.T) {
	seen := map[uint64]string{}
	for n := 0; n <= 24; n++ {
		key := []byte(strings.Repeat("k", n))
		variants := []string{string(key)}
		for i := range key {
			v := slices.Clone(key)
			v[i] ^= 1
			variants = append(variants, string(v))
		}
		for _, v := range variants {
			h := hashKey(1, v)
			if h == 0 {
				t.Fatalf("hash of %q is 0", v)
			}
			if other, dup := seen[h]; dup {
				t.Fatalf("%q and %q hash alike", v, other)
			}
			seen[h] = v
			if hashKey(2, v) == h {
				t.Fatalf("%q: the seed does not change the hash", v)
			}
		}
	}
}
