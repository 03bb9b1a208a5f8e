package persist

import (
	"os"
	"regexp"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSystemTimeLinux: the machine's source reads the kernel's boot id and
// a boot clock that is at least the monotonic clock (it adds suspend).
func TestSystemTimeLinux(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
		t.Skipf("no boot id to read: %v", err)
	}
	var mono unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		t.Fatal(err)
	}
	a := SystemTime().Now()
	b := SystemTime().Now()
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(a.BootID) || b.BootID != a.BootID {
		t.Errorf("boot ids %q, %q: want the same UUID", a.BootID, b.BootID)
	}
	if a.Boottime < time.Duration(mono.Nano()) || b.Boottime < a.Boottime {
		t.Errorf("boot clock %v then %v, monotonic clock %v: want at least the monotonic clock, never going back", a.Boottime, b.Boottime, time.Duration(mono.Nano()))
	}
	if d := time.Since(a.Wall); d < 0 || d > time.Minute {
		t.Errorf("wall clock %v, %v from now", a.Wall, d)
	}
}

// steppedHost is the machine's clocks with the wall clock stepped by step.
type steppedHost struct{ step time.Duration }

func (h steppedHost) Now() HostTime {
	n := SystemTime().Now()
	n.Wall = n.Wall.Add(h.step)
	return n
}

// TestSystemTimeStepBetweenRuns: with the machine's own boot id and boot
// clock, a restart after the wall clock stepped an hour either way restores
// a lease with what it had left.
func TestSystemTimeStepBetweenRuns(t *testing.T) {
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, nil, sessionOpts{})
			tok := s.acquire("k", 2*time.Hour, "")
			s.commit()
			s.close()
			s = open(t, dir, nil, sessionOpts{host: steppedHost{step}})
			if st, _ := s.status("k"); !st.Held || st.Token != tok || st.TTL > 2*time.Hour || st.TTL < 2*time.Hour-restartTol {
				t.Errorf("%+v, want token %d with about 2h left", st, tok)
			}
		})
	}
}
