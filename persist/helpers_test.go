package persist

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
	"github.com/rs/zerolog"
)

// session is one run of a server over a data directory: a store and the
// table it journals.
type session struct {
	t     testing.TB
	store *Store
	table *locker.Table
	clock *locker.ManualClock
	first uint64 // the table's FirstToken
	log   *testutil.SyncBuffer
}

type sessionOpts struct {
	fsync        Policy
	grace        time.Duration
	lockDelay    time.Duration
	compactBytes int64
	repair       bool
	maxKeyLen    int
	shards       int
	noLoad       bool       // leave the store without its table: no background work
	host         TimeSource // nil for the machine's clocks
	// fault is Options.Fault.
	fault func(op string) error
}

func (o sessionOpts) options(dir string, clock locker.Clock, log *testutil.SyncBuffer) Options {
	shards := o.shards
	if shards == 0 {
		shards = 4
	}
	return Options{
		Dir:          dir,
		Fsync:        o.fsync,
		Repair:       o.repair,
		RestartGrace: o.grace,
		Shards:       shards,
		Clock:        clock,
		LockDelay:    o.lockDelay,
		CompactBytes: o.compactBytes,
		Log:          zerolog.New(log),
		TimeSource:   o.host,
		Fault:        o.fault,
	}
}

// boot is the boot-epoch token the tests pass to FirstToken.
const boot = 1000

// open starts a session over dir, failing the test if the store does not
// open or load. clock may be nil for a new one.
func open(t testing.TB, dir string, clock *locker.ManualClock, o sessionOpts) *session {
	t.Helper()
	s, err := tryOpen(t, dir, clock, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

func tryOpen(t testing.TB, dir string, clock *locker.ManualClock, o sessionOpts) (*session, error) {
	t.Helper()
	if clock == nil {
		clock = &locker.ManualClock{}
		clock.Advance(time.Hour) // an origin far from zero, as locker's tests do
	}
	log := &testutil.SyncBuffer{}
	store, err := Open(o.options(dir, clock, log))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { store.Close() })
	cfg := locker.DefaultConfig()
	cfg.Shards = store.opts.Shards
	cfg.Clock = clock
	cfg.LockDelay = o.lockDelay
	cfg.Journal = store
	cfg.FirstToken = store.FirstToken(boot)
	if o.maxKeyLen > 0 {
		cfg.MaxKeyLen = o.maxKeyLen
	}
	table, err := locker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { table.Close() })
	s := &session{t: t, store: store, table: table, clock: clock, first: cfg.FirstToken, log: log}
	if !o.noLoad {
		if err := store.Load(table); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (s *session) commit() {
	s.t.Helper()
	if err := s.store.Commit(); err != nil {
		s.t.Fatalf("Commit: %v", err)
	}
}

func (s *session) close() {
	s.t.Helper()
	if err := s.store.Close(); err != nil {
		s.t.Fatalf("Close: %v", err)
	}
	s.table.Close()
}

// crash abandons the session as kill -9 would: nothing buffered is written,
// the files are closed as the kernel would close them.
func (s *session) crash() {
	s.t.Helper()
	st := s.store
	st.stopBackground()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.f.Close()
	st.f = nil
	st.closed = true // Close is now a no-op
	st.dirLock.Close()
	s.table.Close()
}

func (s *session) create(key string, o locker.CreateOptions) {
	s.t.Helper()
	if ok, err := s.table.Create([]byte(key), o); !ok || err != nil {
		s.t.Fatalf("Create(%q) = %v, %v", key, ok, err)
	}
}

func (s *session) acquire(key string, ttl time.Duration, owner string) uint64 {
	s.t.Helper()
	tok, ok, err := s.table.Acquire(&locker.Request{Key: []byte(key), TTL: ttl, Owner: []byte(owner)})
	if !ok || err != nil {
		s.t.Fatalf("Acquire(%q) = %d, %v, %v", key, tok, ok, err)
	}
	return tok
}

func (s *session) acquireShared(key string, ttl time.Duration, owner string) uint64 {
	s.t.Helper()
	tok, ok, err := s.table.Acquire(&locker.Request{Key: []byte(key), TTL: ttl, Owner: []byte(owner), Mode: locker.Shared})
	if !ok || err != nil {
		s.t.Fatalf("Acquire(%q, shared) = %d, %v, %v", key, tok, ok, err)
	}
	return tok
}

func (s *session) release(key string, tok uint64) {
	s.t.Helper()
	if !s.table.Release([]byte(key), tok) {
		s.t.Fatalf("Release(%q, %d) failed", key, tok)
	}
}

func (s *session) extend(key string, tok uint64, ttl time.Duration) {
	s.t.Helper()
	if ok, err := s.table.Extend([]byte(key), tok, ttl); !ok || err != nil {
		s.t.Fatalf("Extend(%q, %d) = %v, %v", key, tok, ok, err)
	}
}

func (s *session) delete(key string) {
	s.t.Helper()
	if ok, err := s.table.Delete([]byte(key)); !ok || err != nil {
		s.t.Fatalf("Delete(%q) = %v, %v", key, ok, err)
	}
}

func (s *session) status(key string) (locker.Status, bool) { return s.table.Status([]byte(key)) }

func (s *session) states() map[string]locker.LockState { return tableStates(s.table) }

// restartTol bounds how much earlier a deadline may come back: the real
// time between the two Opens, which the manual clock does not see.
const restartTol = 5 * time.Second

// sameTable fails the test unless after holds what before held.
func sameTable(t *testing.T, before, after map[string]locker.LockState, now time.Duration) {
	t.Helper()
	if d := statesDiff(before, after, int64(now), restartTol, true); d != "" {
		t.Fatalf("the table after the restart differs:\n%s", d)
	}
}

// files lists the data files in dir, sorted.
func files(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

func newestLog(t *testing.T, dir string) string {
	t.Helper()
	logs, _, err := dataFiles(dir)
	if err != nil || len(logs) == 0 {
		t.Fatalf("no logs in %s (%v)", dir, err)
	}
	return filepath.Join(dir, logName(logs[len(logs)-1]))
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, name := range files(t, dir) {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func warnings(l *testutil.SyncBuffer) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, `"level":"warn"`) {
			out = append(out, line)
		}
	}
	return out
}
