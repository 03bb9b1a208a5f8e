package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/stats"
	"github.com/leasehold/leasehold/protocol"
	"github.com/leasehold/leasehold/server"
	dto "github.com/prometheus/client_model/go"
)

// labelled returns the series of the metric name whose labels include want.
func labelled(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
series:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue series
			}
		}
		return m
	}
	return nil
}

// TestCommandMetrics: on either transport, /metrics counts commands by name
// and result with a latency histogram each, counts the bytes in and out,
// and gives a name outside the command table no series of its own.
func TestCommandMetrics(t *testing.T) {
	for _, loops := range []int{0, 1} {
		name := map[int]string{0: "goroutines", 1: "event loop"}[loops]
		t.Run(name, func(t *testing.T) {
			ls := lockserver.Start(t, func(c *server.Config) { c.IOLoops = loops })
			base := startAdmin(t, ls.Server)
			rdb := ls.Client()
			ctx := context.Background()
			if err := rdb.Ping(ctx).Err(); err != nil { // the client's connection is made
				t.Fatal(err)
			}
			before := scrape(t, base)
			counted := func(fams map[string]*dto.MetricFamily, command, result string) float64 {
				return labelled(fams, "leasehold_commands_total", map[string]string{"command": command, "result": result}).GetCounter().GetValue()
			}
			const pings = 5
			for range pings {
				if err := rdb.Ping(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := rdb.Do(ctx, "ACQUIRE", "k", "soon").Err(); err == nil {
				t.Fatal("ACQUIRE with a bad ttl succeeded")
			}
			hostile := "evil\"} 1\nleasehold_pwned 1\n"
			if err := rdb.Do(ctx, hostile).Err(); err == nil || !strings.Contains(err.Error(), "unknown command") {
				t.Fatalf("an unknown command answered %v", err)
			}
			fams := scrape(t, base)

			for _, tc := range []struct {
				command, result string
				want            float64
			}{
				{"ping", "ok", pings},
				{"ping", "failed", 0},
				{"acquire", "failed", 1},
				{"acquire", "ok", 0},
				{"unknown", "rejected", 1},
			} {
				if labelled(fams, "leasehold_commands_total", map[string]string{"command": tc.command, "result": tc.result}) == nil {
					t.Errorf("no leasehold_commands_total{command=%q,result=%q}", tc.command, tc.result)
				}
				if got := counted(fams, tc.command, tc.result) - counted(before, tc.command, tc.result); got != tc.want {
					t.Errorf("leasehold_commands_total{command=%q,result=%q} grew by %v, want %v", tc.command, tc.result, got, tc.want)
				}
			}
			if fams["leasehold_pwned"] != nil {
				t.Error("a command name injected a metric")
			}
			known := map[string]bool{"unknown": true}
			for _, c := range protocol.Commands {
				known[c.Name] = true
			}
			for _, m := range fams["leasehold_commands_total"].GetMetric() {
				for _, l := range m.Label {
					if l.GetName() == "command" && !known[l.GetValue()] {
						t.Errorf("a series for command %q", l.GetValue())
					}
				}
			}

			if f := fams["leasehold_command_duration_seconds"]; f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
				t.Fatalf("leasehold_command_duration_seconds: %v", f)
			}
			ping := map[string]string{"command": "ping"}
			h := labelled(fams, "leasehold_command_duration_seconds", ping).GetHistogram()
			h0 := labelled(before, "leasehold_command_duration_seconds", ping).GetHistogram()
			if n := h.GetSampleCount() - h0.GetSampleCount(); n != pings || h.GetSampleSum() <= h0.GetSampleSum() {
				t.Errorf("ping's histogram: %d samples more, sum %v from %v; want %d more", n, h.GetSampleSum(), h0.GetSampleSum(), pings)
			}
			// The text format adds the +Inf bucket.
			buckets := h.GetBucket()
			if len(buckets) != len(stats.LatencyBounds)+1 || buckets[0].GetUpperBound() != 1e-6 || buckets[len(buckets)-1].GetCumulativeCount() != h.GetSampleCount() {
				t.Errorf("ping's histogram buckets: %v", buckets)
			}
			if labelled(fams, "leasehold_command_duration_seconds", map[string]string{"command": "unknown"}) != nil {
				t.Error("rejected commands have a histogram")
			}

			// PING's frame alone is 14 bytes, its +PONG 7.
			for name, least := range map[string]float64{"leasehold_net_input_bytes_total": 14 * pings, "leasehold_net_output_bytes_total": 7 * pings} {
				if grew := value(t, fams, name) - value(t, before, name); grew < least {
					t.Errorf("%s grew by %v over %d PINGs", name, grew, pings)
				}
			}
			if got := value(t, fams, "leasehold_connections_closed_idle_total"); got != 0 {
				t.Errorf("leasehold_connections_closed_idle_total = %v without an idle timeout", got)
			}
		})
	}
}
