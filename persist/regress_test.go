package persist

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
	"github.com/rs/zerolog"
)

// TestRegressionCreateAfterUnloggedExpiry: a lock made on the fly whose lease
// expired (unlogged, as every expiry is) and which CREATE then makes again
// with a lock-delay or a limit comes back from a restart with the dead
// lease in a lock-delay it never had: the replay applies the Create to the
// model's old lock, stale lease included, and the new settings then decide
// how long that lease "delays" the lock. The live table had a fresh, free
// lock.
func TestRegressionCreateAfterUnloggedExpiry(t *testing.T) {
	cases := []struct {
		name string
		opts locker.CreateOptions
	}{
		{"lock-delay", locker.CreateOptions{LockDelay: 2 * time.Hour, LockDelaySet: true}},
		{"semaphore with a lock-delay", locker.CreateOptions{Limit: 1, LockDelay: 2 * time.Hour, LockDelaySet: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			h := newFakeHost()
			s := open(t, dir, nil, sessionOpts{host: h}) // no table lock-delay
			s.acquire("k", time.Minute, "gone")
			s.clock.Advance(2 * time.Minute) // the lease expires; the lock goes with it
			s.create("k", c.opts)
			if st, _ := s.status("k"); st.Held || st.Delayed {
				t.Fatalf("before the restart: %+v, want a free lock", st)
			}
			s.commit()
			s.close()

			h.pass(time.Hour)
			s = open(t, dir, nil, sessionOpts{host: h})
			st, _ := s.status("k")
			if st.Delayed || st.DelayLeft > 0 {
				t.Errorf("BUG: after the restart the free lock is in a lock-delay for %v more (%+v): "+
					"the Create was replayed onto the expired on-the-fly lease", st.DelayLeft.Round(time.Minute), st)
			}
			if _, ok, _ := s.table.Acquire(&locker.Request{Key: []byte("k"), TTL: time.Minute}); !ok {
				t.Error("BUG: a free lock refuses a grant after the restart")
			}
		})
	}
}

// TestRegressionModelOverlapCreateAfterUnloggedExpiry: the same cause breaks the
// "set rather than adjust" argument compaction rests on. A real table's
// history (two on-the-fly grants that expire unlogged, then CREATE with a
// limit) replayed over the state it ends in (as a snapshot dumped during
// the log would be) keeps both dead leases as permits, while the whole log
// keeps one: the grants' meaning depends on whether the Create was applied
// before them.
func TestRegressionModelOverlapCreateAfterUnloggedExpiry(t *testing.T) {
	clock := &locker.ManualClock{}
	clock.Advance(time.Hour)
	j := &recJournal{}
	cfg := locker.DefaultConfig()
	cfg.Shards, cfg.FirstToken, cfg.Clock, cfg.Journal = 1, 1000, clock, j
	tb, err := locker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	for range 2 {
		if _, ok, _ := tb.Acquire(&locker.Request{Key: []byte("k"), TTL: time.Second}); !ok {
			t.Fatal("no grant")
		}
		clock.Advance(2 * time.Second)
	}
	if ok, err := tb.Create([]byte("k"), locker.CreateOptions{Limit: 2}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var es []entry
	for _, b := range j.entries {
		es = append(es, decodeOne(t, b))
	}
	full := replay(es)
	overlap := replay(append(snapshotEntries(t, full), es...))
	if d := modelDiffLast(full, overlap, false); d != "" {
		t.Errorf("BUG: the log replayed over the state it ends in differs from the log alone: %s", d)
	}
}

// TestRegressionCreateAdoptingDelayedLock: CREATE may adopt an on-the-fly lock
// that is in its lock-delay. The table keeps the running delay (to its
// original end), but both ways a restart rebuilds the lock recompute the
// delay's end as the lease's deadline plus the lock's *current* delay:
//   - from the log, the model's lease expired long ago and the new zero
//     delay has "run out": the lock comes back free, its delay cut short;
//   - from a snapshot, locker.Dump reports the delayed lease with deadline
//     (end of delay - current delay) = the end of the delay, in the future,
//     so Restore installs it as a LIVE lease: the token that had expired
//     verifies again and holds the lock for the rest of the delay.
func TestRegressionCreateAdoptingDelayedLock(t *testing.T) {
	for _, compact := range []bool{false, true} {
		name := "from the log"
		if compact {
			name = "from a snapshot"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			h := newFakeHost()
			o := sessionOpts{lockDelay: 2 * time.Hour, host: h}
			s := open(t, dir, nil, o)
			tok := s.acquire("k", time.Minute, "paused")
			s.clock.Advance(2 * time.Minute) // expired: in the table's 2h lock-delay
			s.create("k", locker.CreateOptions{LockDelaySet: true, LockDelay: 0})
			st, _ := s.status("k")
			if !st.Delayed || st.Held || s.table.Verify([]byte("k"), tok) {
				t.Fatalf("before the restart: %+v, want the running delay kept", st)
			}
			if compact {
				if err := s.store.Compact(); err != nil {
					t.Fatal(err)
				}
			}
			s.commit()
			s.close()

			h.pass(time.Hour)
			s = open(t, dir, nil, o)
			// The delay ends 2h+1m after the session's start, an hour ago:
			// about an hour is left.
			st, _ = s.status("k")
			if s.table.Verify([]byte("k"), tok) || st.Held {
				t.Errorf("BUG: the expired lease %d is live again after the restart: %+v", tok, st)
			}
			if !st.Delayed {
				t.Errorf("BUG: the running lock-delay was lost in the restart: %+v", st)
			}
		})
	}
}

// TestRegressionRepairLeavesLogGap: --repair that drops logs (after a missing log,
// or after damage in a log that is not the newest) numbers the new log after
// the highest log that was on disk, not after the last one it kept. The
// dropped logs are removed, so the directory now has a gap where they were,
// and the next start without --repair refuses it as a missing log; with
// --repair again it drops everything the repaired run wrote.
func TestRegressionRepairLeavesLogGap(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string, logs []uint64)
	}{
		{"a missing log", func(t *testing.T, dir string, logs []uint64) {
			os.Remove(filepath.Join(dir, logName(logs[1])))
		}},
		{"damage in an older log", func(t *testing.T, dir string, logs []uint64) {
			path := filepath.Join(dir, logName(logs[0]))
			testutil.FlipByte(t, path, fileSize(t, path)-1)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, k := range []string{"one", "two", "three"} {
				s := open(t, dir, nil, sessionOpts{})
				s.acquire(k, time.Hour, "")
				s.acquire(k+"-more", time.Hour, "") // a second record in the log
				s.close()
			}
			logs, _, _ := dataFiles(dir)
			c.damage(t, dir, logs)
			if _, err := tryOpen(t, dir, nil, sessionOpts{}); err == nil {
				t.Fatal("damage not detected")
			}
			s := open(t, dir, nil, sessionOpts{repair: true})
			s.acquire("after-repair", time.Hour, "")
			s.close()

			s, err := tryOpen(t, dir, nil, sessionOpts{})
			if err != nil {
				logs, _, _ := dataFiles(dir)
				t.Fatalf("BUG: the start after a --repair fails: %v (logs on disk: %v)", err, logs)
			}
			if _, ok := s.status("after-repair"); !ok {
				t.Fatal("the repaired run's grant is lost")
			}
		})
	}
}

// TestRegressionEmptySnapshotAccepted: a snapshot always starts with a header
// (format version, token ceiling), but recovery does not check that it has
// one. A snapshot file emptied by damage reads as an empty, valid snapshot:
// Open succeeds without a word, every lock it held is gone, and so is the
// token ceiling, so FirstToken goes back below tokens already issued.
func TestRegressionEmptySnapshotAccepted(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	tok := s.acquire("in-snapshot", time.Hour, "")
	if err := s.store.Compact(); err != nil {
		t.Fatal(err)
	}
	s.close()
	_, snaps, _ := dataFiles(dir)
	path := filepath.Join(dir, snapName(snaps[len(snaps)-1]))
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	s, err := tryOpen(t, dir, nil, sessionOpts{})
	var cerr *CorruptError
	if errors.As(err, &cerr) && cerr.File == path {
		return
	}
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	_, kept := s.status("in-snapshot")
	t.Errorf("BUG: an empty snapshot %s was accepted (warnings %q): lock kept=%v, FirstToken %d vs token %d issued before",
		filepath.Base(path), warnings(s.log), kept, s.first, tok)
}

// TestRegressionLoadFailureCloseHangs: when Load fails (here Restore refuses a lock
// name longer than the new table's MaxKeyLen), Load has already set the
// store's table but not started the background goroutine; Close sees the
// table, closes stopC and waits forever on doneC. The directory's lock is
// never released.
func TestRegressionLoadFailureCloseHangs(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	s.acquire("a-rather-long-lock-name", time.Hour, "")
	s.close()

	clock := &locker.ManualClock{}
	store, err := Open(Options{Dir: dir, Shards: 4, Clock: clock, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := locker.DefaultConfig()
	cfg.Shards, cfg.Clock, cfg.Journal, cfg.MaxKeyLen = 4, clock, store, 8
	cfg.FirstToken = store.FirstToken(boot)
	table, err := locker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	if err := store.Load(table); err == nil {
		t.Fatal("Load restored a key longer than MaxKeyLen")
	}
	closed := make(chan error, 1)
	go func() { closed <- store.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("BUG: Store.Close after a failed Load did not return within 10s: " +
			"it waits for the background goroutine Load never started")
	}
}

// TestRegressionRepairAppliesPartOfCutRecord: readFile applies a record's entries
// as it decodes them, so when an entry in the middle of a record does not
// decode, the entries before it are already in the model, although --repair
// cuts the file at the start of that record. The repaired run serves locks
// from a commit that is no longer on disk; the next restart forgets them.
func TestRegressionRepairAppliesPartOfCutRecord(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	s.acquire("before", time.Hour, "")
	s.close()
	logs, _, _ := dataFiles(dir)
	path := filepath.Join(dir, logName(logs[len(logs)-1]+1))
	grant := appendChange(nil, &locker.Change{Kind: locker.ChangeGrant, Key: []byte("half-commit"), Token: 5}, time.Now().Add(time.Hour).UnixNano())
	writeRecords(t, path, append(grant, 99, 0)) // a good grant, then an unknown kind

	s = open(t, dir, nil, sessionOpts{repair: true})
	_, during := s.status("half-commit")
	if got := fileSize(t, path); got != 0 {
		t.Fatalf("the damaged log was cut to %d bytes, want 0 (the record's start)", got)
	}
	s.close()
	s = open(t, dir, nil, sessionOpts{})
	_, after := s.status("half-commit")
	if during != after {
		t.Errorf("BUG: the repaired run held the lock %q from the record it cut (present=%v), the next start has it present=%v", "half-commit", during, after)
	}
}

// A token reservation by the table (under a shard lock, on a request
// goroutine) racing with the background compaction's rotate: ReserveTokens
// captures s.f under mu, drops mu, then fsyncs that *os.File after rotate has
// closed it -> "file already closed" -> s.fail -> the server stops.
func TestRegressionReserveRacesRotate(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{fsync: FsyncEverySec})
	s.acquire("a", time.Minute, "")
	s.commit()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.store.Compact()
		}
	}()
	base := s.store.Stats().TokenCeiling
	deadline := time.Now().Add(2 * time.Second)
	var err error
	for i := uint64(1); time.Now().Before(deadline); i++ {
		s.store.ReserveTokens(base + i*locker.TokenReserveChunk)
		if err = s.store.Stats().Err; err != nil {
			break
		}
	}
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("store failed by a reservation racing compaction: %v", err)
	}
}
