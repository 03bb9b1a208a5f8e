package persist

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
)

// disk is a data directory's file system as Options.Fault sees it: full
// fails every log write with ENOSPC (half the bytes reach the file first),
// fsyncFails every fsync of a log with EIO.
type disk struct {
	full, fsyncFails, tokensFail atomic.Bool
	writes                       atomic.Int64 // writes refused
}

func (d *disk) fault(op string) error {
	switch {
	case op == "tokens" && d.tokensFail.Load():
		return syscall.ENOSPC
	case op == "write" && d.full.Load():
		d.writes.Add(1)
		return syscall.ENOSPC
	case op == "fsync" && d.fsyncFails.Load():
		return syscall.EIO
	}
	return nil
}

// logLines returns the lines of the store's log at level that contain msg.
func logLines(l *testutil.SyncBuffer, level, msg string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, `"level":"`+level+`"`) && strings.Contains(line, msg) {
			n++
		}
	}
	return n
}

// TestDiskFullRetries: a full disk makes commits fail with ErrUnwritable,
// not stop the store; the background retry writes everything buffered once
// space returns, in a new log, and a restart recovers all of it, with
// tokens above every token issued.
func TestDiskFullRetries(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			d := &disk{}
			s := open(t, dir, nil, sessionOpts{fsync: p, fault: d.fault})
			toks := &tokenLog{}
			toks.add(s.acquire("kept", time.Hour, "a"))
			s.commit()

			d.full.Store(true)
			toks.add(s.acquire("failed", time.Hour, "b"))
			if err := s.store.Commit(); !errors.Is(err, ErrUnwritable) {
				t.Fatalf("Commit on a full disk: %v, want ErrUnwritable", err)
			}
			if !errors.Is(s.store.WriteFailure(), syscall.ENOSPC) {
				t.Fatalf("WriteFailure() = %v, want ENOSPC", s.store.WriteFailure())
			}
			toks.add(s.acquire("meanwhile", time.Hour, "c"))
			if err := s.store.Commit(); !errors.Is(err, ErrUnwritable) {
				t.Fatalf("second Commit on a full disk: %v, want ErrUnwritable", err)
			}
			if !s.store.Pending() {
				t.Fatal("a change made on a full disk counts as committed")
			}
			// The retries fail a few times more; the log must not grow a
			// file per try.
			testutil.Eventually(t, 10*time.Second, "retries", func() bool { return d.writes.Load() >= 3 })
			st := s.store.Stats()
			if !errors.Is(st.WriteErr, syscall.ENOSPC) || st.WriteFailures < 3 || st.FailingSince.IsZero() || st.Err != nil {
				t.Fatalf("Stats on a full disk: %+v", st)
			}
			if n := logLines(s.log, "error", "write failed"); n != 1 {
				t.Fatalf("%d error lines for one failure, want 1:\n%s", n, s.log)
			}
			if logs, _, _ := dataFiles(dir); len(logs) > 2 {
				t.Fatalf("%d logs after the retries, want at most 2", len(logs))
			}

			d.full.Store(false)
			testutil.Eventually(t, 10*time.Second, "the retry to succeed", func() bool { return s.store.WriteFailure() == nil })
			s.commit()
			if s.store.Pending() {
				t.Fatal("changes still pending after the retry")
			}
			st = s.store.Stats()
			if st.WriteErr != nil || !st.FailingSince.IsZero() || st.LastResume.IsZero() {
				t.Fatalf("Stats after the retry: %+v", st)
			}
			if n := logLines(s.log, "info", "writable again"); n != 1 {
				t.Fatalf("%d info lines for the recovery, want 1:\n%s", n, s.log)
			}
			toks.add(s.acquire("after", time.Hour, "d"))
			s.commit()
			before := s.states()
			s.close()

			s = open(t, dir, s.clock, sessionOpts{fsync: p})
			if w := warnings(s.log); len(w) > 0 {
				t.Fatalf("recovery warned: %v", w)
			}
			sameTable(t, before, s.states(), 0)
			if tok := s.acquire("new", time.Hour, ""); tok <= toks.max() {
				t.Fatalf("token %d after the restart, want above %d", tok, toks.max())
			}
		})
	}
}

// TestDiskFullCrash: a crash while the disk is full, or right after the
// retry, leaves a directory that recovery accepts as it is (no repair),
// with everything committed before the failure, and tokens above every
// token issued before the crash.
func TestDiskFullCrash(t *testing.T) {
	for _, resumed := range []bool{false, true} {
		name := map[bool]string{false: "while full", true: "after the retry"}[resumed]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			d := &disk{}
			s := open(t, dir, nil, sessionOpts{fault: d.fault})
			toks := &tokenLog{}
			toks.add(s.acquire("kept", time.Hour, ""))
			s.commit()
			d.full.Store(true)
			toks.add(s.acquire("failed", time.Hour, ""))
			if err := s.store.Commit(); !errors.Is(err, ErrUnwritable) {
				t.Fatalf("Commit on a full disk: %v", err)
			}
			testutil.Eventually(t, 10*time.Second, "a retry", func() bool { return d.writes.Load() >= 2 })
			if resumed {
				d.full.Store(false)
				testutil.Eventually(t, 10*time.Second, "the retry to succeed", func() bool { return s.store.WriteFailure() == nil })
			}
			s.crash()

			s = open(t, dir, s.clock, sessionOpts{})
			if st, ok := s.status("kept"); !ok || !st.Held {
				t.Fatalf("a committed grant is lost: %+v", st)
			}
			if _, ok := s.status("failed"); ok != resumed {
				t.Fatalf("the grant the retry wrote: present %v, want %v", ok, resumed)
			}
			if w := warnings(s.log); resumed && len(w) > 0 {
				t.Fatalf("recovery after the retry warned: %v", w)
			}
			if tok := s.acquire("new", time.Hour, ""); tok <= toks.max() {
				t.Fatalf("token %d after the crash, want above %d", tok, toks.max())
			}
		})
	}
}

// TestDiskFullReservation: a token reservation the table needs while the
// disk is full waits for the retry, so that no token above the reservation
// on disk is issued; it completes once space returns, and a restart starts
// above it.
func TestDiskFullReservation(t *testing.T) {
	dir := t.TempDir()
	d := &disk{}
	s := open(t, dir, nil, sessionOpts{fault: d.fault})
	s.acquire("k", time.Hour, "")
	s.commit()
	d.full.Store(true)
	s.acquire("j", time.Hour, "")
	if err := s.store.Commit(); !errors.Is(err, ErrUnwritable) {
		t.Fatalf("Commit on a full disk: %v", err)
	}
	want := s.store.Stats().TokenCeiling + 10*locker.TokenReserveChunk
	done := make(chan struct{})
	go func() {
		s.store.ReserveTokens(want)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("ReserveTokens returned while the disk is full")
	case <-time.After(300 * time.Millisecond):
	}
	if c := s.store.Stats().TokenCeiling; c >= want {
		t.Fatalf("ceiling %d raised to %d on a full disk", c, want)
	}
	d.full.Store(false)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ReserveTokens still waits after space returned")
	}
	if c := s.store.Stats().TokenCeiling; c < want {
		t.Fatalf("ceiling %d after the reservation, want at least %d", c, want)
	}
	s.crash()
	s = open(t, dir, s.clock, sessionOpts{})
	if first := s.store.FirstToken(boot); first <= want {
		t.Fatalf("first token %d after the restart, want above the reservation %d", first, want)
	}
}

// TestDiskFullEndWaits: EndWaits and Close release a ReserveTokens waiting
// on a full disk, without raising the ceiling.
func TestDiskFullEndWaits(t *testing.T) {
	for _, end := range []string{"EndWaits", "Close"} {
		t.Run(end, func(t *testing.T) {
			d := &disk{}
			s := open(t, t.TempDir(), nil, sessionOpts{fault: d.fault})
			d.full.Store(true)
			s.acquire("k", time.Hour, "")
			if err := s.store.Commit(); !errors.Is(err, ErrUnwritable) {
				t.Fatalf("Commit on a full disk: %v", err)
			}
			ceiling := s.store.Stats().TokenCeiling
			done := make(chan struct{})
			go func() {
				s.store.ReserveTokens(ceiling + 10*locker.TokenReserveChunk)
				close(done)
			}()
			if end == "EndWaits" {
				s.store.EndWaits()
			} else if err := s.store.Close(); !errors.Is(err, ErrUnwritable) {
				t.Fatalf("Close on a full disk: %v, want ErrUnwritable", err)
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("ReserveTokens still waits after %s", end)
			}
			if c := s.store.Stats().TokenCeiling; c != ceiling {
				t.Fatalf("ceiling %d, was %d: raised on a full disk", c, ceiling)
			}
		})
	}
}

// TestFsyncFailureIsFatal: a failed fsync of the log is not retried (the
// kernel may have dropped the pages it could not write, and a second fsync
// report success): the store fails for good, with ErrFailed.
func TestFsyncFailureIsFatal(t *testing.T) {
	d := &disk{}
	s := open(t, t.TempDir(), nil, sessionOpts{fsync: FsyncAlways, fault: d.fault})
	s.acquire("k", time.Hour, "")
	s.commit()
	d.fsyncFails.Store(true)
	s.acquire("j", time.Hour, "")
	if err := s.store.Commit(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Commit with a failing fsync: %v, want ErrFailed", err)
	}
	d.fsyncFails.Store(false)
	s.acquire("i", time.Hour, "")
	if err := s.store.Commit(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Commit after a failed fsync: %v, want ErrFailed still", err)
	}
	if st := s.store.Stats(); !errors.Is(st.Err, ErrFailed) {
		t.Fatalf("Stats().Err = %v", st.Err)
	}
}

// TestDiskFullTokensFile: a TOKENS file that cannot be replaced holds the
// reservation back as a failed log write does: ReserveTokens waits, commits
// fail with ErrUnwritable, and the retry writes both once it can.
func TestDiskFullTokensFile(t *testing.T) {
	dir := t.TempDir()
	d := &disk{}
	s := open(t, dir, nil, sessionOpts{fault: d.fault})
	s.acquire("k", time.Hour, "")
	s.commit()
	d.tokensFail.Store(true)
	want := s.store.Stats().TokenCeiling + 10*locker.TokenReserveChunk
	done := make(chan struct{})
	go func() {
		s.store.ReserveTokens(want)
		close(done)
	}()
	testutil.Eventually(t, 10*time.Second, "the failure", func() bool { return s.store.WriteFailure() != nil })
	s.acquire("j", time.Hour, "")
	if err := s.store.Commit(); !errors.Is(err, ErrUnwritable) {
		t.Fatalf("Commit while TOKENS cannot be written: %v, want ErrUnwritable", err)
	}
	select {
	case <-done:
		t.Fatal("ReserveTokens returned while TOKENS cannot be written")
	default:
	}
	if c, _ := readCeiling(dir); c >= want {
		t.Fatalf("TOKENS says %d, raised to %d while it cannot be written", c, want)
	}
	d.tokensFail.Store(false)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ReserveTokens still waits after TOKENS can be written")
	}
	if c, err := readCeiling(dir); err != nil || c < want {
		t.Fatalf("TOKENS says %d (%v) after the retry, want at least %d", c, err, want)
	}
	s.commit()
	s.close()
	s = open(t, dir, s.clock, sessionOpts{})
	if _, ok := s.status("j"); !ok {
		t.Fatal("the grant made while TOKENS could not be written is lost")
	}
}
