package persist

import (
	"errors"
	"fmt"
	"io"
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
	// Fault, for tests only, is asked before every write and fsync of a
	// log file, with op "write" or "fsync", and before every replacement of
	// the TOKENS file, "tokens": an error it returns fails the operation, a
	// log write once half its bytes have reached the file, as a disk that
	// fills up mid-write leaves it. Nil in production.
	Fault func(op string) error
}

// DefaultCompactBytes is Options.CompactBytes' usual value.
const DefaultCompactBytes = 64 << 20

var (
	// ErrFailed wraps the error that stopped a Store for good: a failed
	// fsync of a log. After one, what the kernel kept of the pages it could
	// not write is unknown (an fsync retried may report success for pages
	// it dropped: PostgreSQL's "fsyncgate"), so nothing more is written and
	// the server stops, as PostgreSQL panics, rather than acknowledge
	// writes it cannot vouch for.
	ErrFailed = errors.New("persist: the data directory failed")
	// ErrUnwritable wraps the error of a write to the data directory that
	// failed (a full disk, say) and that the Store retries in the
	// background: Commit returns it until a retry succeeds, so no change
	// made meanwhile is acknowledged. The changes stay buffered and are
	// written by the retry, in a new log.
	ErrUnwritable = errors.New("persist: the data directory cannot be written")
)

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
	err       error  // a failure for good (ErrFailed): nothing more is written
	closed    bool
	// batch is the changes gathered for a write; after a failed write, kept
	// for the retry.
	batch     []byte
	rec       *recovery // until Load
	recovered Recovery  // what Open and Load found and restored
	opened    time.Time // when Open began
	table     *locker.Table
	snapSize  int64
	lastSnap  time.Time
	snaps     int
	bgStopped bool   // stopBackground has run
	markLog   uint64 // the log the last time mark went into; 0 for none yet
	lastMark  int64  // the table's clock at that mark

	// A write failure being retried (ErrUnwritable), see retryWrites; under mu.
	werr          error
	cause         error         // werr's own error, from the OS
	torn          bool          // the current log took a failed write: cut it back and start another before writing
	good          int64         // the current log's size after its last good write
	wantCeiling   uint64        // a token reservation a failure left unwritten
	writable      chan struct{} // closed when writes resume, or fail for good, or the store closes
	noWaits       bool          // EndWaits was called: ReserveTokens does not wait
	writeFailures uint64
	failingSince  time.Time // zero while writable
	lastResume    time.Time

	unwritable atomic.Bool // werr != nil, for the hot path to read without mu

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
//
// While the directory cannot be written (ErrUnwritable) it waits for the
// retry to succeed, so that the table never issues a token above the
// reservation on disk; reserving ahead makes that wait all but impossible,
// since it needs a chunk of grants while changes are refused. It returns
// without the assurance only once the store has failed for good, is closed
// or EndWaits was called; the server's commits then fail, so that no reply
// shows such a token.
func (s *Store) ReserveTokens(upTo uint64) {
	for upTo > s.reserved.Load() {
		wait := s.reserve(upTo)
		if wait == nil {
			return
		}
		<-wait
	}
}

// reserve makes one try at reserving up to upTo. It returns nil once that is
// done, or cannot be (the store failed for good or is closed), and otherwise
// a channel that closes when it is worth trying again.
func (s *Store) reserve(upTo uint64) <-chan struct{} {
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	s.mu.Lock()
	if s.err != nil || s.closed || upTo <= s.ceiling {
		s.mu.Unlock()
		return nil
	}
	if s.werr == nil {
		s.writeLocked(false, appendReserve(nil, upTo))
	}
	if s.werr != nil {
		// The retry writes it; until then, nothing above the ceiling.
		s.wantCeiling = max(s.wantCeiling, upTo)
		wait := s.writable
		if s.noWaits {
			wait = nil
		}
		s.mu.Unlock()
		return wait
	}
	f, written := s.f, s.written
	s.mu.Unlock()
	// The fsyncs happen outside mu, so commits go on meanwhile.
	s.syncMu.Lock()
	err := s.fsync(f)
	s.syncMu.Unlock()
	if err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.fail(err)
		return nil
	}
	cerr := s.writeCeiling(upTo)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced = max(s.synced, written)
	s.markDone()
	if cerr != nil {
		// In the log already, but the TOKENS file must not lag: retried.
		s.wantCeiling = max(s.wantCeiling, upTo)
		s.unwritableLocked(cerr)
		if s.noWaits {
			return nil
		}
		return s.writable
	}
	s.ceiling = max(s.ceiling, upTo)
	s.reserved.Store(s.ceiling)
	return nil
}

// EndWaits makes ReserveTokens calls waiting for the directory to be
// writable again return, and later ones not wait, without the assurance:
// the server calls it as it begins to shut down, so that a command waiting
// in one, which holds a lock-table shard, cannot hold the shutdown up. Its
// reply is refused all the same, since commits fail meanwhile.
func (s *Store) EndWaits() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noWaits = true
	s.wakeLocked()
}

// wakeLocked wakes the ReserveTokens calls that wait. The caller holds mu.
func (s *Store) wakeLocked() {
	if s.writable != nil {
		close(s.writable)
		s.writable = nil
	}
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
		s.reserve(issued + 2*locker.TokenReserveChunk) // never waits: a failure's retry writes it
	}
}

// WriteFailure is the write failure the store is retrying (the OS's error,
// such as ENOSPC), or nil while the directory is written. It is cheap while
// all is well: the server asks before every command that changes the table.
func (s *Store) WriteFailure() error {
	if !s.unwritable.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause
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
	switch {
	case s.err != nil:
		return s.err
	case s.werr != nil:
		return s.werr
	case target <= s.done.Load():
		return nil // someone else's commit took ours along
	}
	return s.writeLocked(s.opts.Fsync == FsyncAlways, nil)
}

// writeLocked writes every buffered change, then extra, as one record, and
// fsyncs if asked. The caller holds mu, and the store is writable (no werr).
// A failed write leaves the store unwritable, with the record kept in batch
// for the retry; a failed fsync fails it for good.
func (s *Store) writeLocked(sync bool, extra []byte) error {
	n := s.appended.Load() // read before gathering: every change counted is in a buffer
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
			s.torn = true // what reached the file of this record is garbage
			return s.unwritableLocked(err)
		}
		s.good = s.w.Size()
	}
	s.batch = s.batch[:0]
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
	var err error
	if s.opts.Fault != nil {
		err = s.opts.Fault("fsync")
	}
	if err == nil {
		err = syncData(f)
	}
	d := time.Since(start)
	s.fsyncs.Add(1)
	s.fsyncNanos.Add(uint64(d))
	s.lastFsync.Store(int64(d))
	return err
}

// fail fails the store for good (ErrFailed). The caller holds mu.
func (s *Store) fail(err error) error {
	s.err = fmt.Errorf("%w: %s: %v", ErrFailed, s.opts.Dir, err)
	s.opts.Log.Error().Err(err).Str("dir", s.opts.Dir).Msg("data directory fsync failed; nothing more is written or acknowledged")
	s.wakeLocked()
	return s.err
}

// unwritableLocked records a failed write that the background work retries
// (see retryWrites), and logs the first of a run of them. The caller holds mu.
func (s *Store) unwritableLocked(err error) error {
	s.werr = fmt.Errorf("%w: %s: %w", ErrUnwritable, s.opts.Dir, err)
	s.cause = err
	s.writeFailures++
	if s.failingSince.IsZero() {
		s.failingSince = time.Now()
		s.writable = make(chan struct{})
		s.unwritable.Store(true)
		s.opts.Log.Error().Err(err).Str("dir", s.opts.Dir).
			Msg("data directory write failed: changes are refused until it can be written again; retrying in the background")
	}
	return s.werr
}

// retryWrites retries the writes a failure left, and reports whether the store
// is writable now. It takes every lock, as rotate does, for it may replace
// the log.
func (s *Store) retryWrites() bool {
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.werr == nil {
		return s.werr == nil && s.err == nil
	}
	// A log that took a failed write is never appended to again: it is
	// cut back to its last good record, durably, so that recovery finds it
	// whole when it is no longer the newest, and the next one takes over.
	if s.torn {
		if err := s.cutTorn(); err != nil {
			if s.err == nil {
				s.unwritableLocked(err)
			}
			return false
		}
	}
	if s.w == nil {
		if err := s.startLog(s.logNum + 1); err != nil {
			s.unwritableLocked(err)
			return false
		}
	}
	var extra []byte
	if s.wantCeiling > s.ceiling {
		extra = appendReserve(nil, s.wantCeiling)
	}
	// Everything a reply waited for, in its order: the record that failed,
	// then what was buffered since; fsynced, whatever the policy, so that
	// what made the failure is known to be over.
	s.werr = nil
	if err := s.writeLocked(true, extra); err != nil {
		return false
	}
	if s.wantCeiling > s.ceiling {
		if err := s.writeCeiling(s.wantCeiling); err != nil {
			s.unwritableLocked(err)
			return false
		}
		s.ceiling = s.wantCeiling
		s.reserved.Store(s.ceiling)
	}
	s.opts.Log.Info().Str("dir", s.opts.Dir).Stringer("failing_for", time.Since(s.failingSince)).
		Uint64("write_failures", s.writeFailures).
		Msg("data directory writable again: changes accepted")
	s.cause = nil
	s.failingSince = time.Time{}
	s.lastResume = time.Now()
	s.unwritable.Store(false)
	s.wakeLocked()
	return true
}

// cutTorn closes the current log, which took a failed write, and cuts it
// back to its last good record, fsynced before any later log exists. One
// with nothing good in it is kept as the current log, empty: a disk that
// stays full must not leave a log per try. The caller holds mu. A failed
// truncate is retried; a failed fsync fails the store for good.
func (s *Store) cutTorn() error {
	if s.f != nil {
		s.f.Close() // its error is the failure's, already known
		s.f, s.w = nil, nil
	}
	path := filepath.Join(s.opts.Dir, logName(s.logNum))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(s.good); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return s.fail(err)
	}
	s.torn = false
	if s.good == 0 {
		s.f, s.w = f, record.NewWriter(s.logWriter(f))
		return nil
	}
	f.Close()
	s.logBase += s.good
	s.good = 0
	return nil
}

// startLog opens log number n for appending. The caller holds mu, or owns s
// alone.
func (s *Store) startLog(n uint64) error {
	path := filepath.Join(s.opts.Dir, logName(n))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := syncDir(s.opts.Dir); err != nil {
		f.Close()
		os.Remove(path) // so that a retry can make it again
		return err
	}
	s.f, s.w, s.logNum, s.good = f, record.NewWriter(s.logWriter(f)), n, 0
	return nil
}

// writeCeiling replaces the TOKENS file, unless Options.Fault fails it.
func (s *Store) writeCeiling(ceiling uint64) error {
	if s.opts.Fault != nil {
		if err := s.opts.Fault("tokens"); err != nil {
			return err
		}
	}
	return writeCeiling(s.opts.Dir, ceiling)
}

// logWriter is what a log's record writer writes to: f, or f behind
// Options.Fault.
func (s *Store) logWriter(f *os.File) io.Writer {
	if s.opts.Fault == nil {
		return f
	}
	return faultyWriter{f, s.opts.Fault}
}

// faultyWriter is Options.Fault's hold on a log's writes.
type faultyWriter struct {
	f     *os.File
	fault func(op string) error
}

func (w faultyWriter) Write(p []byte) (int, error) {
	if err := w.fault("write"); err != nil {
		n, _ := w.f.Write(p[:len(p)/2])
		return n, err
	}
	return w.f.Write(p)
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
	var resumeAt time.Time // the next retry of a failed write
	var resumeBackoff time.Duration
	for {
		select {
		case <-s.stopC:
			return
		case <-tick.C:
		}
		if s.unwritable.Load() {
			// Every tick at first, then less often, up to once a second.
			if time.Now().Before(resumeAt) {
				continue
			}
			if !s.retryWrites() {
				resumeBackoff = min(max(2*resumeBackoff, 100*time.Millisecond), time.Second)
				resumeAt = time.Now().Add(resumeBackoff)
				continue
			}
			resumeBackoff = 0
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
	if s.err != nil || s.werr != nil || s.synced >= s.written {
		s.mu.Unlock()
		return // a failure's retry fsyncs
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
// closes the directory. A write failure still being retried gets one last
// try; if that fails too, what it held is not written and Close returns the
// failure. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil
	}
	s.stopBackground()
	s.retryWrites()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.wakeLocked()
	var err error
	switch {
	case s.werr != nil:
		err = s.werr
	case s.err == nil:
		err = s.writeLocked(true, nil)
	}
	if s.w != nil && !s.torn {
		if cerr := s.w.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	if s.f != nil {
		if cerr := s.f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	s.f = nil
	s.dirLock.Close()
	return err
}

// stopBackground stops the background work Load started, if it did and it
// has not been stopped, and waits for it to end: the first step of Close,
// and of the tests' crash.
func (s *Store) stopBackground() {
	s.mu.Lock()
	started := s.table != nil && !s.bgStopped
	s.bgStopped = true
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
	Err            error // the failure that stopped the store for good (ErrFailed)
	// WriteErr is the write failure being retried (the OS's error, such
	// as ENOSPC), nil while the directory is written; changes are refused
	// meanwhile.
	WriteErr      error
	WriteFailures uint64    // failed writes since start, retries included
	FailingSince  time.Time // when the current write failure began; zero for none
	LastResume    time.Time // when writes last resumed after a failure; zero for never
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
		WriteErr:       s.cause,
		WriteFailures:  s.writeFailures,
		FailingSince:   s.failingSince,
		LastResume:     s.lastResume,
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
