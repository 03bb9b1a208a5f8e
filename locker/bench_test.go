package locker

import (
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func benchTable(b *testing.B, live int) (*Table, [][]byte) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.FirstToken = 1
	tb, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tb.Close() })
	for i := range live {
		if _, ok, err := tb.Acquire(&Request{Key: []byte("live:" + strconv.Itoa(i)), TTL: time.Hour}); !ok || err != nil {
			b.Fatal("preload failed", err)
		}
	}
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = []byte("lock:" + strconv.Itoa(i))
	}
	return tb, keys
}

// BenchmarkAcquireRelease measures one ACQUIRE plus one RELEASE of a random
// key, with 1 and 1,000,000 other leases live.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, live := range []int{1, 1_000_000} {
		b.Run("live="+strconv.Itoa(live)+"/serial", func(b *testing.B) {
			tb, keys := benchTable(b, live)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := keys[i&(len(keys)-1)]
				tok, ok, _ := tb.Acquire(&Request{Key: k, TTL: 30 * time.Second})
				if !ok || !tb.Release(k, tok) {
					b.Fatal("cycle failed")
				}
			}
		})
		b.Run("live="+strconv.Itoa(live)+"/parallel", func(b *testing.B) {
			tb, keys := benchTable(b, live)
			var worker atomic.Uint32
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				// Each worker owns a disjoint slice of keys, so every cycle succeeds.
				w := int(worker.Add(1)) - 1
				i := 0
				for pb.Next() {
					k := keys[(w*4096+i&4095)&(len(keys)-1)]
					i++
					tok, ok, _ := tb.Acquire(&Request{Key: k, TTL: 30 * time.Second})
					if ok {
						tb.Release(k, tok)
					}
				}
			})
		})
	}
}

// BenchmarkAcquireHeld measures ACQUIRE against a held lock: the "no" answer.
func BenchmarkAcquireHeld(b *testing.B) {
	tb, keys := benchTable(b, 1)
	for _, k := range keys {
		tb.Acquire(&Request{Key: k, TTL: time.Hour})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok, _ := tb.Acquire(&Request{Key: keys[i&(len(keys)-1)], TTL: time.Second}); ok {
			b.Fatal("granted a held lock")
		}
	}
}

// BenchmarkExpireDue measures the reaper reclaiming 100,000 leases that fall
// due within one second.
func BenchmarkExpireDue(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		clock := &ManualClock{}
		cfg := DefaultConfig()
		cfg.FirstToken = 1
		cfg.Clock = clock
		tb, _ := New(cfg)
		for j := range 100_000 {
			tb.Acquire(&Request{Key: []byte("k" + strconv.Itoa(j)), TTL: time.Duration(1+j%1000) * time.Millisecond})
		}
		b.StartTimer()
		for range 100 {
			clock.Advance(10 * time.Millisecond)
			tb.ExpireDue()
		}
		b.StopTimer()
		if st := tb.Stats(); st.Held != 0 {
			b.Fatalf("%d leases left", st.Held)
		}
		tb.Close()
	}
}

// BenchmarkCommandsDuringMassExpiry measures what a mass expiry does to
// other commands: one goroutine runs ACQUIRE+RELEASE cycles on 64 keys
// while the reaper reclaims 1,000,000 leases whose deadlines span one
// second, driven tick by tick on a ManualClock as fast as it goes. It
// reports the cycles' latency percentiles (ns); the work per lock hold that
// ExpireDue allows is what moves them.
func BenchmarkCommandsDuringMassExpiry(b *testing.B) {
	lat := make([]time.Duration, 0, 1<<22) // no growth copies inside the timed loop
	for range b.N {
		b.StopTimer()
		clock := &ManualClock{}
		cfg := DefaultConfig()
		cfg.FirstToken = 1
		cfg.Clock = clock
		tb, _ := New(cfg)
		const n = 1_000_000
		for i := range n {
			tb.Acquire(&Request{Key: []byte("lease:" + strconv.Itoa(i)), TTL: 5*time.Second + time.Duration(i)*time.Second/n})
		}
		keys := make([][]byte, 64)
		for i := range keys {
			keys[i] = []byte("probe:" + strconv.Itoa(i))
		}
		var stop atomic.Bool
		done := make(chan struct{})
		b.StartTimer()
		go func() {
			defer close(done)
			for i := 0; !stop.Load(); i++ {
				k := keys[i&63]
				start := time.Now()
				if tok, ok, _ := tb.Acquire(&Request{Key: k, TTL: time.Hour}); ok {
					tb.Release(k, tok)
				}
				lat = append(lat, time.Since(start))
			}
		}()
		for range 700 { // 7 s of ticks: past every deadline
			clock.Advance(10 * time.Millisecond)
			tb.ExpireDue()
		}
		stop.Store(true)
		<-done
		b.StopTimer()
		if st := tb.Stats(); st.Held != 0 {
			b.Fatalf("%d leases left", st.Held)
		}
		tb.Close()
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(float64(len(lat)-1)*q)]) }
	b.ReportMetric(at(0.99), "p99-ns")
	b.ReportMetric(at(0.999), "p99.9-ns")
	b.ReportMetric(float64(lat[len(lat)-1]), "max-ns")
	b.ReportMetric(float64(len(lat))/float64(b.N), "cycles/op")
}

// BenchmarkSemaphore measures a semaphore of 65,536 permits (MaxLimit):
// filling it (each permit for its own owner), releasing every permit, and,
// filled again, all its leases expiring in one tick. Each is per lease; what grows with the number of
// holders shows here.
func BenchmarkSemaphore(b *testing.B) {
	const n = MaxLimit
	setup := func(b *testing.B) (*Table, *ManualClock, []uint64) {
		b.StopTimer()
		defer b.StartTimer()
		clock := &ManualClock{}
		cfg := DefaultConfig()
		cfg.FirstToken = 1
		cfg.Clock = clock
		tb, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tb.Create([]byte("sem"), CreateOptions{Limit: n}); err != nil {
			b.Fatal(err)
		}
		return tb, clock, make([]uint64, 0, n)
	}
	fill := func(b *testing.B, tb *Table, tokens []uint64) []uint64 {
		for j := range n {
			// Named owners, as the Go client always sends: a grant looks
			// for the owner's lease first.
			tok, ok, err := tb.Acquire(&Request{Key: []byte("sem"), TTL: time.Second, Owner: []byte("owner-" + strconv.Itoa(j))})
			if err != nil || !ok {
				b.Fatalf("permit %d: %v %v", len(tokens), ok, err)
			}
			tokens = append(tokens, tok)
		}
		return tokens
	}
	// closeUntimed closes tb outside the timing; perLease reports the
	// time per lease.
	closeUntimed := func(b *testing.B, tb *Table) {
		b.StopTimer()
		tb.Close()
		b.StartTimer()
	}
	perLease := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/lease")
	}
	b.Run("acquire", func(b *testing.B) {
		for range b.N {
			tb, _, tokens := setup(b)
			fill(b, tb, tokens)
			closeUntimed(b, tb)
		}
		perLease(b)
	})
	b.Run("release", func(b *testing.B) {
		for range b.N {
			tb, _, tokens := setup(b)
			b.StopTimer()
			tokens = fill(b, tb, tokens)
			b.StartTimer()
			for _, tok := range tokens {
				tb.Release([]byte("sem"), tok)
			}
			closeUntimed(b, tb)
		}
		perLease(b)
	})
	b.Run("expire", func(b *testing.B) {
		for range b.N {
			tb, clock, tokens := setup(b)
			b.StopTimer()
			fill(b, tb, tokens)
			clock.Advance(2 * time.Second)
			b.StartTimer()
			tb.ExpireDue()
			b.StopTimer()
			if st := tb.Stats(); st.Held != 0 {
				b.Fatalf("%d leases left", st.Held)
			}
			tb.Close()
			b.StartTimer()
		}
		perLease(b)
	})
}

// BenchmarkAcquireWaitHandOff measures one queued request's life: a waiter
// queues behind the holder, the release hands it the lease under the same
// shard lock and notifies it, and it releases in turn.
func BenchmarkAcquireWaitHandOff(b *testing.B) {
	tb, keys := benchTable(b, 1)
	var got uint64
	w := &Wait{}
	notify := func(tok uint64) { got = tok }
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i&(len(keys)-1)]
		req := Request{Key: k, TTL: 30 * time.Second}
		held, _, _ := tb.Acquire(&req)
		*w = Wait{Notify: notify}
		if _, granted, _ := tb.AcquireWait(&req, w); granted {
			b.Fatal("granted a held lock")
		}
		tb.Release(k, held)
		if got == 0 || !tb.Release(k, got) {
			b.Fatal("hand-off failed")
		}
	}
}

// BenchmarkAcquireAllCycle measures MACQUIRE's atomic attempt on 4 keys plus
// their release.
func BenchmarkAcquireAllCycle(b *testing.B) {
	tb, keys := benchTable(b, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := (i * 4) & (len(keys) - 1)
		ks := keys[j : j+4]
		toks, granted, _ := tb.AcquireAll(&Request{Keys: ks, TTL: 30 * time.Second})
		if !granted {
			b.Fatal("not granted")
		}
		for n, k := range ks {
			tb.Release(k, toks[n])
		}
	}
}
