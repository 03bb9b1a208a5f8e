package server

import (
	"net"
	"testing"

	"github.com/leasehold/leasehold/internal/limits"
	"github.com/rs/zerolog"
)

// TestDeliverPastLimitCountsDropped: a message refused because the
// subscriber's outbox would pass its limit counts as an event dropped, each
// one, while the subscriber is being closed; one queued does not.
func TestDeliverPastLimitCountsDropped(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OutputLimits.PubSub = limits.OutputLimit{Hard: 100}
	srv, err := New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	near, far := net.Pipe()
	defer far.Close()
	c := newConn(srv, "test", "test")
	c.nc = near
	c.deliver("__lock__:k", false, make([]byte, 60))
	if n := srv.hub.eventsDropped.Load(); n != 0 {
		t.Fatalf("%d dropped after a message within the limit", n)
	}
	c.deliver("__lock__:k", false, make([]byte, 60)) // 120 bytes: past it
	c.deliver("__lock__:k", false, make([]byte, 50)) // 110: still past it
	if n := srv.hub.eventsDropped.Load(); n != 2 {
		t.Fatalf("%d dropped, want the 2 past the limit", n)
	}
	if got := srv.StatsSnapshot().Traffic.EventsDropped; got != 2 {
		t.Fatalf("Stats' EventsDropped %d, want 2", got)
	}
}

// TestLockMetricsInInfo: INFO reports the lock table's new figures under
// the names docs/operations.md gives.
func TestLockMetricsInInfo(t *testing.T) {
	rdb := startServer(t).client()
	do(t, rdb, "ACQUIRE", "rw", "60000", "SHARED")
	tok := do(t, rdb, "ACQUIRE", "x", "60000").Int()
	do(t, rdb, "RELEASE", "x", tok).Int()
	for field, want := range map[string]string{
		"leases_held_exclusive": "0", "leases_held_shared": "1", "leases_held_permits": "0",
		"hand_offs": "0", "lock_delay_refusals": "0", "hold_time_count": "1", "wait_time_count": "0",
		"reaper_lateness_count": "0",
	} {
		if got := infoField(t, rdb, "locks", field); got != want {
			t.Errorf("INFO locks %s = %q, want %q", field, got, want)
		}
	}
	for _, field := range []string{"wait_time_total_ms", "hold_time_total_ms", "reaper_lateness_total_ms"} {
		if got := infoField(t, rdb, "locks", field); got == "" {
			t.Errorf("INFO locks has no %s", field)
		}
	}
	for _, field := range []string{"pubsub_events_published", "pubsub_events_dropped"} {
		if got := infoField(t, rdb, "stats", field); got != "0" {
			t.Errorf("INFO stats %s = %q with no subscriber, want 0", field, got)
		}
	}
}
