package locker

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCheckBootClock: only readings from TokenEpoch up to TokenEpochEnd start
// a token sequence; the others are refused with the reading in the error.
func TestCheckBootClock(t *testing.T) {
	at := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	cases := []struct {
		name string
		boot time.Time
		want error // nil: accepted
	}{
		{"unset clock of a board without RTC", time.Unix(0, 0), ErrClockBeforeEpoch},
		{"a year before the epoch", at(2025, 1, 1), ErrClockBeforeEpoch},
		{"just before the epoch", TokenEpoch.Add(-time.Millisecond), ErrClockBeforeEpoch},
		{"the epoch", TokenEpoch, nil},
		{"now-ish", at(2026, 11, 24), nil},
		{"in another zone", at(2030, 6, 1).In(time.FixedZone("UTC+14", 14*3600)), nil},
		{"the last millisecond", TokenEpochEnd.Add(-time.Millisecond), nil},
		{"the end", TokenEpochEnd, ErrClockPastTokenRange},
		{"2100", at(2100, 1, 1), ErrClockPastTokenRange},
		{"beyond time.Duration", at(2500, 1, 1), ErrClockPastTokenRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBootClock(tc.boot)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("CheckBootClock(%s) = %v, want %v", tc.boot, err, tc.want)
			}
			tok := BootEpochToken(tc.boot)
			if err != nil {
				if reading := tc.boot.UTC().Format(time.RFC3339); !strings.Contains(err.Error(), reading) {
					t.Fatalf("error %q does not name the reading %s", err, reading)
				}
				return
			}
			cfg := DefaultConfig()
			cfg.FirstToken = tok
			if tok >= MaxSafeToken || cfg.Validate() != nil {
				t.Fatalf("accepted reading %s gives first token %d, not below 2^53: %v", tc.boot, tok, cfg.Validate())
			}
		})
	}
	if got := TokenEpochEnd.Format(time.RFC3339Nano); got != "2095-09-07T15:47:35.552Z" {
		t.Fatalf("TokenEpochEnd = %s, the docs say 2095-09-07T15:47:35.552Z", got)
	}
	if BootEpochToken(TokenEpochEnd) <= MaxSafeToken {
		t.Fatalf("TokenEpochEnd's token %d is below 2^53: the end is too early", BootEpochToken(TokenEpochEnd))
	}
}

// TestBootEpochTokenRestarts drives two runs of a table with injected boot
// readings: the first grants tokens, the second starts from its boot-epoch
// token. A restart repeats none of the first run's tokens while the clock
// at the restart reads at least the first boot's plus its uptime, that is
// while a backward step is no larger than the time the server was down; a
// step that puts the reading back to or before the first boot's repeats them.
// Readings before the epoch all start at the same token, and are refused.
func TestBootEpochTokenRestarts(t *testing.T) {
	bootA := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	const uptime, down = 2 * time.Millisecond, time.Minute
	// Run A grants as fast as condition (b) allows: 2^12 per millisecond.
	grants := int(uptime/time.Millisecond) << TokenTimeShift
	cases := []struct {
		name   string
		bootA  time.Time
		stepB  time.Duration // how far back the clock was stepped before B boots
		repeat bool
	}{
		{"no step", bootA, 0, false},
		{"stepped back by less than the downtime", bootA, down / 2, false},
		{"stepped back by the downtime", bootA, down, false},
		{"stepped back by uptime plus downtime", bootA, uptime + down, true},
		{"stepped back by an hour", bootA, time.Hour, true},
		{"both boots before the epoch", time.Unix(1e9, 0), 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bootB := tc.bootA.Add(uptime + down - tc.stepB)
			a := newOneShardTable(t, BootEpochToken(tc.bootA))
			var last uint64
			for range grants {
				last = mustAcquire(t, a, "k", time.Second, "")
				if !a.Release([]byte("k"), last) {
					t.Fatalf("release of token %d failed", last)
				}
			}
			b := newOneShardTable(t, BootEpochToken(bootB))
			if first := mustAcquire(t, b, "k", time.Second, ""); (first <= last) != tc.repeat {
				t.Fatalf("run B booted at %s grants %d after run A booted at %s granted up to %d: repeat=%v, want %v",
					bootB, first, tc.bootA, last, first <= last, tc.repeat)
			}
			if before := tc.bootA.Before(TokenEpoch); before != errors.Is(CheckBootClock(tc.bootA), ErrClockBeforeEpoch) {
				t.Fatalf("CheckBootClock(%s) = %v", tc.bootA, CheckBootClock(tc.bootA))
			}
		})
	}
}

func newOneShardTable(t *testing.T, first uint64) *Table {
	t.Helper()
	tb, _ := newTestTable(t, func(c *Config) { c.Shards, c.FirstToken = 1, first })
	return tb
}
