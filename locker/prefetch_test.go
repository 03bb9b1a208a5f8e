package locker

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestPrefetchChangesNothing prefetches held, free, unknown, empty and
// overlong keys, more than PrefetchMax of them, and checks that the table
// answers as before.
func TestPrefetchChangesNothing(t *testing.T) {
	tb, _ := newTestTable(t)
	tb.Prefetch([][]byte{[]byte("before-anything")}) // empty shards
	tok := mustAcquire(t, tb, "held", time.Minute, "")
	if gone := mustAcquire(t, tb, "gone", time.Minute, ""); !tb.Release([]byte("gone"), gone) {
		t.Fatal("Release failed")
	}
	before := tb.Stats()
	var keys [][]byte
	for i := range 2 * PrefetchMax {
		keys = append(keys, []byte("unknown:"+strconv.Itoa(i)))
	}
	keys = append(keys, []byte("held"), []byte("gone"), nil, make([]byte, 100_000))
	tb.Prefetch(keys)
	tb.Prefetch(keys[len(keys)-4:])
	if after := tb.Stats(); after != before {
		t.Fatalf("Prefetch changed the table's counters: %+v, then %+v", before, after)
	}
	if !tb.Verify([]byte("held"), tok) {
		t.Fatal("the held lease does not verify after Prefetch")
	}
	if _, ok, _ := tb.Acquire(&Request{Key: []byte("held"), TTL: time.Second}); ok {
		t.Fatal("Acquire of a held lock granted after Prefetch")
	}
}

// TestPrefetchWorthwhile checks the size gate: it opens once the table holds
// Config.PrefetchFrom locks, as the reaper next sees them, and closes again.
func TestPrefetchWorthwhile(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.PrefetchFrom = 3 })
	if tb.PrefetchWorthwhile() {
		t.Fatal("an empty table asks for prefetching")
	}
	for i := range 3 {
		mustAcquire(t, tb, "k"+strconv.Itoa(i), time.Second, "")
	}
	if tb.PrefetchWorthwhile() {
		t.Fatal("the gate moved before the reaper ran")
	}
	tb.ExpireDue()
	if tb.PrefetchWorthwhile() != PrefetchSupported {
		t.Fatalf("3 locks, PrefetchFrom 3: PrefetchWorthwhile %v on a platform where PrefetchSupported is %v", tb.PrefetchWorthwhile(), PrefetchSupported)
	}
	clock.Advance(2 * time.Second)
	tb.ExpireDue()
	if tb.PrefetchWorthwhile() {
		t.Fatal("the table emptied, still prefetching")
	}
	if _, err := New(func() Config { c := DefaultConfig(); c.PrefetchFrom = -1; return c }()); err == nil {
		t.Fatal("a negative PrefetchFrom was accepted")
	}
}

// TestPrefetchRaces runs Prefetch against commands and the reaper on the
// same keys, for the race detector.
func TestPrefetchRaces(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.Shards = 2 })
	keys := make([][]byte, 64)
	for i := range keys {
		keys[i] = []byte("key:" + strconv.Itoa(i))
	}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				k := keys[(i*7+w)%len(keys)]
				switch w {
				case 0:
					tb.Prefetch(keys[i%len(keys) : min(i%len(keys)+PrefetchMax, len(keys))])
				case 1:
					if tok, ok, _ := tb.Acquire(&Request{Key: k, TTL: time.Duration(1+i%50) * time.Millisecond}); ok && i%3 == 0 {
						tb.Release(k, tok)
					}
				case 2:
					clock.Advance(time.Millisecond)
					tb.ExpireDue()
				}
			}
		}()
	}
	wg.Wait()
}
