package server

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/glob"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
)

// INFO and CONFIG: the server's figures and settings, in Redis's shapes.

// infoSections lists INFO's sections in order, each rendering its lines.
// As in Redis, the sections marked extra (a line per command) are left out
// of INFO and INFO default, and given by name, all or everything.
var infoSections = []struct {
	name   string
	render func(s *Server, b *strings.Builder)
	extra  bool
}{
	{"server", (*Server).infoServer, false},
	{"clients", (*Server).infoClients, false},
	{"memory", (*Server).infoMemory, false},
	{"stats", (*Server).infoStats, false},
	{"locks", (*Server).infoLocks, false},
	{"persistence", (*Server).infoPersistence, false},
	{"limits", (*Server).infoLimits, false},
	{"cluster", (*Server).infoCluster, false},
	{"commandstats", (*Server).infoCommandStats, true},
	{"latencystats", (*Server).infoLatencyStats, true},
}

func handleInfo(c *conn, args [][]byte) error {
	c.tally.Flush(c.counters) // the commands before INFO in its round count too
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := want["all"] || want["everything"]
	byDefault := len(want) == 0 || want["default"]
	var b strings.Builder
	for _, sec := range infoSections {
		if !all && !want[sec.name] && (sec.extra || !byDefault) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s%s\r\n", strings.ToUpper(sec.name[:1]), sec.name[1:])
		sec.render(c.srv, &b)
	}
	c.wr.WriteBulkString(b.String())
	return nil
}

func infoLine(b *strings.Builder, key string, value any) {
	fmt.Fprintf(b, "%s:%v\r\n", key, value)
}

func (s *Server) infoServer(b *strings.Builder) {
	uptime := time.Since(s.started)
	infoLine(b, "leasehold_version", s.cfg.Version)
	// Some clients read redis_version to pick features; leasehold answers
	// as the Redis whose commands it mirrors (RESP2, HELLO, CLIENT SETINFO).
	infoLine(b, "redis_version", "7.0.0")
	infoLine(b, "redis_mode", "standalone")
	infoLine(b, "os", runtime.GOOS)
	infoLine(b, "arch_bits", strconv.IntSize)
	infoLine(b, "go_version", runtime.Version())
	infoLine(b, "process_id", os.Getpid())
	if addr := s.Addr(); addr != nil {
		infoLine(b, "tcp_addr", addr.String())
	}
	if addr := s.TLSAddr(); addr != nil {
		infoLine(b, "tls_addr", addr.String())
	}
	infoLine(b, "uptime_in_seconds", int64(uptime.Seconds()))
	infoLine(b, "uptime_in_days", int64(uptime.Hours()/24))
}

func (s *Server) infoClients(b *strings.Builder) {
	st := s.clientStats()
	infoLine(b, "connected_clients", st.Connected)
	infoLine(b, "maxclients", st.MaxClients)
	infoLine(b, "blocked_clients", st.Blocked)
	infoLine(b, "client_output_buffer_limit", s.cfg.OutputLimits)
	infoLine(b, "client_output_pause_bytes", outputPause)
	infoLine(b, "client_round_commands", roundCommands)
	infoLine(b, "client_round_input_bytes", roundInputBytes)
	infoLine(b, "client_round_time_us", roundTime.Microseconds())
	infoLine(b, "client_output_buffer_peak", st.OutputBufferPeak)
}

func (s *Server) infoMemory(b *strings.Builder) {
	st := s.memoryStats()
	infoLine(b, "used_memory", st.Used) // the reading --maxmemory is checked against: the heap in use
	infoLine(b, "used_memory_sys", st.Sys)
	infoLine(b, "heap_released", st.HeapReleased)
	infoLine(b, "maxmemory", st.Max)
	infoLine(b, "maxmemory_policy", "noeviction")
	infoLine(b, "maxmemory_refusals", st.Refusals)
	infoLine(b, "memory_returns_to_os", st.ReturnsToOS)
	infoLine(b, "gc_cycles", st.GCCycles)
	infoLine(b, "gc_pause_total_ns", st.GCPauseTotal.Nanoseconds())
}

func (s *Server) infoStats(b *strings.Builder) {
	st := s.trafficStats()
	infoLine(b, "total_connections_received", st.ConnectionsReceived)
	infoLine(b, "total_commands_processed", st.CommandsProcessed)
	infoLine(b, "rejected_connections", st.ConnectionsRejected)
	infoLine(b, "total_protocol_errors", st.ProtocolErrors)
	infoLine(b, "security_attacks", st.SecurityAttacks)
	if st.TLS {
		infoLine(b, "tls_handshake_failures", st.TLSHandshakeFailures)
	}
	infoLine(b, "acl_access_denied_auth", st.ACLDeniedAuth)
	infoLine(b, "acl_access_denied_cmd", st.ACLDeniedCommand)
	infoLine(b, "acl_access_denied_key", st.ACLDeniedKey)
	infoLine(b, "acl_access_denied_channel", st.ACLDeniedChannel)
	infoLine(b, "acl_access_denied_tls_cert", st.ACLDeniedTLSCert)
	infoLine(b, "protected_mode_refusals", st.ProtectedModeRefusals)
	infoLine(b, "total_handler_panics", st.HandlerPanics)
	infoLine(b, "pubsub_channels", st.PubSubChannels)
	infoLine(b, "pubsub_patterns", st.PubSubPatterns)
	infoLine(b, "pubsub_slow_subscribers_closed", st.PubSubSlowClosed)
	infoLine(b, "client_output_buffer_limit_disconnections", st.OutputLimitCloses)
	infoLine(b, "total_net_input_bytes", st.NetInputBytes)
	infoLine(b, "total_net_output_bytes", st.NetOutputBytes)
	infoLine(b, "idle_timeout_disconnections", st.IdleCloses)
	infoLine(b, "pubsub_events_published", st.EventsPublished)
	infoLine(b, "pubsub_events_dropped", st.EventsDropped)
}

// infoCommandStats is Redis's INFO commandstats: a line per command called
// or rejected at least once.
func (s *Server) infoCommandStats(b *strings.Builder) {
	for _, st := range s.cmdStats.Commands() {
		perCall := 0.0
		if st.Calls > 0 {
			perCall = float64(st.Duration) / float64(time.Microsecond) / float64(st.Calls)
		}
		fmt.Fprintf(b, "cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d\r\n",
			st.Name, st.Calls, st.Duration.Microseconds(), perCall, st.Rejected, st.Failed)
	}
}

// infoLatencyStats is Redis's INFO latencystats, from the histograms: each
// percentile is the upper bound of its bucket (see CommandStats.Percentile).
func (s *Server) infoLatencyStats(b *strings.Builder) {
	for _, st := range s.cmdStats.Commands() {
		if st.Calls == 0 {
			continue
		}
		us := func(q float64) float64 { return float64(st.Percentile(q)) / float64(time.Microsecond) }
		fmt.Fprintf(b, "latency_percentiles_usec_%s:p50=%.3f,p99=%.3f,p99.9=%.3f\r\n", st.Name, us(0.5), us(0.99), us(0.999))
	}
}

func (s *Server) infoLocks(b *strings.Builder) {
	st := s.lockStats()
	cfg := s.lockTable().Config()
	infoLine(b, "locks", st.Locks)
	infoLine(b, "leases_held", st.Held)
	infoLine(b, "leases_granted", st.Granted)
	infoLine(b, "leases_renewed", st.Renewed)
	infoLine(b, "leases_released", st.Released)
	infoLine(b, "leases_expired", st.Expired)
	infoLine(b, "lock_delays", st.Delayed)
	infoLine(b, "waits", st.Waits)
	infoLine(b, "wait_grants", st.WaitGrants)
	infoLine(b, "wait_timeouts", st.WaitTimeouts)
	infoLine(b, "leases_forced", st.Forced)
	infoLine(b, "wait_cancels", st.WaitCancels)
	infoLine(b, "key_arena_bytes", st.ArenaBytes)
	infoLine(b, "lock_table_bytes", st.TableBytes)
	infoLine(b, "shards", cfg.Shards)
	infoLine(b, "wheel_tick_ms", cfg.Tick.Milliseconds())
	infoLine(b, "max_ttl_ms", cfg.MaxTTL.Milliseconds())
	infoLine(b, "lock_delay_ms", cfg.LockDelay.Milliseconds())
	infoLine(b, "max_locks", st.MaxLocks)
	infoLine(b, "table_full_refusals", st.TableFullRefusals)
	infoLine(b, "max_key_len", cfg.MaxKeyLen)
	infoLine(b, "require_create", boolInt(cfg.RequireCreate))
	tokens := s.tokenStats()
	infoLine(b, "last_token", tokens.Highest)
	infoLine(b, "token_headroom", tokens.Headroom)
	infoLine(b, "leases_held_exclusive", st.HeldExclusive)
	infoLine(b, "leases_held_shared", st.HeldShared)
	infoLine(b, "leases_held_permits", st.HeldPermits)
	infoLine(b, "hand_offs", st.HandOffs)
	infoLine(b, "lock_delay_refusals", st.LockDelayRefusals)
	for _, h := range [...]struct {
		name string
		h    *locker.Histogram
	}{{"wait_time", &st.WaitTime}, {"hold_time", &st.HoldTime}, {"reaper_lateness", &st.ReaperLateness}} {
		infoLine(b, h.name+"_count", h.h.Count)
		infoLine(b, h.name+"_total_ms", h.h.Sum.Milliseconds())
	}
}

// infoPersistence reports the data directory, in Redis's INFO persistence
// words where they fit (aof_enabled, aof_current_size).
func (s *Server) infoPersistence(b *strings.Builder) {
	st := s.persistStats()
	if st == nil {
		infoLine(b, "aof_enabled", 0)
		infoLine(b, "data_dir", "")
		return
	}
	infoLine(b, "aof_enabled", 1)
	infoLine(b, "data_dir", st.Dir)
	infoLine(b, "fsync", st.Fsync)
	infoLine(b, "aof_current_size", st.LogBytes)
	infoLine(b, "snapshot_size", st.SnapshotBytes)
	infoLine(b, "compactions", st.Compactions)
	infoLine(b, "last_compaction_time", unixOrNone(st.LastCompaction))
	infoLine(b, "fsyncs", st.Fsyncs)
	avg := time.Duration(0)
	if st.Fsyncs > 0 {
		avg = st.FsyncTotal / time.Duration(st.Fsyncs)
	}
	infoLine(b, "fsync_avg_us", avg.Microseconds())
	infoLine(b, "fsync_last_us", st.LastFsync.Microseconds())
	infoLine(b, "token_reserved_up_to", st.TokenCeiling)
	infoLine(b, "restart_grace_ms", s.cfg.Persist.RestartGrace.Milliseconds())
	status := "ok"
	if !st.OK {
		status = "err"
	}
	infoLine(b, "aof_last_write_status", status)
	infoLine(b, "persist_ok", boolInt(st.OK))
	infoLine(b, "persist_error", strings.NewReplacer("\r", " ", "\n", " ").Replace(st.Error))
	infoLine(b, "persist_write_failures", st.WriteFailures)
	infoLine(b, "persist_failing_since", unixOrNone(st.FailingSince))
	infoLine(b, "persist_last_resume_time", unixOrNone(st.LastResume))
}

// unixOrNone is t in Unix seconds, or -1 for the zero time, as Redis
// reports times that never were.
func unixOrNone(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.Unix()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// configParams are the parameters CONFIG GET knows: Redis's names for what
// Redis tools ask about (redis-benchmark reads save and appendonly), and
// leasehold's own settings under their flag names.
func (s *Server) configParams() [][2]string {
	cfg := s.cfg
	return [][2]string{
		{"save", ""},
		{"appendonly", s.appendonly()},
		{"databases", "1"},
		{"maxclients", strconv.Itoa(s.maxClients())},
		// Redis counts whole seconds; round up, as 0 would mean "never".
		{"timeout", strconv.FormatInt(int64((s.idleTimeout()+time.Second-1)/time.Second), 10)},
		{"proto-max-bulk-len", strconv.FormatInt(cfg.Limits.MaxBulkLen, 10)},
		{"client-query-buffer-limit", strconv.FormatInt(cfg.Limits.MaxQueryBuffer, 10)},
		{"client-output-buffer-limit", cfg.OutputLimits.String()},
		{"maxmemory", strconv.FormatUint(s.mem.Limit(), 10)},
		{"maxmemory-policy", "noeviction"},
		{"protected-mode", protocol.YesNo(cfg.ProtectedMode)},
		{"max-locks", strconv.Itoa(cfg.Locker.MaxLocks)},
		{"max-ttl", strconv.FormatInt(cfg.Locker.MaxTTL.Milliseconds(), 10)},
		{"lock-delay", strconv.FormatInt(cfg.Locker.LockDelay.Milliseconds(), 10)},
		{"max-key-len", strconv.Itoa(cfg.Locker.MaxKeyLen)},
		{"require-create", strconv.FormatBool(cfg.Locker.RequireCreate)},
		{"shards", strconv.Itoa(cfg.Locker.Shards)},
		{"data-dir", cfg.Persist.Dir},
		{"fsync", cfg.Persist.Fsync.String()},
		{"appendfsync", cfg.Persist.Fsync.String()},
		{"restart-grace", strconv.FormatInt(cfg.Persist.RestartGrace.Milliseconds(), 10)},
		{"slowlog-log-slower-than", strconv.FormatInt(cfg.SlowlogSlowerThan, 10)},
		{"slowlog-max-len", strconv.Itoa(cfg.SlowlogMaxLen)},
		{"lockstats-top", strconv.Itoa(cfg.LockStatsTop)},
	}
}

func handleConfig(c *conn, args [][]byte) error {
	switch sub := strings.ToLower(string(args[1])); sub {
	case "get":
		if len(args) < 3 {
			return protocol.ArityError("config|get")
		}
		var pairs [][2]string
		for _, p := range c.srv.configParams() {
			for _, pat := range args[2:] {
				if glob.Match(bytes.ToLower(pat), []byte(p[0])) {
					pairs = append(pairs, p)
					break
				}
			}
		}
		c.wr.WriteArray(2 * len(pairs))
		for _, p := range pairs {
			c.wr.WriteBulkString(p[0])
			c.wr.WriteBulkString(p[1])
		}
		return nil
	case "help":
		return writeHelpSubcommand(c, args)
	case "set", "resetstat", "rewrite":
		return protocol.ConfigUnsupportedError(sub)
	}
	return protocol.UnknownSubcommandError("config", args[1])
}

func (s *Server) appendonly() string {
	if s.store == nil {
		return "no"
	}
	return "yes"
}
