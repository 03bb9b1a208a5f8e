package persist

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/leasehold/leasehold/locker"
)

// fakeHost is a TimeSource the test moves: the machine's boot id, its boot
// clock and its wall clock.
type fakeHost struct {
	mu    sync.Mutex
	now   HostTime
	boots int
}

func newFakeHost() *fakeHost {
	return &fakeHost{now: HostTime{BootID: "boot-0", Boottime: time.Hour, Wall: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}}
}

func (h *fakeHost) Now() HostTime {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// pass lets d of real time go by: both clocks move.
func (h *fakeHost) pass(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now.Boottime += d
	h.now.Wall = h.now.Wall.Add(d)
}

// stepWall steps the wall clock alone, as date -s or NTP does.
func (h *fakeHost) stepWall(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now.Wall = h.now.Wall.Add(d)
}

// reboot starts a new boot: a new boot id, the boot clock from near zero.
func (h *fakeHost) reboot() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.boots++
	h.now.BootID = fmt.Sprintf("boot-%d", h.boots)
	h.now.Boottime = 10 * time.Second
}

// run lets d go by in a running session: the table's clock and the host's.
func (s *session) run(h *fakeHost, d time.Duration) {
	s.clock.Advance(d)
	h.pass(d)
}

// TestClockStepBetweenRuns: a wall-clock step between two runs does not move
// restored leases or lock-delays when the machine did not reboot (the boot
// clock measures the downtime), and after a reboot shortens them by a
// forward step but never lengthens them past what they had left at the
// directory's last time mark.
func TestClockStepBetweenRuns(t *testing.T) {
	const (
		ttl   = 2 * time.Hour
		ran   = time.Minute     // the first run, after the grant; then the last mark
		down  = 2 * time.Minute // the downtime, by the boot clock
		left  = ttl - ran - down
		atRec = ttl - ran // left at the last mark
	)
	cases := []struct {
		name   string
		reboot bool
		step   time.Duration
		want   time.Duration // the lease's ttl after the restart
	}{
		{"same boot, no step", false, 0, left},
		{"same boot, forward 1h", false, time.Hour, left},
		{"same boot, back 1h", false, -time.Hour, left},
		{"reboot, no step", true, 0, left},
		{"reboot, forward 1h: shortened by the step", true, time.Hour, left - time.Hour},
		{"reboot, back 1m: partly counted", true, -time.Minute, atRec - (down - time.Minute)},
		{"reboot, back 1h: never more than left at the last mark", true, -time.Hour, atRec},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			h := newFakeHost()
			o := sessionOpts{host: h}
			s := open(t, dir, nil, o)
			tok := s.acquire("k", ttl, "holder")
			s.create("d", locker.CreateOptions{LockDelay: 2 * time.Hour, LockDelaySet: true})
			s.acquire("d", 30*time.Second, "gone") // expires during the run: its delay ends at 2h30s
			s.commit()
			s.run(h, ran)
			later := s.acquire("later", time.Hour, "") // a commit a minute on carries a time mark
			s.commit()
			s.close()

			h.pass(down)
			if c.reboot {
				h.reboot()
			}
			h.stepWall(c.step)
			s = open(t, dir, nil, o)
			// Tokens come from the reservation, not from any clock.
			if next := s.acquire("new", time.Minute, ""); next <= later {
				t.Errorf("token %d after the restart, want above %d", next, later)
			}
			st, _ := s.status("k")
			if !st.Held || st.Token != tok || st.TTL != c.want {
				t.Errorf("k: held=%v token %d ttl %v, want token %d ttl %v", st.Held, st.Token, st.TTL, tok, c.want)
			}
			d, _ := s.status("d")
			if wantDelay := c.want + 30*time.Second; !d.Delayed || d.DelayLeft != wantDelay {
				t.Errorf("d: delayed=%v for %v, want %v (the same rule as a lease)", d.Delayed, d.DelayLeft, wantDelay)
			}
		})
	}
}

// TestClockRestartGraceAfterStep: --restart-grace counts from the restart
// on the corrected time line, whatever the wall clock did.
func TestClockRestartGraceAfterStep(t *testing.T) {
	dir := t.TempDir()
	h := newFakeHost()
	o := sessionOpts{host: h}
	s := open(t, dir, nil, o)
	short := s.acquire("short", 10*time.Minute, "")
	long := s.acquire("long", 2*time.Hour, "")
	s.commit()
	s.close()
	h.pass(5 * time.Minute)
	h.stepWall(time.Hour) // stepped forward: by the wall, both ran out
	o.grace = 20 * time.Minute
	s = open(t, dir, nil, o)
	for _, c := range []struct {
		key  string
		tok  uint64
		want time.Duration
	}{{"short", short, 20 * time.Minute}, {"long", long, 2*time.Hour - 5*time.Minute}} {
		if st, _ := s.status(c.key); !st.Held || st.Token != c.tok || st.TTL != c.want {
			t.Errorf("%s: %+v, want token %d with %v left", c.key, st, c.tok, c.want)
		}
	}
}

// TestClockMarkInSnapshot: a snapshot carries a time mark of its own, so
// that a directory whose logs compaction removed still measures downtime by
// the boot clock.
func TestClockMarkInSnapshot(t *testing.T) {
	for _, reboot := range []bool{false, true} {
		t.Run(fmt.Sprintf("reboot=%v", reboot), func(t *testing.T) {
			dir := t.TempDir()
			h := newFakeHost()
			o := sessionOpts{host: h}
			s := open(t, dir, nil, o)
			tok := s.acquire("k", 2*time.Hour, "")
			s.commit()
			s.run(h, time.Minute)
			if err := s.store.Compact(); err != nil {
				t.Fatal(err)
			}
			s.close()
			if logs, snaps, _ := dataFiles(dir); len(snaps) != 1 || len(logs) != 1 || len(readRecords(t, filepath.Join(dir, logName(logs[0])))) != 0 {
				t.Fatalf("files %v: want a snapshot and an empty log, so that only the snapshot has a mark", files(t, dir))
			}
			h.pass(2 * time.Minute)
			if reboot {
				h.reboot()
			}
			h.stepWall(-time.Hour)
			s = open(t, dir, nil, o)
			want := 2*time.Hour - 3*time.Minute // by the boot clock
			if reboot {
				want = 2*time.Hour - time.Minute // left at the snapshot's mark
			}
			if st, _ := s.status("k"); !st.Held || st.Token != tok || st.TTL != want {
				t.Errorf("%+v, want token %d with %v left", st, tok, want)
			}
		})
	}
}

// TestClockTornTailKeepsEarlierMark: a torn last write takes its time mark
// with it; recovery goes by the mark before, which bounds the leases that
// survive just as well.
func TestClockTornTailKeepsEarlierMark(t *testing.T) {
	dir := t.TempDir()
	h := newFakeHost()
	o := sessionOpts{host: h}
	s := open(t, dir, nil, o)
	tok := s.acquire("k", 2*time.Hour, "")
	s.commit()
	s.run(h, time.Minute)
	s.acquire("torn", 2*time.Hour, "") // its record carries the newer mark
	s.commit()
	s.crash()
	truncateBy(t, newestLog(t, dir), 3)
	h.pass(2 * time.Minute)
	h.reboot()
	h.stepWall(-time.Hour)
	s = open(t, dir, nil, o)
	if w := warnings(s.log); len(w) != 2 || !strings.Contains(w[0], "torn last write") || !strings.Contains(w[1], "earlier than at the data directory's last time mark") {
		t.Fatalf("warnings %q, want the torn write's and the clock's", w)
	}
	if _, ok := s.status("torn"); ok {
		t.Fatal("the torn record's grant was restored")
	}
	if st, _ := s.status("k"); !st.Held || st.Token != tok || st.TTL != 2*time.Hour {
		t.Errorf("%+v, want token %d with 2h left, as at the mark at its grant", st, tok)
	}
}

// TestClockDirectoryWithoutMarks: a directory an older version wrote has no
// time marks: it loads by the wall clock, as that version did, and says so;
// the run after it writes marks, so the next restart is step-proof.
func TestClockDirectoryWithoutMarks(t *testing.T) {
	dir := t.TempDir()
	h := newFakeHost()
	wall := h.Now().Wall
	var rec []byte
	rec = appendReserve(rec, 1<<20)
	rec = appendChange(rec, &locker.Change{Kind: locker.ChangeGrant, Key: []byte("old"), Token: 5}, wall.Add(time.Hour).UnixNano())
	writeRecords(t, filepath.Join(dir, logName(1)), rec)

	h.pass(10 * time.Minute)
	s := open(t, dir, nil, sessionOpts{host: h})
	if st, _ := s.status("old"); !st.Held || st.Token != 5 || st.TTL != 50*time.Minute {
		t.Fatalf("%+v, want token 5 with 50m left by the wall clock", st)
	}
	if w := warnings(s.log); len(w) != 1 || !strings.Contains(w[0], "time mark") {
		t.Errorf("warnings %q, want one about the missing time marks", w)
	}
	s.close()

	h.pass(5 * time.Minute)
	h.stepWall(-time.Hour)
	s = open(t, dir, nil, sessionOpts{host: h})
	if st, _ := s.status("old"); !st.Held || st.TTL != 45*time.Minute {
		t.Errorf("%+v, want 45m left: the second restart goes by the first one's marks", st)
	}
	if w := warnings(s.log); len(w) != 0 {
		t.Errorf("warnings %q, want none", w)
	}
}

// TestClockMarksAreSparse: a time mark rides on a commit at most about once
// a second, not on every commit.
func TestClockMarksAreSparse(t *testing.T) {
	dir := t.TempDir()
	h := newFakeHost()
	s := open(t, dir, nil, sessionOpts{host: h})
	for i := range 300 {
		s.acquire(fmt.Sprint("k", i), time.Hour, "")
		s.commit()
		s.run(h, 10*time.Millisecond) // 3 s in all
	}
	s.close()
	marks, records := 0, 0
	for _, r := range readRecordBodies(t, newestLog(t, dir)) {
		records++
		for _, e := range decodeAll(t, r) {
			if e.kind == kindTime {
				marks++
			}
		}
	}
	if marks < 3 || marks > 5 {
		t.Errorf("%d time marks in %d records over 3 s, want one a second", marks, records)
	}
}

func readRecordBodies(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := record.NewReader(f, 0)
	var out [][]byte
	for {
		rd, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, err := readAll(rd, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, b)
	}
}
