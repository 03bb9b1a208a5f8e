package server

import (
	"fmt"
	"github.com/leasehold/leasehold/internal/eventring"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/locker"
	"github.com/rs/zerolog"
)

// TestRecentEvents: events before RecordEvents are not kept; while it is on
// the server keeps the last RecentEventsMax, oldest first, across the ring's
// wrap, with owners and keys whole; after stop it keeps no more, and
// LockCounters counts what the table did.
func TestRecentEvents(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Locker.MaxKeyLen = 2 * eventring.TextMax })
	rdb := ts.client()
	do := func(args ...any) {
		t.Helper()
		if err := rdb.Do(ctx(t), args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	do("ACQUIRE", "before", "30000")
	if evs := ts.RecentEvents(); len(evs) != 0 {
		t.Fatalf("%d events recorded before RecordEvents: %+v", len(evs), evs)
	}

	stop := ts.RecordEvents()
	do("ACQUIRE", "a key", "30000", "OWNER", "an owner")
	evs := ts.RecentEvents()
	if len(evs) != 1 || evs[0].Kind != locker.EventAcquired || evs[0].Key != "a key" || evs[0].Owner != "an owner" || evs[0].Token == 0 || evs[0].Time.IsZero() {
		t.Fatalf("recent events %+v, want the one acquired", evs)
	}

	// Past the ring's size: each key acquired and force-released, two
	// events each.
	const n = RecentEventsMax
	for i := range n {
		k := fmt.Sprintf("k%03d", i)
		do("ACQUIRE", k, "30000")
		do("FORCE-RELEASE", k)
	}
	evs = ts.RecentEvents()
	if len(evs) != RecentEventsMax {
		t.Fatalf("%d events kept, want %d", len(evs), RecentEventsMax)
	}
	for i, ev := range evs {
		// The last RecentEventsMax of 2n events: keys n/2 to n-1, in order.
		want := fmt.Sprintf("k%03d", n/2+i/2)
		kind := []locker.EventKind{locker.EventAcquired, locker.EventForced}[i%2]
		if ev.Key != want || ev.Kind != kind {
			t.Fatalf("event %d: %s %s, want %s %s", i, ev.Kind, ev.Key, kind, want)
		}
		if i > 0 && ev.Time.Before(evs[i-1].Time) {
			t.Fatalf("event %d is older than the one before it", i)
		}
	}

	long := strings.Repeat("x", eventring.TextMax+10)
	do("ACQUIRE", "long", "30000", "OWNER", long)
	evs = ts.RecentEvents()
	if last := evs[len(evs)-1]; last.Owner != long[:eventring.TextMax] || !last.Truncated {
		t.Fatalf("a long owner kept as %d bytes, truncated %v", len(last.Owner), last.Truncated)
	}

	stop()
	stop() // twice is safe
	do("ACQUIRE", "after", "30000")
	if evs := ts.RecentEvents(); evs[len(evs)-1].Key != "long" {
		t.Fatalf("an event recorded after stop: %+v", evs[len(evs)-1])
	}
	if st := ts.LockCounters(); st.Granted != uint64(n+4) || st.Released+st.Expired != 0 {
		t.Errorf("LockCounters: %d granted, want %d", st.Granted, n+4)
	}
}

// BenchmarkRecentEvents is the price of the status page's event ring on a
// lock cycle (an ACQUIRE and a RELEASE, two events): off, as without an
// admin listener; recording, as with one; the two with LOCKSTATS on, when
// the table builds the events anyway; and, for comparison, a pub/sub watch
// (WatchEvents), what the page's live stream costs while a browser has it
// open. parallel runs the cycles on every core at once, where the ring's
// shared counter is what they have in common.
func BenchmarkRecentEvents(b *testing.B) {
	for _, mode := range []string{"off", "recording", "lockstats", "lockstats+recording", "watch"} {
		b.Run(mode, func(b *testing.B) {
			srv := benchServer(b, mode)
			cy := newCycler(srv, 1024)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cy.cycle(b)
			}
		})
	}
	for _, mode := range []string{"off", "recording"} {
		b.Run("parallel-"+mode, func(b *testing.B) {
			srv := benchServer(b, mode)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				cy := newCycler(srv, 1024)
				for i := range cy.keys {
					cy.keys[i] = fmt.Appendf(nil, "%p:%d", cy, i) // keys of its own
				}
				for pb.Next() {
					cy.cycle(b)
				}
			})
		})
	}
}

func benchServer(b *testing.B, mode string) *Server {
	cfg := DefaultConfig()
	if rest, ok := strings.CutPrefix(mode, "lockstats"); ok {
		cfg.LockStatsTop = 100
		mode = strings.TrimPrefix(rest, "+")
	}
	srv, err := New(cfg, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	switch mode {
	case "recording":
		b.Cleanup(srv.RecordEvents())
	case "watch":
		w := srv.WatchEvents(func(locker.Event) {}, func() {})
		b.Cleanup(w.Stop)
	}
	return srv
}
