package locker

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestKeyIndexAgainstMap inserts and removes entries at random, with hashes
// drawn from a small set so that probe runs are long, collide and wrap
// around, through many doublings and their incremental moves, and checks
// after every step that each hash yields exactly its entries.
func TestKeyIndexAgainstMap(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var x keyIndex
		hashOf := map[uint32]uint32{} // entry -> hash
		var live []uint32
		next := uint32(1)
		hashes := 1 + rng.IntN(5000) // some seeds collide a lot, some little
		migrations := 0
		for step := range 30000 {
			if len(live) == 0 || rng.IntN(10) < 6 {
				h := uint32(rng.IntN(hashes)) * 2654435761 // spread over the table
				x.insert(h, next)
				hashOf[next] = h
				live = append(live, next)
				next++
			} else {
				j := rng.IntN(len(live))
				e := live[j]
				x.remove(hashOf[e], e)
				delete(hashOf, e)
				live[j] = live[len(live)-1]
				live = live[:len(live)-1]
			}
			if x.count != len(live) {
				t.Fatalf("seed %d step %d: count %d, want %d", seed, step, x.count, len(live))
			}
			if x.old != nil {
				migrations++
			} else if step%50 != 0 {
				continue // checking every hash is O(n): at every step of a move, else now and then
			}
			want := map[uint32][]uint32{}
			for e, h := range hashOf {
				want[h] = append(want[h], e)
			}
			for h, es := range want {
				got := slices.Collect(x.candidates(h))
				slices.Sort(got)
				slices.Sort(es)
				if !slices.Equal(got, es) {
					t.Fatalf("seed %d step %d: hash %#x yields %v, want %v (migrating: %v)", seed, step, h, got, es, x.old != nil)
				}
			}
			if got := slices.Collect(x.candidates(0xdeadbeef)); len(got) != 0 && hashOf[got[0]] != 0xdeadbeef {
				t.Fatalf("seed %d step %d: an absent hash yields %v", seed, step, got)
			}
		}
		if migrations == 0 {
			t.Fatalf("seed %d: no step ran during a move: the test tested nothing incremental", seed)
		}
	}
}

// BenchmarkIndexInsert inserts 100,000 entries (a shard's share of a few
// million keys) and reports the slowest insert: the cost of growing, which
// incremental moving spreads out. Moving all at once at each doubling, the
// slowest was 477 µs; incrementally, 74 µs, most of it allocating the new
// table.
func BenchmarkIndexInsert(b *testing.B) {
	for range b.N {
		var x keyIndex
		var slowest time.Duration
		for e := uint32(1); e <= 100_000; e++ {
			start := time.Now()
			x.insert(e*2654435761, e)
			slowest = max(slowest, time.Since(start))
		}
		b.ReportMetric(float64(slowest.Nanoseconds()), "slowest-ns")
	}
}

// TestReaperFinishesAGrow: a shard whose keys stop changing in the middle of
// a grow gets it finished by the reaper's ticks, and loses no key on the way.
func TestReaperFinishesAGrow(t *testing.T) {
	tb, _ := newTestTable(t)
	migrating := func() int {
		n := 0
		for _, s := range tb.shards {
			s.mu.Lock()
			if s.index.old != nil {
				n++
			}
			s.mu.Unlock()
		}
		return n
	}
	tokens := map[string]uint64{}
	for j := 0; migrating() == 0; j++ {
		if j == 100_000 {
			t.Fatal("no shard started growing")
		}
		key := "k" + strconv.Itoa(j)
		tokens[key] = mustAcquire(t, tb, key, time.Hour, "")
	}
	for tick := 0; migrating() > 0; tick++ {
		if tick == 1000 {
			t.Fatalf("%d shards still growing after %d reaper ticks", migrating(), tick)
		}
		tb.ExpireDue()
	}
	for key, tok := range tokens {
		if !tb.Verify([]byte(key), tok) {
			t.Fatalf("%s lost its lease across the grow", key)
		}
	}
}
