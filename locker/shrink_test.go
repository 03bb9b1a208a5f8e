package locker

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// longKey is over inlineKeyMax, so that it lives in the arena.
func longKey(j int) string { return fmt.Sprintf("a-key-long-enough-for-the-arena-%08d", j) }

// reapUntil drives the reaper a tick at a time until done says so, at most
// limit ticks.
func reapUntil(t *testing.T, tb *Table, clock *ManualClock, limit int, what string, done func() bool) {
	t.Helper()
	for tick := 0; !done(); tick++ {
		if tick == limit {
			t.Fatalf("%s: not after %d reaper ticks; table bytes %d", what, limit, tb.Stats().TableBytes)
		}
		clock.Advance(tb.Config().Tick)
		tb.ExpireDue()
	}
}

// indexSlots is the index slots the table holds, a table being moved from included.
func indexSlots(tb *Table) int {
	n := 0
	for _, s := range tb.shards {
		s.mu.Lock()
		n += len(s.index.slots) + len(s.index.old)
		s.mu.Unlock()
	}
	return n
}

// TestTableShrinksAfterMassExpiry grows a table to 100,000 locks, with keys
// and owners in the arenas, lets every lease expire, and checks that the
// reaper gives back the entries, the index and the arenas: what a burst
// grew must not stay for the life of the process. The table then takes a
// burst again and loses nothing.
func TestTableShrinksAfterMassExpiry(t *testing.T) {
	const n = 100_000
	tb, clock := newTestTable(t)
	for j := range n {
		mustAcquire(t, tb, longKey(j), time.Second, "owner-"+strconv.Itoa(j))
	}
	peak := tb.Stats()
	if peak.TableBytes < n*64 {
		t.Fatalf("a table of %d locks reports %d bytes: less than its entries", n, peak.TableBytes)
	}
	clock.Advance(time.Second)
	if got := tb.ExpireDue(); got != n {
		t.Fatalf("ExpireDue expired %d leases, want %d", got, n)
	}
	// The index shrinks by steps, each moved over some reaper ticks.
	const small = 512 << 10 // four shards' first pages, tiny indexes and free lists
	reapUntil(t, tb, clock, 2000, "table back to its first pages", func() bool {
		return tb.Stats().TableBytes <= small && indexSlots(tb) <= 4*indexMinSlots
	})
	st := tb.Stats()
	if st.Locks != 0 || st.ArenaBytes != 0 {
		t.Fatalf("after the expiry: %d locks, %d arena bytes", st.Locks, st.ArenaBytes)
	}
	t.Logf("table bytes: %d at %d locks, %d after they expired", peak.TableBytes, n, st.TableBytes)

	// A second burst reuses the pages given back and the old ones alike.
	tokens := make([]uint64, n)
	for j := range n {
		tokens[j] = mustAcquire(t, tb, longKey(j), time.Hour, "owner-"+strconv.Itoa(j))
	}
	checkTableInvariants(t, tb, "after the second burst")
	for j := range n {
		if !tb.Verify([]byte(longKey(j)), tokens[j]) {
			t.Fatalf("%s lost its lease", longKey(j))
		}
		if st, _ := tb.Status([]byte(longKey(j))); st.Owner != "owner-"+strconv.Itoa(j) {
			t.Fatalf("%s: owner %q", longKey(j), st.Owner)
		}
	}
	if got := scanAll(tb); len(got) != n {
		t.Fatalf("Scan returns %d locks, want %d", len(got), n)
	}
	checkVacant(t)
}

// checkVacant fails if anything wrote to the page that pages of entries
// given back read as.
func checkVacant(t *testing.T) {
	t.Helper()
	for i := range vacantEntries {
		if vacantEntries[i] != (entry{}) {
			t.Fatalf("vacantEntries[%d] was written: %+v", i, vacantEntries[i])
		}
	}
}

func scanAll(tb *Table) []string {
	var keys []string
	for cursor := uint64(0); ; {
		cursor, keys = tb.Scan(cursor, 1000, nil, keys)
		if cursor == 0 {
			return keys
		}
	}
}

// TestShrinkKeepsSurvivors expires most of a large table while some locks
// live on, scattered across it: the table gives back what it can, and
// every survivor keeps its lease, its key, its owner and its place in
// Scan, through the shrink and through the new locks that come after.
func TestShrinkKeepsSurvivors(t *testing.T) {
	const n = 60_000
	tb, clock := newTestTable(t, func(c *Config) { c.Shards = 1 })
	survivors := map[string]uint64{}
	for j := range n {
		ttl := time.Second
		if j%10_000 == 0 || j >= n-10 { // some early entries, some of the last page
			ttl = time.Hour
		}
		tok := mustAcquire(t, tb, longKey(j), ttl, "o"+strconv.Itoa(j))
		if ttl == time.Hour {
			survivors[longKey(j)] = tok
		}
	}
	peak := tb.Stats().TableBytes
	clock.Advance(time.Second)
	tb.ExpireDue()
	reapUntil(t, tb, clock, 2000, "table shrunk around its survivors", func() bool {
		return tb.Stats().TableBytes < peak/4 && indexSlots(tb) <= 4*indexMinSlots
	})
	checkTableInvariants(t, tb, "after the shrink")
	check := func(where string) {
		t.Helper()
		for k, tok := range survivors {
			if !tb.Verify([]byte(k), tok) {
				t.Fatalf("%s: %s lost its lease", where, k)
			}
			j, _ := strconv.Atoi(k[len(k)-8:])
			if st, _ := tb.Status([]byte(k)); st.Owner != "o"+strconv.Itoa(j) {
				t.Fatalf("%s: %s has owner %q", where, k, st.Owner)
			}
		}
	}
	check("after the shrink")
	got := scanAll(tb)
	slices.Sort(got)
	want := make([]string, 0, len(survivors))
	for k := range survivors {
		want = append(want, k)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Scan after the shrink: %d keys, want the %d survivors", len(got), len(want))
	}
	// New locks fill the pages given back; the survivors are untouched.
	for j := range n / 2 {
		mustAcquire(t, tb, "new-"+longKey(j), time.Hour, "n"+strconv.Itoa(j))
	}
	checkTableInvariants(t, tb, "after new locks")
	check("after new locks")
	for k, tok := range survivors {
		if !tb.Release([]byte(k), tok) {
			t.Fatalf("Release of survivor %s", k)
		}
	}
	if st := tb.Stats(); st.Locks != n/2 {
		t.Fatalf("%d locks, want %d", st.Locks, n/2)
	}
	checkVacant(t)
}

// TestSteadyLoadDoesNotShrink churns a steady 20,000 locks, a tenth of them
// replaced every tick, some released and some expired. The table may give
// back a page that stays empty for a quiet period, but no more often: a
// table that shrank whenever it had room to spare would give pages back and
// take them again every few ticks.
func TestSteadyLoadDoesNotShrink(t *testing.T) {
	const steady = 20_000
	tb, clock := newTestTable(t, func(c *Config) { c.Shards = 1 })
	tokens := map[int]uint64{}
	// short is the leases of a tick's TTL in tokens: only they can expire
	// within the test's 200 ticks, so only they are verified after each.
	short := map[int]bool{}
	next := 0
	acquire := func(ttl time.Duration) {
		tokens[next] = mustAcquire(t, tb, longKey(next), ttl, "o")
		if ttl < time.Hour {
			short[next] = true
		}
		next++
	}
	for range steady {
		acquire(time.Hour)
	}
	s := tb.shards[0]
	var before shardShape
	for tick := range 200 {
		// Release a twentieth, and let another twentieth expire.
		released := 0
		for j, tok := range tokens {
			if released == steady/20 {
				break
			}
			if tb.Release([]byte(longKey(j)), tok) {
				released++
			}
			delete(tokens, j)
			delete(short, j)
		}
		for range steady / 20 {
			acquire(time.Hour)
		}
		for range steady / 20 {
			acquire(tb.Config().Tick)
		}
		clock.Advance(tb.Config().Tick)
		tb.ExpireDue()
		for j := range short {
			if !tb.Verify([]byte(longKey(j)), tokens[j]) {
				delete(tokens, j) // expired
				delete(short, j)
			}
		}
		if tick == 20 { // warmed up
			before = s.shape()
		}
	}
	after := s.shape()
	if n := after.shrinks - before.shrinks; n > 1+(200-20)/quietTicks {
		t.Fatalf("a steady load shrank the table %d times in %d ticks: %+v, then %+v", n, 200-20, before, after)
	}
	if after.entryPages > before.entryPages || after.arenaPages > before.arenaPages {
		t.Fatalf("a steady load grew the table: %+v, then %+v", before, after)
	}
}

// shardShape is what a shard has allocated, for tests.
type shardShape struct {
	entryPages, arenaPages, indexSlots int
	shrinks                            int
}

func (s *shard) shape() shardShape {
	s.mu.Lock()
	defer s.mu.Unlock()
	return shardShape{
		entryPages: s.entryPagesHeld(),
		arenaPages: s.strings.pagesHeld(),
		indexSlots: len(s.index.slots) + len(s.index.old),
		shrinks:    s.shrinks,
	}
}

// TestArenaGivesBackEmptyPages fills an arena's size classes, releases
// all but a few strings, and checks that shrink frees every page left
// empty, keeps the survivors' bytes, and that put reuses the pages given
// back before growing.
func TestArenaGivesBackEmptyPages(t *testing.T) {
	var a arena
	type stored struct {
		ref uint32
		b   []byte
	}
	var all []stored
	for j := range 40_000 {
		b := bytes.Repeat([]byte{byte(j)}, 1+j%300) // several size classes
		all = append(all, stored{a.put(b), b})
	}
	grown := a.pagesHeld()
	var kept []stored
	for j, s := range all {
		if j%9000 == 0 {
			kept = append(kept, s)
			continue
		}
		a.release(s.ref, len(s.b))
	}
	if !a.shrink(false) {
		t.Fatal("shrink of an arena nearly all free did nothing")
	}
	if a.pagesHeld() > len(kept) {
		t.Fatalf("%d pages held for %d strings", a.pagesHeld(), len(kept))
	}
	for _, s := range kept {
		if !bytes.Equal(a.get(s.ref, len(s.b)), s.b) {
			t.Fatalf("a kept string changed")
		}
	}
	if a.shrink(false) {
		t.Fatal("a second shrink found more to do")
	}
	// Refill: pages come back, old refs still read right.
	var again []stored
	for j := range 40_000 {
		b := bytes.Repeat([]byte{byte(j + 7)}, 1+j%300)
		again = append(again, stored{a.put(b), b})
	}
	if a.pagesHeld() > grown+len(kept) {
		t.Fatalf("refilled arena holds %d pages, first fill %d", a.pagesHeld(), grown)
	}
	for _, s := range append(kept, again...) {
		if !bytes.Equal(a.get(s.ref, len(s.b)), s.b) {
			t.Fatalf("string at %#x changed after the refill", s.ref)
		}
	}
}

// TestKeyIndexShrinksIncrementally removes nearly every entry from a large
// index and checks that it shrinks in moves as bounded as a grow's, while
// lookups, inserts and removes go on meanwhile.
func TestKeyIndexShrinksIncrementally(t *testing.T) {
	var x keyIndex
	hashOf := func(e uint32) uint32 { return e * 2654435761 }
	const n = 50_000
	for e := uint32(1); e <= n; e++ {
		x.insert(hashOf(e), e)
	}
	for x.old != nil {
		x.migrate()
	}
	live := map[uint32]bool{}
	for e := uint32(1); e <= n; e++ {
		if e%1000 == 0 {
			live[e] = true
			continue
		}
		x.remove(hashOf(e), e)
	}
	big := len(x.slots)
	next := uint32(n + 1)
	shrinks := 0
	for step := 0; ; step++ {
		if step > 10_000 {
			t.Fatal("the index never settled")
		}
		if x.old == nil {
			before := len(x.slots)
			if !x.shrinkIfSparse() {
				break
			}
			shrinks++
			if len(x.slots) >= before {
				t.Fatalf("a shrink to %d slots from %d", len(x.slots), before)
			}
		}
		// Work goes on during the move: an insert, a remove.
		x.insert(hashOf(next), next)
		live[next] = true
		next++
		for e := range live {
			x.remove(hashOf(e), e)
			delete(live, e)
			break
		}
		for e := range live {
			if !slices.Contains(slices.Collect(x.candidates(hashOf(e))), e) {
				t.Fatalf("step %d: entry %d lost", step, e)
			}
		}
		if x.count != len(live) {
			t.Fatalf("count %d, want %d", x.count, len(live))
		}
		if (x.count+1)*4 > len(x.slots)*3 {
			t.Fatalf("step %d: %d entries in %d slots: the new table filled up during the move", step, x.count, len(x.slots))
		}
	}
	if len(x.slots) > 4*indexMinSlots || shrinks < 2 {
		t.Fatalf("index of %d entries, was %d slots: now %d, after %d shrinks", x.count, big, len(x.slots), shrinks)
	}
}

// TestQuietPagesGoBack: a drop too small to give pages back at once (fewer
// than shrinkMinPages empty) gives them back once they have stayed empty
// for quietTicks reaper ticks, and not before.
func TestQuietPagesGoBack(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.Shards = 1 })
	for j := range 3000 { // entry pages 0 to 2
		mustAcquire(t, tb, longKey(j), time.Second, "")
	}
	s := tb.shards[0]
	clock.Advance(time.Second)
	tb.ExpireDue()
	if got := s.shape().entryPages; got != 3 {
		t.Fatalf("%d entry pages held after a drop of two pages, want all 3 kept for now", got)
	}
	for range quietTicks - 2 {
		clock.Advance(tb.Config().Tick)
		tb.ExpireDue()
	}
	if got := s.shape().entryPages; got != 3 {
		t.Fatalf("%d entry pages held before the quiet period ended, want 3", got)
	}
	reapUntil(t, tb, clock, 3, "the quiet pages given back", func() bool { return s.shape().entryPages == 1 })
	checkVacant(t)
}

// TestShrinkRandomInvariants runs bursts of locks of every kind (exclusive,
// shared, semaphore permits, waits, lock-delays, long keys and owners) that
// come and go, with the reaper giving pages back between them, and checks
// the table's invariants, that no page given back was written, and that
// every lease granted for an hour still verifies.
func TestShrinkRandomInvariants(t *testing.T) {
	// Which shard a key falls in depends on the process's hash seed, so a
	// seed of the run may leave every page pinned; across the seeds some
	// page must go back.
	gaveBack := 0
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tb, clock := newTestTable(t, func(c *Config) {
			c.Shards = 2
			c.LockDelay = time.Duration(seed%2) * 5 * time.Millisecond
		})
		type lease struct {
			key string
			tok uint64
		}
		var lasting []lease
		var created []string // deleted once free, so that their pages can go
		for phase := range 20 {
			var waits []*Wait
			var waited []lease // released once their waits are cancelled
			n := 2000 + rng.IntN(8000)
			for j := range n {
				key := fmt.Sprintf("p%d-%d", phase, j)
				if rng.IntN(3) == 0 {
					key = longKey(phase*100_000 + j)
				}
				owner := ""
				if rng.IntN(2) == 0 {
					owner = "owner-" + strconv.Itoa(rng.IntN(1000))
				}
				ttl := []time.Duration{2 * tb.Config().Tick, 50 * time.Millisecond, time.Hour}[rng.IntN(3)]
				mode := Exclusive
				switch rng.IntN(10) {
				case 0:
					mode = Shared
				case 1:
					if _, err := tb.Create([]byte(key), CreateOptions{Limit: 1 + rng.IntN(3)}); err != nil {
						t.Fatal(err)
					}
					created = append(created, key)
				}
				tok, ok, err := tb.Acquire(&Request{Key: []byte(key), TTL: ttl, Owner: []byte(owner), Mode: mode})
				if err != nil || !ok {
					t.Fatalf("seed %d phase %d: Acquire(%q) = %v, %v", seed, phase, key, ok, err)
				}
				if ttl == time.Hour && phase == 0 && len(lasting) < 5 { // early, so that they pin few pages
					lasting = append(lasting, lease{key, tok})
				} else if ttl == time.Hour && mode == Exclusive && rng.IntN(10) == 0 {
					w := &Wait{Notify: func(uint64) {}}
					switch wtok, granted, err := tb.AcquireWait(&Request{Key: []byte(key), TTL: time.Second}, w); {
					case err != nil:
						t.Fatal(err)
					case granted: // a semaphore's spare permit
						tb.Release([]byte(key), wtok)
					default:
						waits = append(waits, w)
					}
					waited = append(waited, lease{key, tok})
				} else if ttl == time.Hour {
					tb.Release([]byte(key), tok)
				}
			}
			for _, w := range waits {
				tb.CancelWait(w)
			}
			for _, l := range waited {
				if !tb.Release([]byte(l.key), l.tok) {
					t.Fatalf("Release of %s after its waits", l.key)
				}
			}
			ticks := 1 + rng.IntN(30)
			if rng.IntN(4) == 0 {
				ticks = quietTicks + 5
			}
			for range ticks {
				clock.Advance(tb.Config().Tick * time.Duration(1+rng.IntN(10)))
				tb.ExpireDue()
			}
			created = slices.DeleteFunc(created, func(k string) bool {
				deleted, err := tb.Delete([]byte(k))
				return deleted || err == nil
			})
			checkTableInvariants(t, tb, fmt.Sprintf("seed %d phase %d", seed, phase))
			checkVacant(t)
			for _, l := range lasting {
				if !tb.Verify([]byte(l.key), l.tok) {
					t.Fatalf("seed %d phase %d: %s lost its lease", seed, phase, l.key)
				}
			}
		}
		for _, s := range tb.shards {
			gaveBack += s.shape().shrinks
		}
		for _, s := range tb.shards {
			t.Logf("seed %d: %+v locks %d empty %d live %v", seed, s.shape(), s.counts.locks.Load(), s.emptyPages, s.pageLive)
		}
	}
	if gaveBack == 0 {
		t.Fatal("no page was given back under any seed: the test tested nothing")
	}
}
