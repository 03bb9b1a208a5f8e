package persist

import (
	"fmt"
	"time"
)

// TimeSource reads the machine's clocks for the store's time marks (see
// timeMark): what lets a restart measure how long the server was down
// without trusting the wall clock. Options.TimeSource is nil for
// SystemTime; tests pass a fake.
type TimeSource interface {
	Now() HostTime
}

// HostTime is one reading of the machine's clocks.
type HostTime struct {
	// BootID names the running boot of the machine (Linux:
	// /proc/sys/kernel/random/boot_id); "" where the system has none.
	BootID string
	// Boottime is the time since the machine booted, suspend included
	// (Linux: CLOCK_BOOTTIME); it never steps. 0 where unknown.
	Boottime time.Duration
	// Wall is the wall clock, which an operator or NTP may step.
	Wall time.Time
}

// SystemTime is the machine's TimeSource.
func SystemTime() TimeSource { return systemTime{} }

type systemTime struct{}

func (systemTime) Now() HostTime {
	id, boottime := bootClock()
	return HostTime{BootID: id, Boottime: boottime, Wall: time.Now()}
}

// The directory's time line. Deadlines (of leases, of lock-delays) are
// stored as instants on a time line of the data directory's own, in Unix
// nanoseconds: it starts at the wall clock when the directory is created
// and from then on only moves forward by time the store measured. A running
// store converts with the table's monotonic clock (toDir, toClock); between
// runs, where nothing runs to measure, it goes by its latest time mark:
//
//   - On the same boot as that mark, the downtime is the boot clock's
//     advance since it (CLOCK_BOOTTIME, which counts suspend and never
//     steps): a restored lease keeps exactly what it had left, less the
//     time that went by, whatever the wall clock did.
//   - After a reboot (or where the host has no boot id or boot clock) the
//     boot clock restarted, and only the wall clock spans the gap: the
//     downtime is its advance since the mark, but never less than 0. A
//     forward step cannot be told from downtime and shortens leases (a
//     holder on another machine may then lose a lease it believes it holds:
//     docs/persistence.md says what protects it); a backward step never
//     lengthens one past what it had left at the mark.
//
// A time mark records the host's clocks and the time line together. A
// commit carries one when its log has none yet or the last is markEvery old
// (by the table's clock), and every snapshot carries one. So
// every record comes less than markEvery after a mark, and after a reboot a
// lease keeps at most the ttl of its last grant or extension plus
// markEvery. A torn last write takes its mark with it; the one before bounds
// the same leases.
type timeMark struct {
	bootID   string // HostTime.BootID
	boottime int64  // HostTime.Boottime, ns
	wall     int64  // HostTime.Wall, Unix ns
	stamp    int64  // the directory's time line at the same moment
}

// markEvery is how stale the latest time mark may be when a commit is
// written before the commit carries a new one: some 60 bytes of log a
// second at most, rather than on every commit.
const markEvery = time.Second

// sameBoot reports whether now is on the boot that m was written on, so
// that the boot clock spans the time between them.
func sameBoot(m timeMark, now HostTime) bool {
	return m.bootID != "" && m.bootID == now.BootID && m.boottime > 0 && int64(now.Boottime) >= m.boottime
}

// placeNow places now on the directory's time line, given its latest time
// mark m (see timeMark), and says what the operator should know: a wall
// clock that stepped (harmless on the same boot) or that reads before the
// mark after a reboot.
func placeNow(m timeMark, now HostTime) (stamp int64, info, warn string) {
	wallSince := now.Wall.UnixNano() - m.wall
	if sameBoot(m, now) {
		bootSince := int64(now.Boottime) - m.boottime
		if step := time.Duration(wallSince - bootSince); step.Abs() > time.Second {
			info = fmt.Sprintf("the wall clock stepped by %v since the data directory's last time mark; "+
				"restored deadlines go by the boot clock, which it does not move", step.Round(time.Millisecond))
		}
		return m.stamp + bootSince, info, ""
	}
	if wallSince < 0 {
		warn = fmt.Sprintf("the wall clock reads %v earlier than at the data directory's last time mark, before a reboot: "+
			"the downtime counts as none, so restored leases and lock-delays keep what they had left at that mark",
			time.Duration(-wallSince).Round(time.Millisecond))
		wallSince = 0
	}
	return m.stamp + wallSince, "", warn
}

// mark reads a time mark at mono, the table's clock now.
func (s *Store) mark(mono int64) timeMark {
	h := s.opts.TimeSource.Now()
	return timeMark{bootID: h.BootID, boottime: int64(h.Boottime), wall: h.Wall.UnixNano(), stamp: s.toDir(mono)}
}

// appendMarkDue appends a time mark to a record about to be written to the
// current log, if the log has none yet or the last is markEvery old. (A
// write that fails leaves the log's writer failed for good, so a mark that
// did not reach the disk is never counted for a log that goes on.) The
// caller holds mu.
func (s *Store) appendMarkDue(b []byte) []byte {
	now := int64(s.opts.Clock.Now())
	if s.markLog == s.logNum && now-s.lastMark < int64(markEvery) {
		return b
	}
	s.markLog, s.lastMark = s.logNum, now
	return appendTimeMark(b, s.mark(now))
}

// resume returns where the directory's time line stands at now (see
// timeMark), from the latest mark in m, and logs what an operator should know.
// A directory without marks (new, or written before marks existed) goes by
// the wall clock, as it did before.
func (s *Store) resume(m *model, now HostTime) int64 {
	if !m.marked {
		if len(m.locks) > 0 {
			s.opts.Log.Warn().Str("dir", s.opts.Dir).Msg("the data directory has no time marks (an older leasehold wrote it): " +
				"restored deadlines go by the wall clock, so a step of it since the last run moves them; " +
				"this run writes marks, so the next start does not depend on the wall clock")
		}
		return now.Wall.UnixNano()
	}
	stamp, info, warn := placeNow(m.mark, now)
	if info != "" {
		s.opts.Log.Info().Str("dir", s.opts.Dir).Msg(info)
	}
	if warn != "" {
		s.opts.Log.Warn().Str("dir", s.opts.Dir).Msg(warn)
	}
	return stamp
}
