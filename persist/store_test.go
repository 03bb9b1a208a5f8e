package persist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
)

var policies = []Policy{FsyncAlways, FsyncEverySec, FsyncNo}

// tokenLog remembers every token a test was handed.
type tokenLog struct{ all []uint64 }

func (l *tokenLog) add(tok uint64) uint64 { l.all = append(l.all, tok); return tok }

func (l *tokenLog) max() uint64 {
	var m uint64
	for _, t := range l.all {
		m = max(m, t)
	}
	return m
}

// workload does a bit of everything the journal records. Session n's work
// builds on what earlier sessions left (restored locks included).
func workload(s *session, n int, toks *tokenLog, compact bool) {
	t := s.t
	t.Helper()
	p := func(name string) string { return fmt.Sprintf("%s-%d", name, n) }
	s.create(p("cfg"), locker.CreateOptions{DefaultTTL: 30 * time.Minute, LockDelay: 5 * time.Minute, LockDelaySet: true})
	s.create(p("sem"), locker.CreateOptions{Limit: 3, DefaultTTL: time.Hour})
	s.create(p("zero-delay"), locker.CreateOptions{LockDelaySet: true})
	s.create(p("to-delete"), locker.CreateOptions{Limit: 2})
	s.delete(p("to-delete"))

	x := toks.add(s.acquire(p("x"), 10*time.Minute, "alice"))
	s.extend(p("x"), x, 20*time.Minute)
	if again := s.acquire(p("x"), 25*time.Minute, "alice"); again != x {
		t.Fatalf("an owner's retry got token %d, want %d", again, x)
	}
	toks.add(s.acquire(p("cfg"), 0, "bob")) // the lock's default ttl
	p1 := toks.add(s.acquire(p("sem"), 0, "p1"))
	toks.add(s.acquire(p("sem"), 40*time.Minute, "p2"))
	toks.add(s.acquire(p("sem"), 50*time.Minute, ""))
	s.release(p("sem"), p1)
	r1 := toks.add(s.acquireShared(p("rw"), time.Hour, "r1"))
	toks.add(s.acquireShared(p("rw"), 2*time.Hour, "r2"))
	toks.add(s.acquireShared(p("rw"), 3*time.Hour, ""))
	s.release(p("rw"), r1)
	if compact {
		if err := s.store.Compact(); err != nil {
			t.Fatalf("Compact: %v", err)
		}
	}
	gone := toks.add(s.acquire(p("released"), time.Minute, "carol"))
	s.release(p("released"), gone)
	toks.add(s.acquire(strings.Repeat("L", 200)+p(""), time.Hour, strings.Repeat("o", 100)))
	toks.add(s.acquire(p("zero-delay"), 7*time.Minute, "dave"))
	toks.add(s.acquireShared(p("adopted"), time.Hour, "e"))
	s.create(p("adopted"), locker.CreateOptions{DefaultTTL: time.Minute}) // adopts the read-held lock

	// Work on what earlier sessions left behind.
	if n > 0 {
		q := func(name string) string { return fmt.Sprintf("%s-%d", name, n-1) }
		st, ok := s.status(q("x"))
		if !ok || !st.Held {
			t.Fatalf("session %d: %s not held after the restart: %+v", n, q("x"), st)
		}
		// A client retrying across the restart gets its lease back.
		if again := s.acquire(q("x"), 30*time.Minute, "alice"); again != st.Token {
			t.Fatalf("session %d: the owner's retry after the restart got %d, want %d", n, again, st.Token)
		}
		if _, ok, err := s.table.Acquire(&locker.Request{Key: []byte(q("x")), TTL: time.Minute, Owner: []byte("mallory")}); ok || err != nil {
			t.Fatalf("session %d: a restored lease let another owner in (%v)", n, err)
		}
		s.extend(q("x"), st.Token, 45*time.Minute)
		rw, _ := s.status(q("rw"))
		if len(rw.Holders) != 2 {
			t.Fatalf("session %d: %s holders %+v, want 2", n, q("rw"), rw.Holders)
		}
		s.release(q("rw"), rw.Holders[0].Token)
		toks.add(s.acquire(q("sem"), time.Minute, "late"))
		if _, ok, _ := s.table.Acquire(&locker.Request{Key: []byte(q("sem")), TTL: time.Minute}); ok {
			t.Fatalf("session %d: a restored semaphore granted a fourth permit", n)
		}
		cfg, _ := s.status(q("cfg"))
		s.release(q("cfg"), cfg.Token)
		s.delete(q("cfg"))
	}
}

func TestRestartKeepsTable(t *testing.T) {
	cases := []struct {
		name     string
		policy   Policy
		compact  bool
		restarts int
	}{
		{"always", FsyncAlways, false, 1},
		{"always compacted", FsyncAlways, true, 1},
		{"everysec", FsyncEverySec, false, 1},
		{"no compacted", FsyncNo, true, 1},
		{"always three restarts", FsyncAlways, false, 3},
		{"always three restarts compacted", FsyncAlways, true, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			o := sessionOpts{fsync: c.policy, lockDelay: time.Minute}
			s := open(t, dir, nil, o)
			clock := s.clock
			var toks tokenLog
			for n := 0; n <= c.restarts; n++ {
				if n > 0 {
					before := s.states()
					s.close()
					s = open(t, dir, clock, o)
					sameTable(t, before, s.states(), clock.Now())
					if s.first <= toks.max() {
						t.Fatalf("restart %d: FirstToken %d is not above token %d issued before", n, s.first, toks.max())
					}
					if _, ok := s.status(fmt.Sprintf("to-delete-%d", n-1)); ok {
						t.Fatal("a deleted lock came back")
					}
					if _, ok := s.status(fmt.Sprintf("released-%d", n-1)); ok {
						t.Fatal("a released on-the-fly lock came back")
					}
					if tok := s.acquire(fmt.Sprintf("new-%d", n), time.Minute, ""); tok <= toks.max() {
						t.Fatalf("restart %d: new token %d not above %d", n, tok, toks.max())
					} else {
						toks.add(tok)
					}
				}
				workload(s, n, &toks, c.compact)
				s.commit()
			}
			before := s.states()
			s.close()
			s = open(t, dir, clock, o)
			sameTable(t, before, s.states(), clock.Now())
			if s.first <= toks.max() {
				t.Fatalf("FirstToken %d is not above token %d issued before", s.first, toks.max())
			}
			// Spot checks on top of the whole-table comparison.
			last := c.restarts
			st, ok := s.status(fmt.Sprintf("sem-%d", last))
			if !ok || st.Limit != 3 || st.DefaultTTL != time.Hour || len(st.Holders) != 2 {
				t.Fatalf("semaphore after restart: %+v", st)
			}
			st, _ = s.status(fmt.Sprintf("x-%d", last))
			if !st.Held || st.Owner != "alice" || st.TTL < 25*time.Minute-restartTol || st.TTL > 25*time.Minute {
				t.Fatalf("x after restart: %+v", st)
			}
			st, _ = s.status(fmt.Sprintf("adopted-%d", last))
			if !st.Created || !st.Shared || st.DefaultTTL != time.Minute {
				t.Fatalf("adopted lock after restart: %+v", st)
			}
		})
	}
}

// TestRestartExpiry: deadlines are wall-clock instants, so what ran out
// while the server was down has expired at start, into its lock-delay if
// that has not run out too.
func TestRestartExpiry(t *testing.T) {
	const down = time.Hour // the first session ran this long ago
	type state struct{ tok, tok2 uint64 }
	cases := []struct {
		name         string
		defaultDelay time.Duration
		setup        func(s *session) state
		check        func(t *testing.T, s *session, st state)
	}{
		{"expired on-the-fly lock is gone", 0, func(s *session) state {
			return state{tok: s.acquire("k", 10*time.Minute, "a")}
		}, func(t *testing.T, s *session, st state) {
			if _, ok := s.status("k"); ok {
				t.Fatal("an expired on-the-fly lock survived the restart")
			}
			if s.table.Verify([]byte("k"), st.tok) {
				t.Fatal("an expired lease verifies")
			}
		}},
		{"expired lease of a created lock leaves it free", 0, func(s *session) state {
			s.create("k", locker.CreateOptions{DefaultTTL: time.Minute})
			return state{tok: s.acquire("k", 0, "a")}
		}, func(t *testing.T, s *session, st state) {
			got, ok := s.status("k")
			if !ok || !got.Created || got.Held || got.Delayed || got.DefaultTTL != time.Minute {
				t.Fatalf("status %+v", got)
			}
			if tok := s.acquire("k", 0, "b"); tok <= st.tok {
				t.Fatalf("token %d after %d", tok, st.tok)
			}
		}},
		{"expired into a lock-delay still running", 0, func(s *session) state {
			s.create("k", locker.CreateOptions{LockDelay: 2 * time.Hour, LockDelaySet: true})
			return state{tok: s.acquire("k", 10*time.Minute, "a")}
		}, func(t *testing.T, s *session, st state) {
			// Expired 50 minutes ago: 70 minutes of delay are left.
			got, _ := s.status("k")
			if got.Held || !got.Delayed || got.DelayLeft > 70*time.Minute || got.DelayLeft < 70*time.Minute-restartTol {
				t.Fatalf("status %+v, want delayed for about 70m", got)
			}
			if _, ok, _ := s.table.Acquire(&locker.Request{Key: []byte("k"), TTL: time.Minute}); ok {
				t.Fatal("granted during the lock-delay")
			}
			if s.table.Verify([]byte("k"), st.tok) {
				t.Fatal("a lease in its lock-delay verifies")
			}
			s.clock.Advance(71 * time.Minute)
			if tok := s.acquire("k", time.Minute, ""); tok <= st.tok {
				t.Fatalf("token %d after %d", tok, st.tok)
			}
		}},
		{"expired with a lock-delay that has run out", 0, func(s *session) state {
			s.create("k", locker.CreateOptions{LockDelay: 30 * time.Minute, LockDelaySet: true})
			return state{tok: s.acquire("k", 10*time.Minute, "a")}
		}, func(t *testing.T, s *session, st state) {
			if got, _ := s.status("k"); got.Held || got.Delayed {
				t.Fatalf("status %+v, want free", got)
			}
		}},
		{"the table's lock-delay applies to an on-the-fly lock", 2 * time.Hour, func(s *session) state {
			return state{tok: s.acquire("k", 10*time.Minute, "a")}
		}, func(t *testing.T, s *session, st state) {
			if got, ok := s.status("k"); !ok || !got.Delayed || got.DelayLeft < 70*time.Minute-restartTol {
				t.Fatalf("status %+v, want delayed", got)
			}
		}},
		{"a created lock's zero lock-delay overrides the table's", 2 * time.Hour, func(s *session) state {
			s.create("k", locker.CreateOptions{LockDelaySet: true})
			return state{tok: s.acquire("k", 10*time.Minute, "a")}
		}, func(t *testing.T, s *session, st state) {
			if got, _ := s.status("k"); got.Held || got.Delayed {
				t.Fatalf("status %+v, want free", got)
			}
		}},
		{"live lease keeps its wall-clock deadline", 0, func(s *session) state {
			return state{tok: s.acquire("k", 2*time.Hour, "a")}
		}, func(t *testing.T, s *session, st state) {
			got, _ := s.status("k")
			if !got.Held || got.Token != st.tok || got.Owner != "a" || got.TTL > time.Hour || got.TTL < time.Hour-restartTol {
				t.Fatalf("status %+v, want held by %d for about 1h", got, st.tok)
			}
		}},
		{"readers: the expired one delays, the live one holds", 0, func(s *session) state {
			s.create("k", locker.CreateOptions{LockDelay: 2 * time.Hour, LockDelaySet: true})
			return state{tok: s.acquireShared("k", 10*time.Minute, "old"), tok2: s.acquireShared("k", 3*time.Hour, "new")}
		}, func(t *testing.T, s *session, st state) {
			got, _ := s.status("k")
			if !got.Held || !got.Shared || len(got.Holders) != 1 || got.Holders[0].Token != st.tok2 || got.Holders[0].Owner != "new" {
				t.Fatalf("status %+v, want one live reader %d", got, st.tok2)
			}
			if got.DelayLeft < 70*time.Minute-restartTol || got.DelayLeft > 70*time.Minute {
				t.Fatalf("delay left %v, want about 70m", got.DelayLeft)
			}
			if s.table.Verify([]byte("k"), st.tok) || !s.table.Verify([]byte("k"), st.tok2) {
				t.Fatal("Verify wrong after the restart")
			}
		}},
		{"readers all expired, one in its delay", 0, func(s *session) state {
			s.create("k", locker.CreateOptions{LockDelay: 2 * time.Hour, LockDelaySet: true})
			return state{tok: s.acquireShared("k", 10*time.Minute, ""), tok2: s.acquireShared("k", 10*time.Minute, "")}
		}, func(t *testing.T, s *session, st state) {
			got, _ := s.status("k")
			if got.Held || !got.Delayed {
				t.Fatalf("status %+v, want delayed", got)
			}
			if _, ok, _ := s.table.Acquire(&locker.Request{Key: []byte("k"), TTL: time.Minute}); ok {
				t.Fatal("a writer got in during the readers' lock-delay")
			}
		}},
		{"semaphore: an expired permit in its delay still counts", 0, func(s *session) state {
			s.create("k", locker.CreateOptions{Limit: 2, LockDelay: 2 * time.Hour, LockDelaySet: true})
			return state{tok: s.acquire("k", 10*time.Minute, "gone"), tok2: s.acquire("k", 3*time.Hour, "here")}
		}, func(t *testing.T, s *session, st state) {
			got, _ := s.status("k")
			if !got.Held || got.Limit != 2 || len(got.Holders) != 1 || got.Holders[0].Token != st.tok2 {
				t.Fatalf("status %+v", got)
			}
			if _, ok, _ := s.table.Acquire(&locker.Request{Key: []byte("k"), TTL: time.Minute}); ok {
				t.Fatal("a permit in its lock-delay was handed out again")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			h := newFakeHost()
			o := sessionOpts{lockDelay: c.defaultDelay, host: h}
			s := open(t, dir, nil, o)
			st := c.setup(s)
			s.commit()
			s.close()
			h.pass(down)
			s = open(t, dir, nil, o)
			c.check(t, s, st)
		})
	}
}

func TestRestartGrace(t *testing.T) {
	const grace = 10 * time.Minute
	dir := t.TempDir()
	h := newFakeHost()
	o := sessionOpts{lockDelay: time.Hour, host: h}
	s := open(t, dir, nil, o)
	short := s.acquire("short", 32*time.Minute, "a")         // 2m left at restart
	long := s.acquire("long", 90*time.Minute, "b")           // 60m left
	expired := s.acquire("expired", 10*time.Minute, "c")     // in its delay
	reader := s.acquireShared("reader", 31*time.Minute, "d") // 1m left
	s.create("sem", locker.CreateOptions{Limit: 1})          //
	permit := s.acquire("sem", 35*time.Minute, "e")          // 5m left
	s.commit()
	s.close()

	h.pass(30 * time.Minute)
	o.grace = grace
	s = open(t, dir, nil, o)
	cases := []struct {
		key      string
		tok      uint64
		min, max time.Duration
	}{
		// At least the grace from the start (the start's instant is read
		// a moment after Open anchored the clocks, so a little more).
		{"short", short, grace, grace + restartTol},
		{"long", long, time.Hour - restartTol, time.Hour},
		{"reader", reader, grace, grace + restartTol},
		{"sem", permit, grace, grace + restartTol},
	}
	for _, c := range cases {
		st, _ := s.status(c.key)
		if !st.Held || len(st.Holders) != 1 || st.Holders[0].Token != c.tok {
			t.Fatalf("%s: status %+v, want held by %d", c.key, st, c.tok)
		}
		if ttl := st.Holders[0].TTL; ttl < c.min || ttl > c.max {
			t.Errorf("%s: ttl %v, want between %v and %v", c.key, ttl, c.min, c.max)
		}
	}
	if st, _ := s.status("expired"); st.Held || !st.Delayed || s.table.Verify([]byte("expired"), expired) {
		t.Fatalf("grace revived an expired lease: %+v", st)
	}
}

// TestCrashKeepsCommitted: a process crash loses nothing Commit returned
// for, whatever the policy, and what was never committed is gone.
func TestCrashKeepsCommitted(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, nil, sessionOpts{fsync: p})
			s.create("c", locker.CreateOptions{Limit: 2})
			a := s.acquire("a", time.Hour, "x")
			s.commit()
			b := s.acquire("b", time.Hour, "y") // never committed: its reply never went out
			s.crash()

			s = open(t, dir, nil, sessionOpts{fsync: p})
			if st, ok := s.status("a"); !ok || st.Token != a {
				t.Fatalf("a committed grant was lost: %+v", st)
			}
			if st, ok := s.status("c"); !ok || st.Limit != 2 {
				t.Fatalf("a committed create was lost: %+v", st)
			}
			if _, ok := s.status("b"); ok {
				t.Fatal("an uncommitted grant was written")
			}
			if s.first <= b {
				t.Fatalf("FirstToken %d not above the uncommitted token %d", s.first, b)
			}
		})
	}
}

// TestTokensNeverRegress: a reservation is fsynced before ReserveTokens
// returns, under every policy, and a restart starts above it.
func TestTokensNeverRegress(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			o := sessionOpts{fsync: p, noLoad: true}
			s := open(t, dir, nil, o)
			tok := s.acquire("a", time.Hour, "")
			if st := s.store.Stats(); st.TokenCeiling < tok || st.TokenCeiling > tok+(1<<20) {
				t.Fatalf("ceiling %d after token %d", st.TokenCeiling, tok)
			}
			syncs := s.store.Stats().Fsyncs
			far := tok + 5<<20 // past several of the table's reservations
			s.store.ReserveTokens(far)
			if st := s.store.Stats(); st.TokenCeiling != far || st.Fsyncs != syncs+1 {
				t.Fatalf("after ReserveTokens(%d): ceiling %d, fsyncs %d (was %d)", far, st.TokenCeiling, st.Fsyncs, syncs)
			}
			s.store.ReserveTokens(far - 10) // lower: the ceiling stays
			if st := s.store.Stats(); st.TokenCeiling != far {
				t.Fatalf("a lower reservation moved the ceiling to %d", st.TokenCeiling)
			}
			s.crash()

			for n := range 3 {
				s = open(t, dir, nil, o)
				if s.first <= far {
					t.Fatalf("restart %d: FirstToken %d not above the reservation %d", n, s.first, far)
				}
				if st := s.store.Stats(); st.TokenCeiling < far {
					t.Fatalf("restart %d: ceiling %d", n, st.TokenCeiling)
				}
				next := s.acquire("a", time.Hour, "")
				if next <= far {
					t.Fatalf("restart %d: token %d not above %d", n, next, far)
				}
				far = next
				s.crash()
			}
		})
	}
}

// TestFirstToken: above the boot token, the reservation and every lock's
// last token.
func TestFirstToken(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	if s.first != boot {
		t.Fatalf("an empty directory's FirstToken(%d) = %d", boot, s.first)
	}
	tok := s.acquire("a", time.Hour, "")
	s.close()
	s = open(t, dir, nil, sessionOpts{})
	if got := s.store.FirstToken(1 << 50); got != 1<<50 {
		t.Fatalf("FirstToken(2^50) = %d: a later boot token must win", got)
	}
	if got := s.store.FirstToken(1); got <= tok {
		t.Fatalf("FirstToken(1) = %d, not above %d", got, tok)
	}
}

func TestPendingAndCommit(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			s := open(t, t.TempDir(), nil, sessionOpts{fsync: p, noLoad: true})
			if s.store.Pending() {
				t.Fatal("pending before any change")
			}
			if err := s.store.Commit(); err != nil {
				t.Fatal(err)
			}
			s.create("c", locker.CreateOptions{})
			if !s.store.Pending() {
				t.Fatal("not pending after a create")
			}
			s.commit()
			if s.store.Pending() {
				t.Fatal("pending after Commit")
			}
			syncs := s.store.Stats().Fsyncs
			s.commit() // nothing to do
			if got := s.store.Stats().Fsyncs; got != syncs {
				t.Fatalf("an empty commit fsynced (%d -> %d)", syncs, got)
			}
			tok := s.acquire("a", time.Minute, "") // reserves tokens: writes and fsyncs what is buffered
			s.commit()
			s.extend("a", tok, time.Hour)
			if !s.store.Pending() {
				t.Fatal("not pending after an extend")
			}
			before := s.store.Stats()
			s.commit()
			after := s.store.Stats()
			wantSync := uint64(0)
			if p == FsyncAlways {
				wantSync = 1
			}
			if after.Fsyncs != before.Fsyncs+wantSync {
				t.Fatalf("%s commit: fsyncs %d -> %d", p, before.Fsyncs, after.Fsyncs)
			}
			if after.LogBytes <= before.LogBytes {
				t.Fatalf("log bytes %d -> %d after a commit", before.LogBytes, after.LogBytes)
			}
			s.release("a", tok)
			if !s.store.Pending() {
				t.Fatal("not pending after a release")
			}
			s.store.ReserveTokens(1 << 40) // writes the buffer along with it
			if s.store.Pending() {
				t.Fatal("pending after a reservation wrote the buffer")
			}
		})
	}
}

// TestConcurrentCommit: commits from many goroutines, each with its own
// changes; each returns only once its changes are written (and synced under
// always), and they share fsyncs.
func TestConcurrentCommit(t *testing.T) {
	for _, p := range []Policy{FsyncAlways, FsyncNo} {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, nil, sessionOpts{fsync: p})
			const workers, each = 8, 40
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						key := []byte(fmt.Sprintf("w%d-%d", w, i))
						if _, ok, err := s.table.Acquire(&locker.Request{Key: key, TTL: time.Hour, Owner: key}); !ok || err != nil {
							errs <- fmt.Errorf("acquire %s: %v %v", key, ok, err)
							return
						}
						mine := s.store.appended.Load() // counts my change
						if err := s.store.Commit(); err != nil {
							errs <- err
							return
						}
						if done := s.store.done.Load(); done < mine {
							errs <- fmt.Errorf("Commit returned with %d of %d changes done", done, mine)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			s.commit()
			if s.store.Pending() {
				t.Fatal("pending after the last commit")
			}
			st := s.store.Stats()
			if p == FsyncAlways && (st.Fsyncs == 0 || st.Fsyncs > workers*each+1) {
				t.Fatalf("%d fsyncs for %d commits", st.Fsyncs, workers*each)
			}
			s.close()
			s = open(t, dir, nil, sessionOpts{fsync: p})
			for w := range workers {
				for i := range each {
					key := fmt.Sprintf("w%d-%d", w, i)
					if st, ok := s.status(key); !ok || st.Owner != key {
						t.Fatalf("%s lost: %+v", key, st)
					}
				}
			}
		})
	}
}

func TestStats(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{fsync: FsyncAlways})
	st := s.store.Stats()
	// Load has reserved the first tokens: one record, one fsync.
	if st.Policy != FsyncAlways || st.Compactions != 0 || !st.LastCompaction.IsZero() || st.Err != nil ||
		st.Fsyncs != 1 || st.TokenCeiling < boot+locker.TokenReserveChunk {
		t.Fatalf("a new store's stats: %+v", st)
	}
	for i := range 20 {
		s.acquire(fmt.Sprint("k", i), time.Hour, "")
		s.commit()
	}
	st = s.store.Stats()
	if st.Fsyncs < 20 || st.FsyncTotal <= 0 || st.LastFsync <= 0 || st.LogBytes <= 0 || st.TokenCeiling == 0 {
		t.Fatalf("stats after 20 commits: %+v", st)
	}
	before := time.Now()
	if err := s.store.Compact(); err != nil {
		t.Fatal(err)
	}
	after := s.store.Stats()
	if after.Compactions != 1 || after.LastCompaction.Before(before) || after.SnapshotBytes <= 0 || after.LogBytes != 0 {
		t.Fatalf("stats after a compaction: %+v (before %+v)", after, st)
	}
	s.acquire("more", time.Hour, "")
	s.commit()
	if got := s.store.Stats(); got.LogBytes <= 0 || got.Compactions != 1 {
		t.Fatalf("stats after a commit: %+v", got)
	}
	s.close()

	// A restart counts the logs it replayed as the log's size, and reserves ahead again.
	s = open(t, dir, nil, sessionOpts{})
	if got := s.store.Stats(); got.LogBytes <= 0 || got.Compactions != 0 || got.TokenCeiling < after.TokenCeiling {
		t.Fatalf("stats after a restart: %+v", got)
	}
}

func TestPolicyNames(t *testing.T) {
	for _, p := range policies {
		got, err := ParsePolicy(p.String())
		if err != nil || got != p {
			t.Fatalf("ParsePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	for _, bad := range []string{"", "Always", "sometimes"} {
		if _, err := ParsePolicy(bad); err == nil {
			t.Fatalf("ParsePolicy(%q) accepted", bad)
		}
	}
	if got := Policy(7).String(); got != "Policy(7)" {
		t.Fatalf("Policy(7).String() = %q", got)
	}
}

func TestOpenRequiresShardsAndClock(t *testing.T) {
	clock := &locker.ManualClock{}
	for _, o := range []Options{{Dir: t.TempDir(), Clock: clock}, {Dir: t.TempDir(), Shards: 4}} {
		if s, err := Open(o); err == nil {
			s.Close()
			t.Fatalf("Open(%+v) succeeded", o)
		}
	}
}

func TestOpenTwice(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	if s2, err := tryOpen(t, dir, nil, sessionOpts{}); err == nil {
		s2.store.Close()
		t.Fatal("a second Open of a directory in use succeeded")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: %v, want one saying the directory is in use", err)
	}
	s.close()
	s = open(t, dir, nil, sessionOpts{}) // free again once closed
	s.close()
	if err := s.store.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// TestOpenCreatesDir: a missing data directory is made.
func TestOpenCreatesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := open(t, dir, nil, sessionOpts{})
	s.acquire("k", time.Hour, "")
	s.close()
	s = open(t, dir, nil, sessionOpts{})
	if _, ok := s.status("k"); !ok {
		t.Fatal("lost k")
	}
}

// TestWriteFailure: a write that fails (here: the next log cannot be
// created, the log's file fails under the store) makes commits fail with
// ErrUnwritable, not for good: once the cause is gone the background retry
// writes what was buffered, and a restart finds all of it.
func TestWriteFailure(t *testing.T) {
	cases := []struct {
		name  string
		fail  func(t *testing.T, s *session, dir string) error
		clean func(t *testing.T, dir string)
	}{
		{"the next log cannot be created", func(t *testing.T, s *session, dir string) error {
			// A directory where compaction's new log would go.
			if err := os.Mkdir(filepath.Join(dir, logName(s.store.logNum+1)), 0o700); err != nil {
				t.Fatal(err)
			}
			return s.store.Compact()
		}, func(t *testing.T, dir string) {
			logs, _, _ := dataFiles(dir)
			if err := os.Remove(filepath.Join(dir, logName(logs[len(logs)-1]))); err != nil {
				t.Fatal(err)
			}
		}},
		{"the log's file fails under it", func(t *testing.T, s *session, dir string) error {
			s.store.mu.Lock()
			s.store.f.Close()
			s.store.mu.Unlock()
			s.acquire("doomed", time.Hour, "")
			return s.store.Commit()
		}, func(t *testing.T, dir string) {}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, nil, sessionOpts{})
			kept := s.acquire("kept", time.Hour, "")
			s.commit()
			if err := c.fail(t, s, dir); !errors.Is(err, ErrUnwritable) {
				t.Fatalf("the failing write returned %v, want ErrUnwritable", err)
			}
			if err := s.store.Stats().Err; err != nil {
				t.Fatalf("Stats().Err = %v: a write failure is retried, not for good", err)
			}
			c.clean(t, dir)
			testutil.Eventually(t, 10*time.Second, "the retry to succeed", func() bool { return s.store.WriteFailure() == nil })
			s.acquire("after", time.Hour, "")
			s.commit()
			s.close()

			s = open(t, dir, nil, sessionOpts{})
			if st, ok := s.status("kept"); !ok || st.Token != kept {
				t.Fatalf("a grant committed before the failure is lost: %+v", st)
			}
			for _, k := range []string{"doomed", "after"} {
				if _, ok := s.status(k); !ok && (k == "after" || c.name == "the log's file fails under it") {
					t.Fatalf("%s, written by the retry or after it, is lost", k)
				}
			}
		})
	}
}

// TestCloseWritesBuffered: Close writes (and syncs) what no Commit did.
func TestCloseWritesBuffered(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, nil, sessionOpts{fsync: p, noLoad: true})
			tok := s.acquire("a", time.Hour, "x")
			s.create("b", locker.CreateOptions{DefaultTTL: time.Minute})
			if !s.store.Pending() {
				t.Fatal("nothing pending")
			}
			s.close()
			s = open(t, dir, nil, sessionOpts{fsync: p})
			if st, _ := s.status("a"); st.Token != tok {
				t.Fatalf("a: %+v", st)
			}
			if st, _ := s.status("b"); st.DefaultTTL != time.Minute {
				t.Fatalf("b: %+v", st)
			}
		})
	}
}

// TestBackgroundWork: once loaded, the store commits what no reply asked
// for (a lease released by a closed connection, say) and, under everysec,
// fsyncs what was written, without being called.
func TestBackgroundWork(t *testing.T) {
	poll := func(t *testing.T, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Run("commit", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, dir, nil, sessionOpts{fsync: FsyncAlways})
		tok := s.acquire("a", time.Hour, "")
		poll(t, "the background commit", func() bool { return !s.store.Pending() })
		s.crash()
		s = open(t, dir, nil, sessionOpts{})
		if st, _ := s.status("a"); st.Token != tok {
			t.Fatalf("a: %+v", st)
		}
	})
	t.Run("everysec", func(t *testing.T) {
		start := time.Now()
		s := open(t, t.TempDir(), nil, sessionOpts{fsync: FsyncEverySec})
		s.acquire("a", time.Hour, "")
		s.commit()
		s.store.mu.Lock()
		written, synced := s.store.written, s.store.synced
		s.store.mu.Unlock()
		if synced >= written && time.Since(start) < 900*time.Millisecond {
			t.Fatalf("everysec synced at commit (%d of %d)", synced, written)
		}
		poll(t, "the once-a-second fsync", func() bool {
			s.store.mu.Lock()
			defer s.store.mu.Unlock()
			return s.store.synced >= written
		})
	})
}

// TestCloseWritesAndSyncs: Close, the last step of a clean shutdown, writes
// what no commit took yet (an EPHEMERAL lease released as its connection
// closed, say) and fsyncs it under every policy, so that a clean stop is on
// disk even under everysec and no.
func TestCloseWritesAndSyncs(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, nil, sessionOpts{fsync: p, noLoad: true})
			kept := s.acquire("kept", time.Hour, "")
			gone := s.acquire("gone", time.Hour, "")
			s.commit()
			s.release("gone", gone) // buffered, not committed
			before := s.store.Stats().Fsyncs
			s.close()
			if got := s.store.Stats().Fsyncs; got != before+1 {
				t.Errorf("Close fsynced %d times, want once", got-before)
			}
			s = open(t, dir, s.clock, sessionOpts{fsync: p})
			if !s.table.Verify([]byte("kept"), kept) {
				t.Error("kept's lease was lost")
			}
			if s.table.Verify([]byte("gone"), gone) {
				t.Error("gone's release, made before Close, was lost")
			}
		})
	}
}
