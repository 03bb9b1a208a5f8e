package admin

import (
	"github.com/leasehold/leasehold/internal/stats"
	"github.com/prometheus/client_golang/prometheus"
)

// The command path's metrics: commands by name and result, their latency
// histograms, bytes in and out and idle closes, from the counters the
// server keeps per event loop (server/cmdstats.go), summed when the
// snapshot is read. A command has series once it has been called or
// rejected; every name outside the command table is "unknown", so a client
// cannot add series.

// trafficMetrics are the command path's metrics of one series each.
var trafficMetrics = []metric{
	{"net_input_bytes_total", "Bytes read from client sockets (under TLS, the encrypted bytes after the handshake).", counter, nil,
		func(st *stats.Stats) float64 { return float64(st.Traffic.NetInputBytes) }},
	{"net_output_bytes_total", "Bytes written to client sockets (under TLS, the encrypted bytes after the handshake).", counter, nil,
		func(st *stats.Stats) float64 { return float64(st.Traffic.NetOutputBytes) }},
	{"connections_closed_idle_total", "Connections closed by the idle timeout (--idle-timeout).", counter, nil,
		func(st *stats.Stats) float64 { return float64(st.Traffic.IdleCloses) }},
}

var (
	trafficDescs = func() []*prometheus.Desc {
		ds := make([]*prometheus.Desc, len(trafficMetrics))
		for i, m := range trafficMetrics {
			ds[i] = prometheus.NewDesc(namespace+"_"+m.name, m.help, nil, m.labels)
		}
		return ds
	}()
	commandsTotal = prometheus.NewDesc(namespace+"_commands_total",
		`Commands by name and result: ok, failed (ran and answered with an error) or rejected (refused before running: arity, AUTH, ACL, unknown). Names outside the command table count as "unknown".`,
		[]string{"command", "result"}, nil)
	commandDuration = prometheus.NewDesc(namespace+"_command_duration_seconds",
		"Time commands took to run, from parsing to the reply buffered (not the network, nor a WAIT's time queued); rejected commands are not timed.",
		[]string{"command"}, nil)
)

// durationBuckets are the histogram's bucket bounds in seconds.
var durationBuckets = func() []float64 {
	b := make([]float64, len(stats.LatencyBounds))
	for i, d := range stats.LatencyBounds {
		b[i] = d.Seconds()
	}
	return b
}()

// describeCommandMetrics is Describe's part for the command path's metrics.
func describeCommandMetrics(ch chan<- *prometheus.Desc) {
	for _, d := range trafficDescs {
		ch <- d
	}
	ch <- commandsTotal
	ch <- commandDuration
}

// collectCommandMetrics is Collect's part for the command path's metrics.
func collectCommandMetrics(ch chan<- prometheus.Metric, st *stats.Stats) {
	for i, m := range trafficMetrics {
		ch <- prometheus.MustNewConstMetric(trafficDescs[i], m.kind, m.value(st))
	}
	for _, cs := range st.Commands {
		ch <- prometheus.MustNewConstMetric(commandsTotal, counter, float64(cs.OK), cs.Name, "ok")
		ch <- prometheus.MustNewConstMetric(commandsTotal, counter, float64(cs.Failed), cs.Name, "failed")
		ch <- prometheus.MustNewConstMetric(commandsTotal, counter, float64(cs.Rejected), cs.Name, "rejected")
		if cs.Calls == 0 {
			continue
		}
		cumulative := make(map[float64]uint64, len(durationBuckets))
		var count uint64
		for k, n := range cs.Buckets {
			count += n
			if k < len(durationBuckets) {
				cumulative[durationBuckets[k]] = count
			}
		}
		ch <- prometheus.MustNewConstHistogram(commandDuration, count, cs.Duration.Seconds(), cumulative, cs.Name)
	}
}
