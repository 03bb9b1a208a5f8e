package contention

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// seeded makes s sample waits from a seeded generator (the shards' hash
// seed still varies from run to run).
func seeded(s *Stats, seed uint64) {
	s.rand = rand.New(rand.NewPCG(seed, seed+1))
}

// TestZipfTopTen: on skewed workloads (Zipf over 100k keys, seeded) mixed
// with a long tail of keys seen once each, the report's top 10 by
// acquisitions is the true top 10, in order, with the defaults. Each hot
// lock's acquisitions are exact from its admission on: at most its true
// count, and short of it by no more than the events it took to be
// admitted.
func TestZipfTopTen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		s        float64 // Zipf's exponent
		events   int     // Zipf-drawn lock cycles
		tailEach int     // one-off keys after each of them
	}{
		{"s=1.1, one one-off key a cycle", 1.1, 300000, 1},
		{"s=1.2, three one-off keys a cycle", 1.2, 200000, 3},
		{"s=1.05, no tail", 1.05, 300000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStats(t, DefaultTop, DefaultConfig().Shards)
			seeded(s, 7)
			r := rand.New(rand.NewPCG(1, 2))
			zipf := rand.NewZipf(r, tc.s, 1, 100000-1)
			truth := map[string]uint64{}
			tail := 0
			for range tc.events {
				k := fmt.Sprintf("zipf:%d", zipf.Uint64())
				truth[k]++
				tok := lease()
				s.Acquired(k, tok)
				s.Waited(k, time.Millisecond, true)
				s.Ended(k, tok, time.Millisecond, false)
				for range tc.tailEach {
					tail++
					k := fmt.Sprintf("tail:%d", tail)
					tok := lease()
					s.Acquired(k, tok)
					s.Ended(k, tok, time.Millisecond, false)
				}
			}
			type kc struct {
				key string
				n   uint64
			}
			var want []kc
			for k, n := range truth {
				want = append(want, kc{k, n})
			}
			slices.SortFunc(want, func(a, b kc) int { return cmp.Compare(b.n, a.n) })
			got, err := s.Report(10, ByAcquisitions, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				if got[i].Key != want[i].key {
					t.Errorf("top %d: %s with %d acquisitions (of %d), want %s with %d (next: %d)",
						i+1, got[i].Key, got[i].Acquisitions, truth[got[i].Key], want[i].key, want[i].n, want[i+1].n)
					continue
				}
				// The grants before the lock was tracked are missing:
				// about admitMin×sampleEvery leases' worth (up to 62 in
				// 30 runs), none for a lock tracked from its first.
				if a := got[i].Acquisitions; a > want[i].n || a+4*admitMin*sampleEvery < want[i].n {
					t.Errorf("top %d: %s has %d acquisitions, truly %d", i+1, got[i].Key, a, want[i].n)
				}
				// Count is grants and waits: two a cycle.
				if exact := got[i].Count - got[i].Error; exact > 2*want[i].n {
					t.Errorf("top %d: %s: %d exact events of %d", i+1, got[i].Key, exact, 2*want[i].n)
				}
			}
		})
	}
}

// TestAdmission: once a shard is full, a key seen once is not admitted (its
// events only count in the filter), a key whose sampled estimate beats the
// lightest tracked lock replaces it, counted afresh, and a hot tracked lock
// is not displaced by keys lighter than it.
func TestAdmission(t *testing.T) {
	s := newStats(t, 1, 1)
	per := s.perShard
	for i := range per {
		k := fmt.Sprintf("hot:%d", i)
		for range 100 * (i + 1) {
			s.Acquired(k, lease()) // tracked while the shard has room
		}
	}
	stat := func(k string) (LockStat, bool) {
		s.cfg.Top = per // report every lock tracked
		all, _ := s.Report(0, ByAcquisitions, nil)
		s.cfg.Top = 1
		i := slices.IndexFunc(all, func(st LockStat) bool { return st.Key == k })
		if i < 0 {
			return LockStat{}, false
		}
		return all[i], true
	}
	tracked := func(k string) bool { _, ok := stat(k); return ok }
	s.Acquired("once", sampledLease(s, "once"))
	if tracked("once") {
		t.Fatal("a key seen once was admitted to a full shard")
	}
	// hot:0 weighs 100: a newcomer needs an estimate above 100/sampleEvery
	// samples.
	for range 100 / sampleEvery { // only the sampled leases count
		s.Acquired("newcomer", sampledLease(s, "newcomer"))
	}
	if tracked("newcomer") {
		t.Fatal("a newcomer no hotter than the lightest lock was admitted")
	}
	s.Acquired("newcomer", sampledLease(s, "newcomer"))
	if !tracked("newcomer") || tracked("hot:0") {
		t.Fatal("a newcomer hotter than the lightest lock did not replace it")
	}
	for i := 1; i < per; i++ {
		if !tracked(fmt.Sprintf("hot:%d", i)) {
			t.Fatalf("hot:%d was displaced", i)
		}
	}
	if st, _ := stat("newcomer"); st.Acquisitions != 1 || st.Count-st.Error != 1 || st.Count != (100/sampleEvery+1)*sampleEvery {
		t.Fatalf("newcomer = %+v: want its admitting event counted, its estimate the rest", st)
	}
	checkShard(t, &s.shards[0])
}

// TestIndexModel: through many admissions and displacements, on an index
// crowded enough that probes wrap and a presence filter cut down to 64
// slots, so that tracked keys share slots, the shard's index, heap,
// presence bits and entries agree.
func TestIndexModel(t *testing.T) {
	s := newStats(t, 6, 1)
	seeded(s, 11)
	r := rand.New(rand.NewPCG(5, 6))
	sh := &s.shards[0]
	sh.present = sh.present[:1]
	for i := range 20000 {
		k := fmt.Sprintf("k%d", r.IntN(40)+r.IntN(2)*r.IntN(4000))
		s.Acquired(k, lease())
		if i%97 == 0 {
			checkShard(t, sh)
		}
	}
	checkShard(t, sh)
	if !sh.full.Load() {
		t.Fatal("the shard never filled")
	}
}

func TestPerShard(t *testing.T) {
	for _, tc := range []struct {
		top, shards, want int
	}{
		{1, 1, 4}, {100, 8, 25}, {100, 1, 130}, {1, 8, 4}, {100000, 8, 12836},
	} {
		if got := (Config{Top: tc.top, Shards: tc.shards}).PerShard(); got != tc.want {
			t.Errorf("PerShard(top %d, shards %d) = %d, want %d", tc.top, tc.shards, got, tc.want)
		}
	}
}
