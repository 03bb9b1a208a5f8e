package server

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/persist"
)

// steppedClocks is the machine's boot id and clocks, its wall clock stepped
// by step.
type steppedClocks struct{ step time.Duration }

func (c steppedClocks) Now() persist.HostTime {
	h := persist.SystemTime().Now()
	h.Wall = h.Wall.Add(c.step)
	return h
}

func persistClocks(c persist.TimeSource) option {
	return func(cfg *Config) { cfg.Persist.TimeSource = c }
}

// TestPersistClockStepBetweenRuns: a server restarted on its data directory
// after the wall clock stepped an hour, on the same boot, restores a lease
// and a lock-delay with what they had left: the downtime is measured by the
// boot clock (issue 13).
func TestPersistClockStepBetweenRuns(t *testing.T) {
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			p := startPersist(t, t.TempDir())
			tok := do(t, p.rdb, "ACQUIRE", "held", 7_200_000, "OWNER", "holder").Token()
			do(t, p.rdb, "CREATE", "delayed", "LOCKDELAY", 7_200_000).Is(1)
			do(t, p.rdb, "ACQUIRE", "delayed", 1).Token()
			// Wait out the 1 ms lease through the server's own view of it.
			for deadline := time.Now().Add(5 * time.Second); status(t, p.rdb, "delayed")["state"] != "delayed"; {
				if time.Now().After(deadline) {
					t.Fatalf("the 1 ms lease never expired: %v", status(t, p.rdb, "delayed"))
				}
			}
			p = p.restart(persistClocks(steppedClocks{step}))

			st := status(t, p.rdb, "held")
			if got := persistAtoi(t, st["token"]); got != int64(tok) {
				t.Fatalf("STATUS held %v, want token %d", st, tok)
			}
			if ttl := persistAtoi(t, st["ttl"]); ttl > 7_200_000 || ttl < 7_200_000-5_000 {
				t.Errorf("held: ttl %d ms after a %v step, want about 7200000", ttl, step)
			}
			d := status(t, p.rdb, "delayed")
			if left := persistAtoi(t, d["delay-left"]); d["state"] != "delayed" || left > 7_200_000 || left < 7_200_000-5_000 {
				t.Errorf("delayed: %v after a %v step, want about 7200000 ms of lock-delay left", d, step)
			}
		})
	}
}
