package persist

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// checkCompacted fails unless dir holds one snapshot and only logs from its
// number on.
func checkCompacted(t *testing.T, dir string) uint64 {
	t.Helper()
	logs, snaps, err := dataFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v in %v, want one", snaps, files(t, dir))
	}
	for _, l := range logs {
		if l < snaps[0] {
			t.Fatalf("log %d older than snapshot %d is left: %v", l, snaps[0], files(t, dir))
		}
	}
	if !slices.Contains(logs, snaps[0]) {
		t.Fatalf("no log %d after snapshot %d: %v", snaps[0], snaps[0], files(t, dir))
	}
	for _, name := range files(t, dir) {
		if name != "LOCK" && name != ceilingFile && !strings.HasSuffix(name, fileSuffix) {
			t.Fatalf("stray file %s", name)
		}
	}
	return snaps[0]
}

// TestCompactionUnderLoad: commands go on from several goroutines while
// compactions run (explicit ones, and the background's with a small
// CompactBytes); a restart restores exactly the table they left.
func TestCompactionUnderLoad(t *testing.T) {
	dir := t.TempDir()
	o := sessionOpts{fsync: FsyncNo, compactBytes: 2048, lockDelay: time.Minute}
	s := open(t, dir, nil, o)
	clock := s.clock
	for i := range 4 {
		s.create(fmt.Sprint("sem", i), locker.CreateOptions{Limit: 3})
		s.create(fmt.Sprint("cfg", i), locker.CreateOptions{DefaultTTL: time.Hour, LockDelay: time.Hour, LockDelaySet: true})
	}
	keys := []string{"a", "b", "c", "d", "e", "sem0", "sem1", "sem2", "sem3", "cfg0", "cfg1", "cfg2", "cfg3"}
	const workers, ops, compactions = 4, 300, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			owner := []byte(fmt.Sprint("w", w))
			held := map[string][]uint64{}
			for range ops {
				key := keys[rng.IntN(len(keys))]
				k := []byte(key)
				ttl := time.Duration(1+rng.IntN(120)) * time.Minute
				switch rng.IntN(6) {
				case 0, 1:
					if tok, ok, _ := s.table.Acquire(&locker.Request{Key: k, TTL: ttl, Owner: owner}); ok {
						held[key] = append(held[key], tok)
					}
				case 2:
					if tok, ok, _ := s.table.Acquire(&locker.Request{Key: k, TTL: ttl, Mode: locker.Shared}); ok {
						held[key] = append(held[key], tok)
					}
				case 3:
					if ts := held[key]; len(ts) > 0 {
						s.table.Release(k, ts[0])
						held[key] = ts[1:]
					}
				case 4:
					if ts := held[key]; len(ts) > 0 {
						s.table.Extend(k, ts[rng.IntN(len(ts))], ttl)
					}
				case 5:
					s.table.Delete(k) // refused while held
					if rng.IntN(2) == 0 {
						s.table.Create(k, locker.CreateOptions{DefaultTTL: ttl})
					}
				}
				if err := s.store.Commit(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	workersDone := make(chan struct{})
	compactorDone := make(chan struct{})
	go func() {
		defer close(compactorDone)
		// Compact for as long as the workers run (at least compactions
		// times, at most 500).
		for i := range 500 {
			select {
			case <-workersDone:
				if i >= compactions {
					return
				}
			default:
			}
			if err := s.store.Compact(); err != nil {
				errs <- fmt.Errorf("Compact: %w", err)
				return
			}
		}
	}()
	wg.Wait()
	close(workersDone)
	<-compactorDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.commit()
	if st := s.store.Stats(); st.Compactions < compactions || st.Err != nil {
		t.Fatalf("stats %+v", st)
	}
	before := s.states()
	s.close()
	s = open(t, dir, clock, o)
	sameTable(t, before, s.states(), clock.Now())
	s.close()

	// With no background compaction to race it, a compaction leaves one
	// snapshot and the log after it, and a restart reproduces the table.
	o.compactBytes = 0
	s = open(t, dir, clock, o)
	before = s.states()
	if err := s.store.Compact(); err != nil {
		t.Fatal(err)
	}
	n := checkCompacted(t, dir)
	s.close()
	if got := checkCompacted(t, dir); got != n {
		t.Fatalf("snapshot %d became %d at close", n, got)
	}
	s = open(t, dir, clock, o)
	sameTable(t, before, s.states(), clock.Now())
}

// TestBackgroundCompaction: once the log outgrows CompactBytes (and twice
// the snapshot), the background compacts it without being asked.
func TestBackgroundCompaction(t *testing.T) {
	dir := t.TempDir()
	o := sessionOpts{fsync: FsyncNo, compactBytes: 4096}
	s := open(t, dir, nil, o)
	for i := 0; s.store.Stats().LogBytes <= 4096; i++ {
		if i > 1000 {
			t.Fatal("the log does not grow")
		}
		tok := s.acquire("k", time.Hour, "")
		s.release("k", tok)
		s.commit()
	}
	deadline := time.Now().Add(15 * time.Second)
	for s.store.Stats().Compactions == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no compaction within 15s: %+v", s.store.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.store.Stats(); st.LogBytes > 4096 {
		t.Fatalf("log still %d bytes after a compaction", st.LogBytes)
	}
	held := s.acquire("held", time.Hour, "")
	before := s.states()
	s.close()
	checkCompacted(t, dir)
	s = open(t, dir, s.clock, o)
	sameTable(t, before, s.states(), s.clock.Now())
	if st, _ := s.status("held"); st.Token != held {
		t.Fatalf("held: %+v", st)
	}
}

// TestDiskUseFollowsTable: many acquire/release cycles on a few keys make a
// long log; after a compaction the directory is about the size of the live
// table.
func TestDiskUseFollowsTable(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{fsync: FsyncNo})
	keys := []string{"a", "b", "c", "d"}
	for i := range 4000 {
		k := keys[i%len(keys)]
		tok := s.acquire(k, time.Hour, "some-owner-id")
		s.extend(k, tok, 2*time.Hour)
		s.release(k, tok)
		if i%50 == 0 {
			s.commit()
		}
	}
	s.acquire("a", time.Hour, "the-one-left")
	s.commit()
	if st := s.store.Stats(); st.LogBytes < 100<<10 {
		t.Fatalf("log only %d bytes: the test needs a long history", st.LogBytes)
	}
	if err := s.store.Compact(); err != nil {
		t.Fatal(err)
	}
	if size := dirSize(t, dir); size > 4<<10 {
		t.Fatalf("the directory holds %d bytes for one lock: %v", size, files(t, dir))
	}
	s.close()
	checkCompacted(t, dir)
	s = open(t, dir, nil, sessionOpts{})
	if st, ok := s.status("a"); !ok || st.Owner != "the-one-left" {
		t.Fatalf("a: %+v", st)
	}
	for _, k := range keys[1:] {
		if _, ok := s.status(k); ok {
			t.Fatalf("%s came back", k)
		}
	}
}

// TestCompactionKeepsCeiling: the snapshot's header carries the token
// reservation, so after the logs it replaces are gone tokens still start
// above it.
func TestCompactionKeepsCeiling(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	tok := s.acquire("a", time.Hour, "")
	s.release("a", tok)
	s.store.ReserveTokens(tok + 3<<20)
	if err := s.store.Compact(); err != nil {
		t.Fatal(err)
	}
	s.close()
	logs, snaps, _ := dataFiles(dir)
	if len(snaps) != 1 || len(logs) != 1 {
		t.Fatalf("files %v", files(t, dir))
	}
	// Nothing but the snapshot and an empty log remain.
	if size := fileSize(t, filepath.Join(dir, logName(logs[0]))); size != 0 {
		t.Fatalf("the log after the snapshot holds %d bytes", size)
	}
	s = open(t, dir, nil, sessionOpts{})
	if s.first <= tok+3<<20 {
		t.Fatalf("FirstToken %d not above the reservation %d", s.first, tok+3<<20)
	}
}

// hookClock is a manual clock that runs a hook from inside one chosen call
// to Now: Dump reads the clock before it takes each shard's lock, so a hook
// there runs in the middle of a compaction's dump, deterministically.
type hookClock struct {
	locker.ManualClock
	mu    sync.Mutex
	calls int // counted while armed
	at    int // the call that runs hook
	hook  func()
}

func (c *hookClock) Now() time.Duration {
	c.mu.Lock()
	var run func()
	if c.hook != nil {
		c.calls++
		if c.calls == c.at {
			run, c.hook = c.hook, nil
		}
	}
	c.mu.Unlock()
	if run != nil {
		run()
	}
	return c.ManualClock.Now()
}

func (c *hookClock) arm(at int, hook func()) {
	c.mu.Lock()
	c.calls, c.at, c.hook = 0, at, hook
	c.mu.Unlock()
}

// TestChangesDuringDump: changes made while a compaction dumps the table
// (to shards it has dumped and to shards it has not) survive a restart: the
// new log starts before the dump, and replaying it over a snapshot that
// already holds some of its changes is harmless.
func TestChangesDuringDump(t *testing.T) {
	const shards = 8
	for _, at := range []int{1, 2, shards / 2, shards} {
		t.Run(fmt.Sprint("hook at shard ", at), func(t *testing.T) {
			dir := t.TempDir()
			clock := &hookClock{}
			clock.Advance(time.Hour)
			opts := Options{Dir: dir, Shards: shards, Clock: clock, LockDelay: time.Minute}
			openTable := func() (*Store, *locker.Table) {
				store, err := Open(opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { store.Close() })
				cfg := locker.DefaultConfig()
				cfg.Shards, cfg.Clock, cfg.Journal, cfg.LockDelay = shards, clock, store, time.Minute
				cfg.FirstToken = store.FirstToken(boot)
				tb, err := locker.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { tb.Close() })
				if err := store.Load(tb); err != nil {
					t.Fatal(err)
				}
				return store, tb
			}
			store, tb := openTable()
			toks := map[string]uint64{}
			for i := range 32 {
				k := fmt.Sprint("pre", i)
				tok, ok, _ := tb.Acquire(&locker.Request{Key: []byte(k), TTL: time.Hour, Owner: []byte(k)})
				if !ok {
					t.Fatal("no grant")
				}
				toks[k] = tok
			}
			if err := store.Commit(); err != nil {
				t.Fatal(err)
			}
			ran := false
			clock.arm(at, func() {
				ran = true
				for i := range 32 {
					k := []byte(fmt.Sprint("pre", i))
					switch i % 4 {
					case 0:
						tb.Release(k, toks[string(k)])
					case 1:
						tb.Extend(k, toks[string(k)], 3*time.Hour)
					}
					tb.Acquire(&locker.Request{Key: []byte(fmt.Sprint("during", i)), TTL: 2 * time.Hour})
					tb.Acquire(&locker.Request{Key: []byte(fmt.Sprint("readers", i%3)), TTL: 2 * time.Hour, Mode: locker.Shared})
				}
				tb.Create([]byte("made-during"), locker.CreateOptions{Limit: 5})
			})
			if err := store.Compact(); err != nil {
				t.Fatal(err)
			}
			if !ran {
				t.Fatal("the hook did not run during the dump")
			}
			if err := store.Commit(); err != nil {
				t.Fatal(err)
			}
			before := tableStates(tb)
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}
			checkCompacted(t, dir)
			_, tb = openTable()
			if d := statesDiff(before, tableStates(tb), int64(clock.Now()), restartTol, true); d != "" {
				t.Fatalf("the table after the restart differs:\n%s", d)
			}
		})
	}
}
