package command

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// TestServeRefusesWrongClock: a wall clock before the token epoch would make
// every start without --data-dir begin at the same fencing token, and one
// past 2095-09-07 would give tokens above 2^53: serve refuses to start (exit
// 1, the reading and the way out in the error) unless the tokens come from
// a data directory or the operator opts in. LEASEHOLD_TEST_NOW fakes the
// boot reading (bootclock_testhook.go).
func TestServeRefusesWrongClock(t *testing.T) {
	const anyPort = "--addr=127.0.0.1:0"
	cases := []struct {
		name string
		now  string
		args []string
		want []string // in the error
	}{
		{"before the epoch", "2025-06-01T12:00:00Z", nil,
			[]string{"2025-06-01T12:00:00Z", "token epoch 2026-01-01", "--data-dir", "--allow-clock-before-epoch", "same fencing token"}},
		{"unset clock", "1970-01-01T00:00:00Z", []string{"serve"}, []string{"1970-01-01T00:00:00Z", "--data-dir"}},
		{"past the end of the token range", "2100-01-01T00:00:00Z", nil, []string{"2100-01-01T00:00:00Z", "2095-09-07T15:47:35Z", "2^53"}},
		{"past the end, whatever the flags", "2100-01-01T00:00:00Z", []string{"--allow-clock-before-epoch", "--data-dir", t.TempDir()},
			[]string{"2100-01-01T00:00:00Z", "no flag"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, exit := run(t, []string{"LEASEHOLD_TEST_NOW=" + tc.now}, append(tc.args, anyPort, "--log-format", "json")...)
			if exit != 1 {
				t.Fatalf("exit %d, want 1\nstderr: %s", exit, stderr)
			}
			l := lineWith(jsonLines(t, stderr), "cannot start")
			if l == nil || l["level"] != "error" {
				t.Fatalf("stderr %s: want a JSON error line, cannot start", stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(l["error"].(string), w) {
					t.Errorf("error %q does not say %q", l["error"], w)
				}
			}
		})
	}
}

// TestServeClockBeforeEpochStarts: with --data-dir (tokens come from the
// directory) or --allow-clock-before-epoch, a clock before the epoch starts
// the server with a warning; the opt-in's first token is the same at every
// such start, as the warning says. A clock in range starts without one.
func TestServeClockBeforeEpochStarts(t *testing.T) {
	in2030 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		now   string
		args  []string
		first uint64 // the startup line's first_token
		warn  string // in the warning; "" for none
	}{
		{"opted in", "2025-06-01T12:00:00Z", []string{"--allow-clock-before-epoch"}, 1 << locker.TokenTimeShift, "earlier run"},
		{"with a data dir", "1970-01-01T00:00:00Z", []string{"--data-dir", t.TempDir()}, 1 << locker.TokenTimeShift, "deadlines on disk"},
		{"in range", in2030.Format(time.RFC3339), nil, locker.BootEpochToken(in2030), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, addr := serveBinary(t, func(addr string) ([]string, []string) {
				return []string{"LEASEHOLD_TEST_NOW=" + tc.now}, append([]string{"serve", "--addr", addr, "--log-format", "json"}, tc.args...)
			})
			tok, err := client(t, addr).Do(testCtx(t), "ACQUIRE", "k", 60000).Uint64()
			if err != nil || tok != tc.first+1 {
				t.Fatalf("ACQUIRE = %d, %v; want %d", tok, err, tc.first+1)
			}
			if exit := p.stop(syscall.SIGTERM); exit != 0 {
				t.Fatalf("exit %d, want 0\nstderr: %s", exit, p.stderr)
			}
			lines := p.logLines()
			checkFields(t, lineWith(lines, "leasehold listening"), map[string]any{"first_token": float64(tc.first)})
			var warning map[string]any
			for _, l := range lines {
				if l["level"] == "warn" {
					warning = l
				}
			}
			switch {
			case tc.warn == "" && warning != nil:
				t.Fatalf("a warning with the clock in range: %v", warning)
			case tc.warn == "":
			case warning == nil:
				t.Fatalf("no warning; stderr:\n%s", p.stderr)
			case !strings.Contains(warning["message"].(string), tc.warn) || !strings.Contains(warning["error"].(string), tc.now):
				t.Fatalf("warning %v: want it to name the reading %s and say %q", warning, tc.now, tc.warn)
			}
		})
	}
}
