package admin

import (
	"github.com/leasehold/leasehold/internal/stats"
	"github.com/prometheus/client_golang/prometheus"
)

// namespace prefixes every metric of leasehold's own.
const namespace = "leasehold"

// metric is one figure of stats.Stats as a Prometheus metric.
type metric struct {
	name   string // without the namespace
	help   string
	kind   prometheus.ValueType
	labels prometheus.Labels // constant labels, for one of several series of a name
	value  func(st *stats.Stats) float64
}

// group is metrics that exist only when present says so: persistence needs
// a data directory, cluster figures cluster mode.
type group struct {
	present func(st *stats.Stats) bool
	metrics []metric
}

const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

func always(*stats.Stats) bool { return true }

// groups is every metric the collector exports, read from one
// StatsSnapshot per scrape. docs/operations.md lists them; a test keeps the
// two alike.
var groups = []group{
	{always, []metric{
		{"connected_clients", "Open client connections.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Clients.Connected) }},
		{"max_clients", "The most open connections allowed (--max-clients, fitted to the open-file limit).", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Clients.MaxClients) }},
		{"blocked_clients", "Connections parked in ACQUIRE or MACQUIRE ... WAIT.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Clients.Blocked) }},
		{"client_output_buffer_peak_bytes", "The most unsent output one connection has had.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Clients.OutputBufferPeak) }},

		{"connections_received_total", "Connections accepted, whatever became of them.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.ConnectionsReceived) }},
		{"connections_rejected_total", "Connections refused because --max-clients were open.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.ConnectionsRejected) }},
		{"commands_processed_total", "Commands processed, by open and closed connections.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.CommandsProcessed) }},
		{"protocol_errors_total", "Connections closed for a malformed RESP frame.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.ProtocolErrors) }},
		{"security_attacks_total", "Connections closed for sending HTTP (POST or Host:), as from a cross-protocol attack.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.SecurityAttacks) }},
		{"acl_denied_total", "Requests ACL refused, by what was refused.", counter, prometheus.Labels{"reason": "auth"},
			func(st *stats.Stats) float64 { return float64(st.Traffic.ACLDeniedAuth) }},
		{"acl_denied_total", "Requests ACL refused, by what was refused.", counter, prometheus.Labels{"reason": "command"},
			func(st *stats.Stats) float64 { return float64(st.Traffic.ACLDeniedCommand) }},
		{"acl_denied_total", "Requests ACL refused, by what was refused.", counter, prometheus.Labels{"reason": "key"},
			func(st *stats.Stats) float64 { return float64(st.Traffic.ACLDeniedKey) }},
		{"acl_denied_total", "Requests ACL refused, by what was refused.", counter, prometheus.Labels{"reason": "channel"},
			func(st *stats.Stats) float64 { return float64(st.Traffic.ACLDeniedChannel) }},
		{"acl_denied_total", "Requests ACL refused, by what was refused.", counter, prometheus.Labels{"reason": "tls-cert"},
			func(st *stats.Stats) float64 { return float64(st.Traffic.ACLDeniedTLSCert) }},
		{"protected_mode_refusals_total", "Connections from outside loopback refused by protected mode.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.ProtectedModeRefusals) }},
		{"handler_panics_total", "Commands whose handler panicked (the connection is closed, the server goes on).", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.HandlerPanics) }},
		{"pubsub_channels", "Channels with at least one subscriber.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.PubSubChannels) }},
		{"pubsub_patterns", "Patterns with at least one subscriber.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.PubSubPatterns) }},
		{"pubsub_slow_subscribers_closed_total", "Subscribers disconnected for not reading their lock events.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.PubSubSlowClosed) }},
		{"output_buffer_limit_disconnections_total", "Connections closed by their client output buffer limit.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.OutputLimitCloses) }},

		{"memory_used_bytes", "The Go heap in use, the reading --maxmemory is checked against.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Memory.Used) }},
		{"memory_max_bytes", "--maxmemory; 0 for no bound.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Memory.Max) }},
		{"maxmemory_refusals_total", "Commands refused with OOM by --maxmemory.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Memory.Refusals) }},
		{"memory_returns_to_os_total", "Times the memory watch gave freed heap back to the OS.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Memory.ReturnsToOS) }},

		{"locks", "Locks in the table.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.Locks) }},
		{"max_locks", "--max-locks; 0 for no bound.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.MaxLocks) }},
		{"leases_held", "Live leases.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.Held) }},
		{"leases_granted_total", "Leases granted, at once or after a wait.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.Granted) }},
		{"leases_renewed_total", "Leases renewed by EXTEND or their owner's repeated ACQUIRE.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.Renewed) }},
		{"leases_released_total", "Leases ended by RELEASE.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.Released) }},
		{"leases_expired_total", "Leases ended by their deadline: holders that did not renew in time.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.Expired) }},
		{"leases_forced_total", "Leases and lock-delays ended by FORCE-RELEASE.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.Forced) }},
		{"lock_delays_total", "Lock-delays begun by an expiry.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.Delayed) }},
		{"waits_total", "Requests queued by ACQUIRE or MACQUIRE ... WAIT.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.Waits) }},
		{"wait_grants_total", "Waits granted from the queue.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.WaitGrants) }},
		{"wait_timeouts_total", "Waits that ended without the lock.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.WaitTimeouts) }},
		{"wait_cancels_total", "Waits taken out of the queue (timed out, unblocked, or their client left).", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.WaitCancels) }},
		{"table_full_refusals_total", "New locks refused by --max-locks.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.TableFullRefusals) }},
		{"key_arena_bytes", "Memory held for lock names and owners.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.ArenaBytes) }},
		{"lock_table_bytes", "Memory the lock table's own structures hold.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Locks.TableBytes) }},
	}},
	{func(st *stats.Stats) bool { return st.Traffic.TLS }, []metric{
		{"tls_handshake_failures_total", "TLS handshakes that failed.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Traffic.TLSHandshakeFailures) }},
	}},
	{func(st *stats.Stats) bool { return st.Persistence != nil }, []metric{
		{"persist_ok", "1 while the data directory is written, 0 while writes fail or after it failed.", gauge, nil,
			func(st *stats.Stats) float64 { return boolFloat(st.Persistence.OK) }},
		{"persist_write_failures_total", "Failed writes to the data directory, retries included.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Persistence.WriteFailures) }},
		{"persist_log_bytes", "Size of the logs since the last snapshot.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Persistence.LogBytes) }},
		{"persist_snapshot_bytes", "Size of the last snapshot.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Persistence.SnapshotBytes) }},
		{"persist_compactions_total", "Snapshots written, each replacing the logs before it.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Persistence.Compactions) }},
		{"fsyncs_total", "fsyncs of the data directory's log.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Persistence.Fsyncs) }},
		{"fsync_seconds_total", "Time spent in those fsyncs; divided by fsyncs_total, the mean latency.", counter, nil,
			func(st *stats.Stats) float64 { return st.Persistence.FsyncTotal.Seconds() }},
		{"fsync_last_seconds", "How long the last fsync took.", gauge, nil,
			func(st *stats.Stats) float64 { return st.Persistence.LastFsync.Seconds() }},
		{"token_reserved_up_to", "Fencing tokens are reserved on disk up to this one.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Persistence.TokenCeiling) }},
	}},
	{func(st *stats.Stats) bool { return st.Cluster != nil }, []metric{
		{"cluster_leader", "1 if this node is the leader and its term has begun (it proposes), else 0.", gauge, nil,
			func(st *stats.Stats) float64 { return boolFloat(st.Cluster.Leader) }},
		{"cluster_leader_known", "1 if this node knows a leader, 0 during an election or without a quorum.", gauge, nil,
			func(st *stats.Stats) float64 { return boolFloat(st.Cluster.LeaderKnown) }},
		{"cluster_role", "This node's role: 1 for the role it has, 0 for the others.", gauge, prometheus.Labels{"role": "leader"},
			func(st *stats.Stats) float64 { return boolFloat(st.Cluster.Role == "leader") }},
		{"cluster_role", "This node's role: 1 for the role it has, 0 for the others.", gauge, prometheus.Labels{"role": "leader-starting"},
			func(st *stats.Stats) float64 { return boolFloat(st.Cluster.Role == "leader-starting") }},
		{"cluster_role", "This node's role: 1 for the role it has, 0 for the others.", gauge, prometheus.Labels{"role": "candidate"},
			func(st *stats.Stats) float64 { return boolFloat(st.Cluster.Role == "candidate") }},
		{"cluster_role", "This node's role: 1 for the role it has, 0 for the others.", gauge, prometheus.Labels{"role": "follower"},
			func(st *stats.Stats) float64 { return boolFloat(st.Cluster.Role == "follower") }},
		{"cluster_term", "The Raft term this node knows.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Cluster.Term) }},
		{"cluster_commit_index", "The last Raft log index this node knows committed.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Cluster.CommitIndex) }},
		{"cluster_applied_index", "The last Raft log index applied to this node's lock table.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Cluster.AppliedIndex) }},
		{"cluster_last_log_index", "The last index in this node's Raft log.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Cluster.LastLogIndex) }},
		{"cluster_last_snapshot_index", "The Raft log index of this node's last snapshot.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Cluster.LastSnapshotIndex) }},
		{"cluster_known_nodes", "Members of the group this node knows, itself included.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Cluster.KnownNodes) }},
		{"cluster_settings_mismatch", "1 if this node's lock-table settings differ from its leader's (it refuses lock commands), else 0.", gauge, nil,
			func(st *stats.Stats) float64 { return boolFloat(st.Cluster.SettingsMismatch()) }},
		{"cluster_proposed_entries_total", "Log entries this node proposed as leader, each carrying one or more connections' batches.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Cluster.ProposedEntries) }},
		{"cluster_proposed_batches_total", "Connections' batches (this node's and those followers forwarded) those entries carried; over cluster_proposed_entries_total, the batches an entry.", counter, nil,
			func(st *stats.Stats) float64 { return float64(st.Cluster.ProposedBatches) }},
	}},
	{always, []metric{
		{"token_headroom", "Fencing tokens left below 2^53 after the highest issued or reserved.", gauge, nil,
			func(st *stats.Stats) float64 { return float64(st.Tokens.Headroom) }},
	}},
	lockGroup, // lockmetrics.go
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// buildInfo is the one metric whose label comes from the snapshot.
var buildInfo = prometheus.NewDesc(namespace+"_build_info", "Always 1; the version label is the running leasehold's.", []string{"version"}, nil)

// collector reads the server's counters at scrape time, from one
// StatsSnapshot: the command path pays nothing for it.
type collector struct {
	src   Source
	descs [][]*prometheus.Desc // by group, then metric
	hists []*prometheus.Desc   // by histograms (lockmetrics.go)
}

func newCollector(src Source) *collector {
	c := &collector{src: src}
	for _, g := range groups {
		var ds []*prometheus.Desc
		for _, m := range g.metrics {
			ds = append(ds, prometheus.NewDesc(namespace+"_"+m.name, m.help, nil, m.labels))
		}
		c.descs = append(c.descs, ds)
	}
	for _, h := range histograms {
		c.hists = append(c.hists, h.desc())
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- buildInfo
	for _, ds := range c.descs {
		for _, d := range ds {
			ch <- d
		}
	}
	describeCommandMetrics(ch)
	for _, d := range c.hists {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.StatsSnapshot()
	ch <- prometheus.MustNewConstMetric(buildInfo, gauge, 1, st.Version)
	for i, g := range groups {
		if !g.present(&st) {
			continue
		}
		for j, m := range g.metrics {
			ch <- prometheus.MustNewConstMetric(c.descs[i][j], m.kind, m.value(&st))
		}
	}
	collectCommandMetrics(ch, &st)
	for i, h := range histograms {
		ch <- constHistogram(c.hists[i], h.value(&st))
	}
}
