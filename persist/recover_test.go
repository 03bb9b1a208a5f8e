package persist

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
)

// logRecord is one record of a log file: where it starts, its length, and
// the locks its grants name.
type logRecord struct {
	offset int64
	length int
	grants []string
}

func readRecords(t *testing.T, path string) []logRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := record.NewReader(f, 0)
	var out []logRecord
	for {
		off := r.Offset()
		rd, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s at %d: %v", path, off, err)
		}
		b, err := io.ReadAll(rd)
		if err != nil {
			t.Fatal(err)
		}
		rec := logRecord{offset: off, length: len(b)}
		for _, e := range decodeAll(t, b) {
			if e.kind == kindGrant {
				rec.grants = append(rec.grants, string(e.key))
			}
		}
		out = append(out, rec)
	}
}

func truncateBy(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, fileSize(t, path)-n); err != nil {
		t.Fatal(err)
	}
}

func appendToFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

const legacyHeader = 7 // the record format's chunk header

// TestTornTail: the newest log ending in an incomplete or garbled last write
// is cut back to its last good record, with a warning, and the next start is
// clean.
func TestTornTail(t *testing.T) {
	cases := []struct {
		name     string
		big      bool // the last commit spans several blocks
		damage   func(t *testing.T, path string, last logRecord)
		lastKept bool // whether the last commit survives
	}{
		{"cut by three bytes", false, func(t *testing.T, path string, last logRecord) { truncateBy(t, path, 3) }, false},
		{"cut inside the last header", false, func(t *testing.T, path string, last logRecord) {
			os.Truncate(path, last.offset+3)
		}, false},
		{"cut right after the last header", false, func(t *testing.T, path string, last logRecord) {
			os.Truncate(path, last.offset+legacyHeader)
		}, false},
		{"garbage appended", false, func(t *testing.T, path string, last logRecord) {
			appendToFile(t, path, []byte("\x01\x02\x03 garbage after the last record"))
		}, true},
		{"a few garbage bytes appended", false, func(t *testing.T, path string, last logRecord) { appendToFile(t, path, []byte{0xff, 1}) }, true},
		{"last byte flipped", false, func(t *testing.T, path string, last logRecord) { testutil.FlipByte(t, path, fileSize(t, path)-1) }, false},
		{"a multi-block commit cut short", true, func(t *testing.T, path string, last logRecord) { truncateBy(t, path, 10) }, false},
		{"a multi-block commit cut at a block boundary", true, func(t *testing.T, path string, last logRecord) {
			os.Truncate(path, (last.offset/blockSize+1)*blockSize)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, nil, sessionOpts{})
			s.create("c", locker.CreateOptions{Limit: 2})
			first := s.acquire("first", time.Hour, "a")
			s.commit()
			s.acquire("second", time.Hour, "b")
			s.commit()
			var lastKeys []string
			if c.big {
				// One commit of many blocks: the background's commits,
				// every 100 ms, must not split it.
				s.store.stopBackground()
				for i := range 2500 {
					lastKeys = append(lastKeys, fmt.Sprintf("big-%04d", i))
					s.acquire(lastKeys[i], time.Hour, "owner")
				}
			} else {
				lastKeys = []string{"last"}
				s.acquire("last", time.Hour, "c")
			}
			s.commit()
			s.close()

			path := newestLog(t, dir)
			recs := readRecords(t, path)
			last := recs[len(recs)-1]
			if c.big && last.length < 2*blockSize {
				t.Fatalf("the last commit is %d bytes, want several blocks", last.length)
			}
			if len(last.grants) != len(lastKeys) {
				t.Fatalf("the last record holds %d grants, want %d", len(last.grants), len(lastKeys))
			}
			c.damage(t, path, last)

			s = open(t, dir, nil, sessionOpts{})
			ws := warnings(s.log)
			if len(ws) != 1 || !strings.Contains(ws[0], "torn last write") || !strings.Contains(ws[0], filepath.Base(path)) {
				t.Fatalf("warnings %q, want one about the torn write in %s", ws, path)
			}
			if st, ok := s.status("first"); !ok || st.Token != first {
				t.Fatalf("an earlier commit was lost: %+v", st)
			}
			for _, k := range []string{"second", "c"} {
				if _, ok := s.status(k); !ok {
					t.Fatalf("%s lost", k)
				}
			}
			for _, k := range lastKeys {
				if _, ok := s.status(k); ok != c.lastKept {
					t.Fatalf("%s present=%v, want %v", k, ok, c.lastKept)
				}
			}
			wantSize := last.offset
			if c.lastKept {
				wantSize = last.offset + int64(legacyHeader+last.length)
			}
			if got := fileSize(t, path); got != wantSize {
				t.Fatalf("the damaged log is %d bytes, want it cut to %d", got, wantSize)
			}
			if s.first <= first {
				t.Fatal("tokens went back")
			}
			before := s.states()
			s.close()

			s = open(t, dir, nil, sessionOpts{})
			if ws := warnings(s.log); len(ws) != 0 {
				t.Fatalf("the second start warned: %q", ws)
			}
			sameTable(t, before, s.states(), s.clock.Now())
		})
	}
}

// manyCommits writes commits, one grant each, until the log spans blocks
// blocks, and returns the log and its records.
func manyCommits(t *testing.T, dir string, blocks int) (string, []logRecord) {
	t.Helper()
	s := open(t, dir, nil, sessionOpts{fsync: FsyncNo})
	for i := 0; s.store.Stats().LogBytes < int64(blocks)*blockSize; i++ {
		if i > 10000 {
			t.Fatal("the log does not grow")
		}
		s.acquire(fmt.Sprintf("k%05d", i), time.Hour, "owner")
		s.commit()
	}
	s.close()
	path := newestLog(t, dir)
	return path, readRecords(t, path)
}

// pickRecord returns the index of a record with grants lying wholly inside
// block, about in its middle.
func pickRecord(t *testing.T, recs []logRecord, block int64) int {
	t.Helper()
	mid := block*blockSize + blockSize/2
	for i, r := range recs {
		if r.offset >= mid && len(r.grants) > 0 && r.offset+int64(legacyHeader+r.length) <= (block+1)*blockSize {
			return i
		}
	}
	t.Fatalf("no record inside block %d", block)
	return 0
}

func TestCorruptionMidLog(t *testing.T) {
	for _, block := range []int64{0, 1} {
		t.Run(fmt.Sprint("block ", block), func(t *testing.T) {
			dir := t.TempDir()
			path, recs := manyCommits(t, dir, 3)
			d := pickRecord(t, recs, block)
			testutil.FlipByte(t, path, recs[d].offset+legacyHeader+2)

			_, err := tryOpen(t, dir, nil, sessionOpts{})
			var cerr *CorruptError
			if !errors.As(err, &cerr) {
				t.Fatalf("Open: %v, want a *CorruptError", err)
			}
			if cerr.File != path || cerr.Offset != recs[d].offset {
				t.Fatalf("CorruptError names %s at %d, want %s at %d", cerr.File, cerr.Offset, path, recs[d].offset)
			}
			if msg := err.Error(); !strings.Contains(msg, "--repair") || !strings.Contains(msg, path) || !strings.Contains(msg, fmt.Sprint(recs[d].offset)) {
				t.Fatalf("message %q does not name the file, the offset and --repair", msg)
			}
			if cerr.Unwrap() == nil {
				t.Fatal("no cause")
			}
			// The refusal changed nothing and left the directory free.
			if _, err := tryOpen(t, dir, nil, sessionOpts{}); !errors.As(err, &cerr) {
				t.Fatalf("second Open: %v", err)
			}

			s := open(t, dir, nil, sessionOpts{repair: true})
			if ws := warnings(s.log); len(ws) != 1 || !strings.Contains(ws[0], "repaired") {
				t.Fatalf("warnings %q", ws)
			}
			for i, r := range recs {
				for _, k := range r.grants {
					if _, ok := s.status(k); ok != (i < d) {
						t.Fatalf("%s (record %d, damage in %d) present=%v", k, i, d, ok)
					}
				}
			}
			if got := fileSize(t, path); got != recs[d].offset {
				t.Fatalf("repaired log is %d bytes, want %d", got, recs[d].offset)
			}
			s.close()
			s = open(t, dir, nil, sessionOpts{})
			if ws := warnings(s.log); len(ws) != 0 {
				t.Fatalf("warnings after the repair: %q", ws)
			}
		})
	}
}

// TestCorruptionInOlderLog: damage in a log that is not the newest is never
// a torn write, even at its very end.
func TestCorruptionInOlderLog(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	s.acquire("one", time.Hour, "")
	s.commit()
	s.acquire("two", time.Hour, "")
	s.commit()
	s.close()
	path := newestLog(t, dir)
	recs := readRecords(t, path)
	s = open(t, dir, nil, sessionOpts{}) // the next session's log follows it
	s.acquire("three", time.Hour, "")
	s.close()

	last := recs[len(recs)-1]
	testutil.FlipByte(t, path, fileSize(t, path)-1)
	_, err := tryOpen(t, dir, nil, sessionOpts{})
	var cerr *CorruptError
	if !errors.As(err, &cerr) || cerr.File != path || cerr.Offset != last.offset {
		t.Fatalf("Open: %v, want a CorruptError for %s at %d", err, path, last.offset)
	}
	s = open(t, dir, nil, sessionOpts{repair: true})
	if _, ok := s.status("one"); !ok {
		t.Fatal("repair lost what preceded the damage")
	}
	for _, k := range []string{"two", "three"} {
		if _, ok := s.status(k); ok {
			t.Fatalf("repair kept %s, after the damage", k)
		}
	}
}

func TestMissingLog(t *testing.T) {
	dir := t.TempDir()
	var toks tokenLog
	for _, k := range []string{"one", "two", "three"} {
		s := open(t, dir, nil, sessionOpts{})
		toks.add(s.acquire(k, time.Hour, ""))
		s.close()
	}
	logs, _, _ := dataFiles(dir)
	if len(logs) != 3 {
		t.Fatalf("logs %v, want three", logs)
	}
	missing := filepath.Join(dir, logName(logs[1]))
	if err := os.Remove(missing); err != nil {
		t.Fatal(err)
	}
	_, err := tryOpen(t, dir, nil, sessionOpts{})
	var cerr *CorruptError
	if !errors.As(err, &cerr) || cerr.File != missing || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Open: %v, want a CorruptError for the missing %s", err, missing)
	}

	s := open(t, dir, nil, sessionOpts{repair: true})
	if ws := warnings(s.log); len(ws) != 1 || !strings.Contains(ws[0], "missing") {
		t.Fatalf("warnings %q", ws)
	}
	if _, ok := s.status("one"); !ok {
		t.Fatal("repair lost the log before the gap")
	}
	if _, ok := s.status("three"); ok {
		t.Fatal("repair kept the log after the gap")
	}
	if _, err := os.Stat(filepath.Join(dir, logName(logs[2]))); !os.IsNotExist(err) {
		t.Fatalf("the log after the gap is still there: %v", err)
	}
	// What survived still counts. (Tokens of the dropped logs may come
	// again unless the boot-epoch token is above them: repair is lossy, as
	// docs/persistence.md says.)
	if s.first <= toks.all[0] {
		t.Fatalf("FirstToken %d not above %d", s.first, toks.all[0])
	}
	// (That the next start without --repair works is
	// TestBugRepairLeavesLogGap's.)
}

func TestDamagedSnapshot(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"byte flipped", func(t *testing.T, path string) { testutil.FlipByte(t, path, legacyHeader+3) }},
		{"cut short", func(t *testing.T, path string) { truncateBy(t, path, 5) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, nil, sessionOpts{})
			s.acquire("in-snapshot", time.Hour, "")
			if err := s.store.Compact(); err != nil {
				t.Fatal(err)
			}
			s.acquire("in-log", time.Hour, "")
			s.close()
			_, snaps, _ := dataFiles(dir)
			if len(snaps) != 1 {
				t.Fatalf("snapshots %v", snaps)
			}
			path := filepath.Join(dir, snapName(snaps[0]))
			c.damage(t, path)

			_, err := tryOpen(t, dir, nil, sessionOpts{})
			var cerr *CorruptError
			if !errors.As(err, &cerr) || cerr.File != path || !strings.Contains(err.Error(), "--repair") {
				t.Fatalf("Open: %v, want a CorruptError naming %s", err, path)
			}
			s = open(t, dir, nil, sessionOpts{repair: true})
			if ws := warnings(s.log); len(ws) == 0 {
				t.Fatal("repair of a snapshot without a warning")
			}
			if _, ok := s.status("in-log"); !ok {
				t.Fatal("repair dropped the log after the snapshot")
			}
		})
	}
}

// TestCrashDuringCompaction: a compaction that died after starting its log
// but before its snapshot landed leaves the old files, which still restore
// the table; a leftover temporary snapshot is ignored.
func TestCrashDuringCompaction(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	s.acquire("a", time.Hour, "x")
	s.close()
	s = open(t, dir, nil, sessionOpts{})
	s.acquireShared("b", time.Hour, "y")
	s.commit()
	saved := map[string][]byte{}
	for _, name := range files(t, dir) {
		if strings.HasPrefix(name, logPrefix) {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			saved[name] = b
		}
	}
	if err := s.store.Compact(); err != nil {
		t.Fatal(err)
	}
	s.acquire("c", time.Hour, "z")
	s.commit()
	before := s.states()
	s.close()

	// Undo the snapshot: as if the crash came before its rename.
	_, snaps, _ := dataFiles(dir)
	for _, n := range snaps {
		path := filepath.Join(dir, snapName(n))
		if err := os.Rename(path, path+".tmp"); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range saved {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s = open(t, dir, s.clock, sessionOpts{})
	sameTable(t, before, s.states(), s.clock.Now())
}

// TestStaleFilesRemoved: files a newer snapshot replaces are removed at
// start, and do not count.
func TestStaleFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, nil, sessionOpts{})
	s.acquire("old", time.Hour, "")
	if err := s.store.Compact(); err != nil {
		t.Fatal(err)
	}
	s.close()
	old := map[string][]byte{}
	for _, name := range files(t, dir) {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		old[name] = b
	}
	s = open(t, dir, nil, sessionOpts{})
	tok := s.acquire("new", time.Hour, "")
	if err := s.store.Compact(); err != nil {
		t.Fatal(err)
	}
	st, _ := s.status("old")
	s.release("old", st.Token)
	s.close()
	for name, b := range old { // put the older snapshot and log back
		if name != "LOCK" && name != ceilingFile {
			os.WriteFile(filepath.Join(dir, name), b, 0o600)
		}
	}
	s = open(t, dir, nil, sessionOpts{})
	if _, ok := s.status("old"); ok {
		t.Fatal("an older snapshot was read")
	}
	if st, _ := s.status("new"); st.Token != tok {
		t.Fatalf("new: %+v", st)
	}
	for name := range old {
		if name == "LOCK" || name == ceilingFile {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("stale %s not removed (%v)", name, err)
		}
	}
}

// writeRecords writes records to a new file at path.
func writeRecords(t *testing.T, path string, recs ...[]byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	w := record.NewWriter(f)
	for _, r := range recs {
		if _, err := w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestUndecodableRecord: a record whose checksum is good but whose content
// does not decode is damage, never a torn write, even at the end of the
// newest log; and a snapshot of another format version is refused.
func TestUndecodableRecord(t *testing.T) {
	grant := appendChange(nil, &locker.Change{Kind: locker.ChangeGrant, Key: []byte("hand-made"), Token: 5}, time.Now().Add(time.Hour).UnixNano())
	// (A bad entry after good ones in the same record is
	// TestBugRepairAppliesPartOfCutRecord's.)
	cases := []struct {
		name  string
		file  func(logs, snaps []uint64) string
		recs  [][]byte
		want  string
		kept  bool // whether --repair keeps the lock "before"
		found bool // whether --repair keeps the hand-made grant
	}{
		{"unknown kind at the end of the newest log", func(logs, _ []uint64) string { return logName(logs[len(logs)-1] + 1) },
			[][]byte{grant, append([]byte{99, 0}, grant...)}, "unknown entry kind 99", true, true},
		{"cut entry in the newest log", func(logs, _ []uint64) string { return logName(logs[len(logs)-1] + 1) },
			[][]byte{grant[:len(grant)-2]}, errShort.Error(), true, false},
		{"snapshot of a newer format", func(logs, _ []uint64) string { return snapName(logs[len(logs)-1] + 1) },
			[][]byte{append(appendHeader(nil, 1), grant...)}, "format version", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, nil, sessionOpts{})
			s.acquire("before", time.Hour, "")
			s.close()
			logs, snaps, _ := dataFiles(dir)
			name := c.file(logs, snaps)
			path := filepath.Join(dir, name)
			if strings.HasPrefix(name, snapPrefix) {
				// A snapshot has its own log, which follows it.
				writeRecords(t, filepath.Join(dir, logName(logs[len(logs)-1]+1)))
				// Patch the header's version.
				c.recs[0] = append([]byte{kindHeader, 0, formatVersion + 1}, c.recs[0][3:]...)
			}
			writeRecords(t, path, c.recs...)

			_, err := tryOpen(t, dir, nil, sessionOpts{})
			var cerr *CorruptError
			if !errors.As(err, &cerr) || cerr.File != path || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want a CorruptError for %s saying %q", err, path, c.want)
			}
			s = open(t, dir, nil, sessionOpts{repair: true})
			if _, ok := s.status("before"); ok != c.kept {
				t.Fatalf("repair: before present=%v, want %v", ok, c.kept)
			}
			if _, ok := s.status("hand-made"); ok != c.found {
				t.Fatalf("repair: hand-made present=%v, want %v", ok, c.found)
			}
		})
	}
}

// TestRecoverySummary: Recovery reports the files read and what was
// restored, for the server's start-up line.
func TestRecoverySummary(t *testing.T) {
	dir := t.TempDir()
	h := newFakeHost()
	o := sessionOpts{lockDelay: 2 * time.Hour, host: h}
	s := open(t, dir, nil, o)
	if r := s.store.Recovery(); r.Snapshot != "" || r.Logs != 0 || r.Locks != 0 || r.HighestToken != 0 || r.Warnings != 0 {
		t.Fatalf("an empty directory: %+v, want nothing read or restored", r)
	}
	s.acquire("live", 3*time.Hour, "")    // still live an hour later
	s.acquire("expired", time.Minute, "") // expired, in the 2h lock-delay
	s.create("made", locker.CreateOptions{})
	if err := s.store.Compact(); err != nil {
		t.Fatal(err)
	}
	s.acquireShared("shared", 3*time.Hour, "r1")
	last := s.acquireShared("shared", 3*time.Hour, "r2")
	gone := s.acquire("gone", 3*time.Hour, "") // released: the lock is forgotten
	s.release("gone", gone)
	s.commit()
	s.close()

	h.pass(time.Hour)
	s = open(t, dir, nil, o)
	r := s.store.Recovery()
	want := Recovery{
		Snapshot: snapName(2), Logs: 1,
		Locks: 4, Leases: 3, Delayed: 1,
		HighestToken: last, TokenCeiling: r.TokenCeiling,
		SnapshotBytes: r.SnapshotBytes, LogBytes: r.LogBytes, Took: r.Took,
	}
	if r != want {
		t.Errorf("Recovery() = %+v\nwant        %+v", r, want)
	}
	if r.TokenCeiling <= gone || r.SnapshotBytes <= 0 || r.LogBytes <= 0 || r.Took <= 0 {
		t.Errorf("Recovery() = %+v: want a ceiling above %d, both files' sizes and the time taken", r, gone)
	}

	// A torn last write is counted among the warnings.
	s.acquire("more", time.Hour, "")
	s.commit()
	s.crash()
	truncateBy(t, newestLog(t, dir), 3)
	s = open(t, dir, nil, o)
	if r := s.store.Recovery(); r.Warnings != 1 || r.Logs != 2 {
		t.Errorf("after a torn write: %+v, want 1 warning and 2 logs read", r)
	}
}
