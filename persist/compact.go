package persist

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/leasehold/leasehold/locker"
)

// needsCompaction reports whether the log has outgrown the table: past
// CompactBytes and twice the last snapshot.
func (s *Store) needsCompaction() bool {
	st := s.Stats()
	limit := s.opts.CompactBytes
	if limit <= 0 {
		limit = DefaultCompactBytes
	}
	return st.Err == nil && st.WriteErr == nil && st.LogBytes > max(limit, 2*st.SnapshotBytes)
}

// Compact writes a snapshot and removes the files it replaces, now.
func (s *Store) Compact() error { return s.compact() }

// compact starts a new log, dumps the table into a snapshot that replaces
// everything before that log, and removes what it replaces. Commands go on
// meanwhile: the dump holds one shard's lock at a time, and a change made
// during the dump is both in the new log and perhaps in the snapshot, which
// the replay's set-don't-adjust entries make harmless.
func (s *Store) compact() error {
	old, ceiling, table, prevLogs, err := s.rotate()
	if err != nil {
		return err
	}
	n := old + 1
	size, err := s.writeSnapshot(n, ceiling, table)
	if err != nil {
		s.mu.Lock()
		s.logBase += prevLogs // the old files stay: a restart replays them as before
		s.mu.Unlock()
		return err
	}
	logs, snaps, err := dataFiles(s.opts.Dir)
	if err == nil {
		for _, l := range logs {
			if l < n {
				os.Remove(filepath.Join(s.opts.Dir, logName(l)))
			}
		}
		for _, sn := range snaps {
			if sn < n {
				os.Remove(filepath.Join(s.opts.Dir, snapName(sn)))
			}
		}
	}
	syncDir(s.opts.Dir)
	s.mu.Lock()
	s.snapSize, s.lastSnap = size, time.Now()
	s.snaps++
	s.mu.Unlock()
	return nil
}

// rotate closes the current log and starts the next, for compact, and
// returns what the snapshot needs. It holds syncMu, so that no fsync outside
// mu is at the old log while it closes; it must not be held during the dump,
// which takes shard locks that a token reservation may be waiting under.
func (s *Store) rotate() (old, ceiling uint64, table *locker.Table, prevLogs int64, err error) {
	s.reserveMu.Lock() // a reservation must not write to the old log and fsync the new
	defer s.reserveMu.Unlock()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.err != nil:
		return 0, 0, nil, 0, s.err
	case s.werr != nil:
		return 0, 0, nil, 0, s.werr
	case s.table == nil:
		return 0, 0, nil, 0, errors.New("persist: Compact before Load")
	}
	if err := s.writeLocked(true, nil); err != nil {
		return 0, 0, nil, 0, err
	}
	oldSize := s.w.Size()
	// A failure here is a write failure, retried (see retryWrites).
	if err := s.w.Close(); err != nil {
		s.torn = true
		return 0, 0, nil, 0, s.unwritableLocked(err)
	}
	if err := s.f.Close(); err != nil {
		s.torn = true
		return 0, 0, nil, 0, s.unwritableLocked(err)
	}
	old = s.logNum
	if err := s.startLog(old + 1); err != nil {
		s.f, s.w, s.good = nil, nil, 0
		s.logBase += oldSize
		return 0, 0, nil, 0, s.unwritableLocked(err)
	}
	prevLogs = s.logBase + oldSize
	s.logBase = 0
	return old, s.ceiling, s.table, prevLogs, nil
}

// writeSnapshot dumps table into snapshot n: written to a temporary file,
// fsynced, then renamed into place, so a snapshot file is whole or absent.
func (s *Store) writeSnapshot(n, ceiling uint64, table *locker.Table) (int64, error) {
	tmp := filepath.Join(s.opts.Dir, snapName(n)+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp) // a no-op once renamed
	w := record.NewWriter(f)
	buf := appendHeader(nil, ceiling)
	buf = appendTimeMark(buf, s.mark(int64(s.opts.Clock.Now())))
	var werr error
	flush := func() {
		if werr == nil && len(buf) > 0 {
			_, werr = w.WriteRecord(buf)
		}
		buf = buf[:0]
	}
	var locks uint64
	table.Dump(func(st *locker.LockState) {
		m := lockModel{created: st.Created, options: st.Options, lastToken: st.LastToken}
		for _, l := range st.Leases {
			lm := leaseModel{token: l.Token, deadline: s.toDir(l.Deadline), owner: l.Owner, shared: l.Shared}
			if l.DelayedUntil != 0 {
				lm.deadline, lm.delayedUntil = 0, s.toDir(l.DelayedUntil)
			}
			m.leases = append(m.leases, lm)
		}
		buf = appendLock(buf, st.Key, &m)
		locks++
		if len(buf) >= 256<<10 {
			flush()
		}
	})
	buf = appendEnd(buf, locks)
	flush()
	if werr == nil {
		werr = w.Close()
	}
	size := w.Size()
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return 0, werr
	}
	if err := os.Rename(tmp, filepath.Join(s.opts.Dir, snapName(n))); err != nil {
		return 0, err
	}
	return size, syncDir(s.opts.Dir)
}
