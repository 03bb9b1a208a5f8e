package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
	dto "github.com/prometheus/client_model/go"
)

// histogram is the one series of the histogram name.
func histogram(t *testing.T, fams map[string]*dto.MetricFamily, name string) *dto.Histogram {
	t.Helper()
	f := fams[name]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM || len(f.Metric) != 1 {
		t.Fatalf("metric %s: %v, want one histogram", name, f)
	}
	return f.Metric[0].GetHistogram()
}

// byMode is leasehold_leases_held_by_mode's series for mode.
func byMode(t *testing.T, fams map[string]*dto.MetricFamily, mode string) float64 {
	t.Helper()
	for _, m := range fams["leasehold_leases_held_by_mode"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "mode" && l.GetValue() == mode {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no leasehold_leases_held_by_mode{mode=%q}", mode)
	return 0
}

// TestLockMetrics follows a hand-off, a lock-delay refusal, leases of every
// mode, a lease the reaper expires and a subscriber's events through a real
// client to /metrics.
func TestLockMetrics(t *testing.T) {
	ls := lockserver.Start(t, func(c *server.Config) { c.Locker.LockDelay = time.Minute })
	base := startAdmin(t, ls.Server)
	rdb := ls.Client()
	ctx := context.Background()
	do := doer(t, rdb)

	sub := rdb.Subscribe(ctx, "__lock__:k")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}

	// A hand-off: k's holder releases to a waiter parked meanwhile.
	tok := do("ACQUIRE", "k", 60000)
	waited := make(chan error, 1)
	go func() { waited <- rdb.Do(ctx, "ACQUIRE", "k", 60000, "WAIT", 10000).Err() }()
	testutil.Eventually(t, 10*time.Second, "the waiter queued", func() bool {
		return value(t, scrape(t, base), "leasehold_waits_total") == 1
	})
	do("RELEASE", "k", tok)
	if err := <-waited; err != nil {
		t.Fatalf("the waiter: %v", err)
	}

	// Leases of every mode, and one the reaper expires into a lock-delay
	// that refuses the next ACQUIRE.
	do("ACQUIRE", "rw", 60000, "SHARED")
	do("ACQUIRE", "rw", 60000, "SHARED")
	do("CREATE", "sem", "LIMIT", 3)
	do("ACQUIRE", "sem", 60000)
	do("ACQUIRE", "gone", 1)
	testutil.Eventually(t, 10*time.Second, "the reaper expired the 1 ms lease", func() bool {
		return value(t, scrape(t, base), "leasehold_leases_expired_total") == 1
	})
	if v, err := rdb.Do(ctx, "ACQUIRE", "gone", 60000).Result(); err == nil {
		t.Fatalf("ACQUIRE in a lock-delay answered %v", v)
	}

	fams := scrape(t, base)
	for name, want := range map[string]float64{
		"leasehold_lock_handoffs_total":       1,
		"leasehold_lock_delay_refusals_total": 1,
		"leasehold_events_dropped_total":      0,
	} {
		if got := value(t, fams, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// acquired, released, acquired (the waiter's) at least; the events of
	// the other locks go to no subscriber but are routed all the same.
	if got := value(t, fams, "leasehold_events_published_total"); got < 3 {
		t.Errorf("leasehold_events_published_total = %v, want at least 3", got)
	}
	for mode, want := range map[string]float64{"exclusive": 1, "shared": 2, "permit": 1} {
		if got := byMode(t, fams, mode); got != want {
			t.Errorf("leases held, %s: %v, want %v", mode, got, want)
		}
	}
	if wait := histogram(t, fams, "leasehold_lock_wait_seconds"); wait.GetSampleCount() != 1 || wait.GetSampleSum() <= 0 || wait.GetSampleSum() > 10 {
		t.Errorf("wait time: %d waits, %v s; want 1, under the WAIT", wait.GetSampleCount(), wait.GetSampleSum())
	}
	// k's first lease (released) and the 1 ms one (expired at its deadline).
	hold := histogram(t, fams, "leasehold_lock_hold_seconds")
	if hold.GetSampleCount() != 2 {
		t.Errorf("hold time: %d leases, want 2", hold.GetSampleCount())
	}
	if b := hold.GetBucket(); len(b) < 21 || b[0].GetUpperBound() != 0.001 || b[20].GetUpperBound() != 1048.576 {
		t.Errorf("hold time buckets %v, want 1 ms to 2^20 ms", b)
	} else if b[0].GetCumulativeCount() < 1 {
		t.Errorf("hold time: the 1 ms lease is not in the 1 ms bucket: %v", b)
	}
	if late := histogram(t, fams, "leasehold_reaper_lateness_seconds"); late.GetSampleCount() != 1 {
		t.Errorf("reaper lateness: %d expiries, want 1", late.GetSampleCount())
	}
}
