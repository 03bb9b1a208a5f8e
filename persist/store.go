package persist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/leasehold/leasehold/locker"
	"github.com/rs/zerolog"
)

// Policy is when the log is fsynced, with Redis's appendfsync meanings.
type Policy int

const (
	// FsyncAlways fsyncs before any reply that follows a change is sent;
	// concurrent commits share one fsync.
	FsyncAlways Policy = iota
	// FsyncEverySec writes before replying and fsyncs once a second: an OS
	// crash loses at most about a second of grants, a process crash none.
	FsyncEverySec
	// FsyncNo writes before replying and leaves fsync to the OS.
	FsyncNo
)

var policyNames = []string{"always", "everysec", "no"}

func (p Policy) String() string {
	if p < 0 || int(p) >= len(policyNames) {
		return fmt.Sprintf("Policy(%d)", int(p))
	}
	return policyNames[p]
}

// ParsePolicy reads always, everysec or no.
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if s == n {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("persist: fsync policy must be always, everysec or no, got %q", s)
}

// Options are a Store's settings.
type Options struct {
	Dir    string // created if missing
	Fsync  Policy
	Repair bool // cut damaged files at the damage instead of refusing to start
	// RestartGrace extends every lease still live at start to at least this
	// long after the start, so that holders get to renew after the outage.
	RestartGrace time.Duration
	Shards       int           // the lock table's, for the per-shard buffers
	Clock        locker.Clock  // the lock table's; deadlines are converted from it
	LockDelay    time.Duration // the table's default lock-delay
	// CompactBytes: the log is compacted (a snapshot written, older files
	// removed) once it exceeds both this and twice the last snapshot's size;
	// 0 for DefaultCompactBytes.
	CompactBytes int64
	Log          zerolog.Logger
	// TimeSource reads the machine's boot id, boot clock and wall clock,
	// which restored deadlines are converted by; nil for SystemTime().
	TimeSource TimeSource
}

// DefaultCompactBytes is Options.CompactBytes' usual value.
const DefaultCompactBytes = 64 << 20

// ErrFailed wraps the error that stopped a Store: after a failed write or
// fsync nothing more is written, as Redis stops rather than acknowledge
// writes it could not log.
var ErrFailed = errors.New("persist: the data directory failed")

// Store is the data directory of one server. Its methods are safe for
// concurrent use.
type Store struct {
	opts       Options
	dirAnchor  int64 // the directory's time line (see timeMark) at monoAnchor
	monoAnchor int64 // the table's clock at Open

	bufs     []shardBuf
	appended atomic.Uint64 // changes buffered so far
	done     atomic.Uint64 // changes written (and, under FsyncAlways, synced)

	maxToken atomic.Uint64 // the highest token granted, for reserveAhead
	reserved atomic.Uint64 // ceiling, for ReserveTokens to read without a lock

	// Lock order: reserveMu, then syncMu, then mu; neither of the first two
	// is taken while a later one is held. Whoever closes the log holds all
	// three, so that no fsync outside mu is at a file being closed.
	reserveMu sync.Mutex // one token reservation at a time
	syncMu    sync.Mutex // held by an fsync outside mu, and by whoever closes the log
	mu        sync.Mutex // guards everything below
	dirLock   *os.File
	f         *os.File
	w         *record.Writer
	logNum    uint64
	logBase   int64  // bytes of the logs since the snapshot, before the current one
	written   uint64 // changes written to the log
	synced    uint64 // changes fsynced
	ceiling   uint64 // the token reservation on disk
	err       error
	batch     []byte
	rec       *recovery // until Load
	recovered Recovery  // what Open and Load found and restored
	opened    time.Time // when Open began
	table     *locker.Table
	snapSize  int64
	lastSnap  time.Time
	snaps     int
	markLog   uint64 // the log the last time mark went into; 0 for none yet
	lastMark  int64  // the table's clock at that mark

	fsyncs     atomic.Uint64
	fsyncNanos atomic.Uint64
	lastFsync  atomic.Int64 // ns

	stopC chan struct{}
	doneC chan struct{}
}

// shardBuf holds one lock-table shard's changes until the next commit.
type shardBuf struct {
	mu sync.Mutex
	b  []byte
	_  [32]byte // keep neighbours' mutexes off this cache line
}

// Open opens (or creates) the data directory, recovers the table from it,
// and starts a new log. Call Load next, with a table whose Config.Journal is
// the Store and whose FirstToken is FirstToken's.
func Open(opts Options) (*Store, error) {
	if opts.Shards < 1 || opts.Clock == nil {
		return nil, errors.New("persist: shards and clock are required")
	}
	if opts.CompactBytes < 0 {
		return nil, fmt.Errorf("persist: compact bytes must not be negative, got %d", opts.CompactBytes)
	}
	if opts.TimeSource == nil {
		opts.TimeSource = SystemTime()
	}
	start := time.Now()
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	dirLock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	rec, err := recoverDir(opts.Dir, opts.Repair, opts.LockDelay)
	if err != nil {
		dirLock.Close()
		return nil, err
	}
	for _, w := range rec.warnings {
		opts.Log.Warn().Str("dir", opts.Dir).Msg(w)
	}
	s := &Store{
		opts:       opts,
		monoAnchor: int64(opts.Clock.Now()),
		bufs:       make([]shardBuf, opts.Shards),
		dirLock:    dirLock,
		rec:        rec,
		ceiling:    rec.model.ceiling,
		logBase:    rec.logBytes,
		snapSize:   rec.snapBytes,
		stopC:      make(chan struct{}),
		doneC:      make(chan struct{}),
		recovered: Recovery{
			Snapshot:      rec.snapshot,
			SnapshotBytes: rec.snapBytes,
			Logs:          rec.logs,
			LogBytes:      rec.logBytes,
			Warnings:      len(rec.warnings),
			TokenCeiling:  rec.model.ceiling,
		},
		opened: start,
	}
	s.dirAnchor = s.resume(rec.model, opts.TimeSource.Now())
	for _, l := range rec.model.locks {
		s.recovered.HighestToken = max(s.recovered.HighestToken, l.lastToken)
	}
	s.reserved.Store(s.ceiling)
	for _, path := range rec.stale {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			dirLock.Close()
			return nil, err
		}
	}
	if err := s.startLog(rec.nextLog); err != nil {
		dirLock.Close()
		return nil, err
	}
	return s, nil
}

// FirstToken is where the table's token sequence must start: above every
// token the directory knows of, and above boot, the boot-epoch token.
func (s *Store) FirstToken(boot uint64) uint64 {
	first := max(boot, s.ceiling+1)
	if s.rec != nil {
		for _, l := range s.rec.model.locks {
			first = max(first, l.lastToken+1)
		}
	}
	return first
}

// Load installs the recovered locks into t and starts the store's
// background work (fsync once a second, compaction).
func (s *Store) Load(t *locker.Table) error {
	if n := t.Config().Shards; n != len(s.bufs) {
		return fmt.Errorf("persist: the table has %d shards, the store was opened for %d", n, len(s.bufs))
	}
	s.mu.Lock()
	rec := s.rec
	s.rec = nil
	s.mu.Unlock()
	now := s.toDir(int64(s.opts.Clock.Now()))
	var locks, leases, delayed int
	for key, l := range rec.model.locks {
		st := l.lockState(key, s.toClock, now, s.opts.RestartGrace, s.opts.LockDelay)
		if !st.Created && len(st.Leases) == 0 {
			continue
		}
		if err := t.Restore(&st); err != nil {
			return fmt.Errorf("persist: restoring %q: %w", key, err)
		}
		locks++
		for _, l := range st.Leases {
			if l.DelayedUntil != 0 || l.Deadline <= s.toClock(now) {
				delayed++ // Restore expires it into its lock-delay
			} else {
				leases++
			}
		}
	}
	// Reserve the first tokens now, so that the first grant does not wait
	// for the fsync.
	s.maxToken.Store(t.Config().FirstToken)
	s.reserveAhead()
	s.mu.Lock()
	s.table = t
	r := &s.recovered
	r.Locks, r.Leases, r.Delayed, r.Took = locks, leases, delayed, time.Since(s.opened)
	s.mu.Unlock()
	go s.background()
	return nil
}

// Recovery reports what Open found in the directory and Load restored; its
// lock and lease counts are zero before Load.
func (s *Store) Recovery() Recovery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recovered
}

// toClock converts an instant on the directory's time line to the table's
// clock; toDir back.
func (s *Store) toClock(at int64) int64 { return s.monoAnchor + (at - s.dirAnchor) }
func (s *Store) toDir(mono int64) int64 { return s.dirAnchor + (mono - s.monoAnchor) }

// Change implements locker.Journal: it buffers c for the next commit.
func (s *Store) Change(shard int, c *locker.Change) {
	b := &s.bufs[shard]
	b.mu.Lock()
	b.b = appendChange(b.b, c, s.toDir(c.Deadline))
	b.mu.Unlock()
	s.appended.Add(1)
	if c.Kind == locker.ChangeGrant {
		for m := s.maxToken.Load(); c.Token > m && !s.maxToken.CompareAndSwap(m, c.Token); m = s.maxToken.Load() {
		}
	}
}

// ReserveTokens implements locker.Journal: the reservation is written and
// fsynced, whatever the policy, before it returns. The background work
// reserves ahead of the tokens issued (see reserveAhead), so the table's own
// calls normally find their tokens reserved already and return at once.
func (s *Store) ReserveTokens(upTo uint64) {
	if upTo <= s.reserved.Load() {
		return // the common case: reserved ahead already, no lock taken
	}
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	s.mu.Lock()
	if s.err != nil || upTo <= s.ceiling {
		// Reserved already; or failed, and then the server stops before it
		// replies with such a token.
		s.mu.Unlock()
		return
	}
	err := s.writeLocked(false, appendReserve(nil, upTo))
	f, written := s.f, s.written
	s.mu.Unlock()
	if err != nil {
		return
	}
	// The fsyncs happen outside mu, so commits go on meanwhile.
	s.syncMu.Lock()
	err = s.fsync(f)
	s.syncMu.Unlock()
	if err == nil {
		err = writeCeiling(s.opts.Dir, upTo)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.fail(err)
		return
	}
	s.synced = max(s.synced, written)
	s.ceiling = max(s.ceiling, upTo)
	s.reserved.Store(s.ceiling)
	s.markDone()
}

// markDone publishes how many changes are committed as the policy counts
// them: synced under FsyncAlways, written otherwise. The caller holds mu.
func (s *Store) markDone() {
	if s.opts.Fsync == FsyncAlways {
		s.done.Store(s.synced)
	} else {
		s.done.Store(s.written)
	}
}

// reserveAhead reserves tokens before the table needs them: once the highest
// token granted comes within a chunk of the reservation, it reserves two
// chunks past it, off the table's hot path.
func (s *Store) reserveAhead() {
	if issued := s.maxToken.Load(); issued+locker.TokenReserveChunk > s.reserved.Load() {
		s.ReserveTokens(issued + 2*locker.TokenReserveChunk)
	}
}

// Pending reports whether changes wait to be committed. It is cheap: the
// server asks before every reply it sends.
func (s *Store) Pending() bool { return s.appended.Load() > s.done.Load() }

// Commit writes every change buffered so far, and fsyncs them under
// FsyncAlways, before it returns: the server calls it before sending the
// replies of the commands that made them. Concurrent calls share one write
// and one fsync.
func (s *Store) Commit() error {
	target := s.appended.Load()
	if target <= s.done.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if target <= s.done.Load() {
		return nil // someone else's commit took ours along
	}
	return s.writeLocked(s.opts.Fsync == FsyncAlways, nil)
}

// writeLocked writes every buffered change, then extra, as one record, and
// fsyncs if asked. The caller holds mu.
func (s *Store) writeLocked(sync bool, extra []byte) error {
	n := s.appended.Load() // read before gathering: every change counted is in a buffer
	s.batch = s.batch[:0]
	for i := range s.bufs {
		b := &s.bufs[i]
		b.mu.Lock()
		s.batch = append(s.batch, b.b...)
		b.b = b.b[:0]
		b.mu.Unlock()
	}
	s.batch = append(s.batch, extra...)
	if len(s.batch) > 0 {
		s.batch = s.appendMarkDue(s.batch)
		if _, err := s.w.WriteRecord(s.batch); err != nil {
			return s.fail(err)
		}
	}
	s.written = max(s.written, n)
	if sync && s.synced < s.written {
		if err := s.fsync(s.f); err != nil {
			return s.fail(err)
		}
		s.synced = s.written
	}
	s.markDone()
	if cap(s.batch) > 4<<20 {
		s.batch = nil // one burst should not pin a large buffer
	}
	return nil
}

// fsync syncs f, the current log, and keeps the figures.
func (s *Store) fsync(f *os.File) error {
	start := time.Now()
	err := syncData(f)
	d := time.Since(start)
	s.fsyncs.Add(1)
	s.fsyncNanos.Add(uint64(d))
	s.lastFsync.Store(int64(d))
	return err
}

func (s *Store) fail(err error) error {
	s.err = fmt.Errorf("%w: %s: %v", ErrFailed, s.opts.Dir, err)
	s.opts.Log.Error().Err(err).Str("dir", s.opts.Dir).Msg("data directory write failed; nothing more is acknowledged")
	return s.err
}

// startLog opens log number n for appending. The caller holds mu, or owns s
// alone.
func (s *Store) startLog(n uint64) error {
	f, err := os.OpenFile(filepath.Join(s.opts.Dir, logName(n)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := syncDir(s.opts.Dir); err != nil {
		f.Close()
		return err
	}
	s.f, s.w, s.logNum = f, record.NewWriter(f), n
	return nil
}

// background commits what no reply has (an EPHEMERAL lease released by a
// closed connection, say), fsyncs once a second under FsyncEverySec, and
// compacts the log when it has grown.
func (s *Store) background() {
	defer close(s.doneC)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastSync := time.Now()
	var retryAt time.Time // compaction, after a failure
	var backoff time.Duration
	for {
		select {
		case <-s.stopC:
			return
		case <-tick.C:
		}
		s.Commit()
		s.reserveAhead()
		if s.opts.Fsync == FsyncEverySec && time.Since(lastSync) >= time.Second {
			lastSync = time.Now()
			s.syncWritten()
		}
		if time.Now().After(retryAt) && s.needsCompaction() {
			if err := s.compact(); err != nil {
				// Each try starts a log and dumps the table: back off, up
				// to a minute, rather than hammer a full disk every tick.
				backoff = min(max(2*backoff, time.Second), time.Minute)
				retryAt = time.Now().Add(backoff)
				s.opts.Log.Error().Err(err).Str("dir", s.opts.Dir).Dur("retry_in", backoff).Msg("compaction failed")
			} else {
				backoff = 0
			}
		}
	}
}

// syncWritten fsyncs what has been written and not yet synced. The fsync
// runs outside mu, so commits go on meanwhile, as Redis's everysec fsync
// runs on a thread of its own.
func (s *Store) syncWritten() {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	if s.err != nil || s.synced >= s.written {
		s.mu.Unlock()
		return
	}
	f, written := s.f, s.written
	s.mu.Unlock()
	err := s.fsync(f)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.fail(err)
		return
	}
	s.synced = max(s.synced, written)
	s.markDone()
}

// Close stops the background work, writes and fsyncs what is buffered, and
// closes the directory. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	closed := s.f == nil
	s.mu.Unlock()
	if closed {
		return nil
	}
	s.stopBackground()
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.err == nil {
		err = s.writeLocked(true, nil)
	}
	if cerr := s.w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if cerr := s.f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	s.f = nil
	s.dirLock.Close()
	return err
}

// stopBackground stops the background work Load started, if it did, and
// waits for it to end: the first step of Close, and of the tests' crash.
func (s *Store) stopBackground() {
	s.mu.Lock()
	started := s.table != nil
	s.mu.Unlock()
	if started {
		close(s.stopC)
		<-s.doneC
	}
}

// Stats describe the data directory for INFO persistence.
type Stats struct {
	Policy         Policy
	LogBytes       int64 // the logs since the last snapshot
	SnapshotBytes  int64
	Compactions    int
	LastCompaction time.Time // zero before the first
	Fsyncs         uint64
	FsyncTotal     time.Duration
	LastFsync      time.Duration
	TokenCeiling   uint64
	Err            error
}

// Stats returns the store's figures.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Policy:         s.opts.Fsync,
		SnapshotBytes:  s.snapSize,
		Compactions:    s.snaps,
		LastCompaction: s.lastSnap,
		Fsyncs:         s.fsyncs.Load(),
		FsyncTotal:     time.Duration(s.fsyncNanos.Load()),
		LastFsync:      time.Duration(s.lastFsync.Load()),
		TokenCeiling:   s.ceiling,
		Err:            s.err,
	}
	st.LogBytes = s.logBase
	if s.w != nil {
		st.LogBytes += s.w.Size()
	}
	return st
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
