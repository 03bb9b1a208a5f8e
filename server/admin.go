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

// The commands Redis clients send on their own, answered as a Redis server
// would, so that redis-cli, go-redis, redis-benchmark and node's redis work
// without flags.

func handlePing(c *conn, args [][]byte) error {
	if len(args) <= 2 && c.subscriptions() > 0 {
		// In RESP2 a listening connection's PING is answered in the
		// message shape, as Redis does.
		c.wr.WriteArray(2)
		c.wr.WriteBulkString("pong")
		if len(args) == 2 {
			c.wr.WriteBulk(args[1])
		} else {
			c.wr.WriteBulkString("")
		}
		return nil
	}
	switch len(args) {
	case 1:
		c.wr.WriteString("PONG")
	case 2:
		c.wr.WriteBulk(args[1])
	default:
		return protocol.ArityError("ping")
	}
	return nil
}

func handleEcho(c *conn, args [][]byte) error {
	c.wr.WriteBulk(args[1])
	return nil
}

func handleQuit(c *conn, _ [][]byte) error {
	c.wr.WriteString("OK")
	c.quit = true
	return nil
}

func handleSelect(c *conn, args [][]byte) error {
	db, ok := protocol.ParseInt(args[1])
	if !ok {
		return protocol.ErrNotInteger
	}
	if db != 0 {
		return protocol.ErrDBIndex
	}
	c.wr.WriteString("OK")
	return nil
}

// handleHello speaks RESP2 only. HELLO 3 gets NOPROTO, as from a Redis
// server that predates RESP3, and clients such as go-redis fall back to 2
// (and to AUTH for their password). Its AUTH option authenticates as AUTH
// does (auth.go).
func handleHello(c *conn, args [][]byte) error {
	if len(args) >= 2 {
		v, ok := protocol.ParseInt(args[1])
		if !ok {
			return protocol.ErrBadProtover
		}
		if v != 2 {
			return protocol.ErrNoProto
		}
	}
	var user, password []byte
	name, setName := "", false
	for i := 2; i < len(args); i++ {
		switch {
		case bytes.EqualFold(args[i], []byte("auth")) && i+2 < len(args):
			user, password = args[i+1], args[i+2]
			i += 2
		case bytes.EqualFold(args[i], []byte("setname")) && i+1 < len(args):
			if err := validClientName(args[i+1]); err != nil {
				return err
			}
			name, setName = string(args[i+1]), true
			i++
		default:
			return protocol.HelloOptionError(args[i])
		}
	}
	// As Redis: every option is checked before AUTH runs, and HELLO does
	// nothing more for a connection that has not authenticated.
	if user != nil {
		if err := c.authenticate(user, password); err != nil {
			return err
		}
	}
	if !c.authenticated() {
		return protocol.ErrHelloNoAuth
	}
	if setName {
		c.name = name
	}
	c.wr.WriteArray(14)
	c.wr.WriteBulkString("server")
	c.wr.WriteBulkString("leasehold")
	c.wr.WriteBulkString("version")
	c.wr.WriteBulkString(c.srv.cfg.Version)
	c.wr.WriteBulkString("proto")
	c.wr.WriteInt(2)
	c.wr.WriteBulkString("id")
	c.wr.WriteUint64(c.id)
	c.wr.WriteBulkString("mode")
	c.wr.WriteBulkString("standalone")
	c.wr.WriteBulkString("role")
	c.wr.WriteBulkString("master")
	c.wr.WriteBulkString("modules")
	c.wr.WriteArray(0)
	return nil
}

// validClientName applies Redis's rule: printable ASCII without spaces.
func validClientName(name []byte) error {
	for _, b := range name {
		if b < '!' || b > '~' {
			return protocol.ErrBadClientName
		}
	}
	return nil
}

func handleClient(c *conn, args [][]byte) error {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "id" && len(args) == 2:
		c.wr.WriteUint64(c.id)
	case sub == "getname" && len(args) == 2:
		if c.name == "" {
			c.wr.WriteNull()
		} else {
			c.wr.WriteBulkString(c.name)
		}
	case sub == "setname" && len(args) == 3:
		if err := validClientName(args[2]); err != nil {
			return err
		}
		c.name = string(args[2])
		c.wr.WriteString("OK")
	case sub == "setinfo" && len(args) == 4:
		switch strings.ToLower(string(args[2])) {
		case "lib-name":
			if err := validClientName(args[3]); err != nil {
				return err
			}
			c.libName = string(args[3])
		case "lib-ver":
			if err := validClientName(args[3]); err != nil {
				return err
			}
			c.libVer = string(args[3])
		default:
			return protocol.UnrecognizedOptionError(args[2])
		}
		c.wr.WriteString("OK")
	case sub == "info" && len(args) == 2:
		c.wr.WriteBulkString(c.describe() + "\n")
	case sub == "help":
		return writeHelpSubcommand(c, args)
	case sub == "unblock" && (len(args) == 3 || len(args) == 4):
		return clientUnblock(c, args[2:])
	case sub == "id" || sub == "getname" || sub == "setname" || sub == "setinfo" || sub == "info" || sub == "unblock":
		return protocol.ArityError("client|" + sub)
	default:
		return protocol.UnknownSubcommandError("client", args[1])
	}
	return nil
}

// clientUnblock serves CLIENT UNBLOCK id [TIMEOUT|ERROR] as Redis does: the
// connection id, if parked in ACQUIRE or MACQUIRE ... WAIT, gets the reply
// of a timeout (nil), or with ERROR the UNBLOCKED error, and the reply is 1;
// otherwise 0. A client gives up a wait this way without closing the
// connection it waits on.
func clientUnblock(c *conn, args [][]byte) error {
	asError := false
	if len(args) == 2 { // checked before the id, as Redis does
		switch strings.ToLower(string(args[1])) {
		case "timeout":
		case "error":
			asError = true
		default:
			return protocol.ErrUnblockReason
		}
	}
	// Redis reads a signed id: a negative one names nobody.
	id, err := strconv.ParseInt(string(args[0]), 10, 64)
	if err != nil {
		return protocol.ErrNotInteger
	}
	if target := c.srv.connByID(uint64(max(id, 0))); target != nil && c.mayUnblock(target) && target.unblockWait(asError) {
		c.wr.WriteInt(1)
	} else {
		c.wr.WriteInt(0)
	}
	return nil
}

func (c *conn) describe() string {
	return fmt.Sprintf("id=%d addr=%s laddr=%s name=%s db=0 lib-name=%s lib-ver=%s",
		c.id, c.remote, c.local, c.name, c.libName, c.libVer)
}

// handleHelp serves HELP [command] for people typing at a terminal (telnet,
// nc): the command table as lines, in the shape of Redis's CONFIG HELP, an
// array of status lines.
func handleHelp(c *conn, args [][]byte) error {
	switch len(args) {
	case 1:
		writeLines(c, protocol.HelpIndex())
	case 2:
		cmd := protocol.Lookup(args[1])
		if cmd == nil {
			return protocol.UnknownHelpError(args[1])
		}
		writeLines(c, cmd.Help())
	default:
		return protocol.ArityError("help")
	}
	return nil
}

// writeHelpSubcommand answers a command's HELP subcommand (CLIENT HELP,
// COMMAND HELP, CONFIG HELP), which Redis's error for an unknown subcommand
// tells the user to try, with HELP command's reply.
func writeHelpSubcommand(c *conn, args [][]byte) error {
	if len(args) != 2 {
		return protocol.ArityError(string(args[0]) + "|help")
	}
	writeLines(c, protocol.Lookup(args[0]).Help())
	return nil
}

func writeLines(c *conn, lines []string) {
	c.wr.WriteArray(len(lines))
	for _, l := range lines {
		c.wr.WriteString(l)
	}
}

// handleCommand reports the command table in Redis 7's shapes.
func handleCommand(c *conn, args [][]byte) error {
	if len(args) == 1 {
		c.wr.WriteArray(len(protocol.Commands))
		for i := range protocol.Commands {
			writeCommandInfo(c, &protocol.Commands[i])
		}
		return nil
	}
	switch sub := strings.ToLower(string(args[1])); sub {
	case "help":
		return writeHelpSubcommand(c, args)
	case "count":
		if len(args) != 2 {
			return protocol.ArityError("command|count")
		}
		c.wr.WriteInt(len(protocol.Commands))
	case "list":
		c.wr.WriteArray(len(protocol.Commands))
		for _, cmd := range protocol.Commands {
			c.wr.WriteBulkString(cmd.Name)
		}
	case "info":
		c.wr.WriteArray(len(args) - 2)
		for _, name := range args[2:] {
			if cmd := protocol.Lookup(name); cmd != nil {
				writeCommandInfo(c, cmd)
			} else {
				c.wr.WriteNull()
			}
		}
	case "docs":
		var cmds []*protocol.Command
		if len(args) == 2 {
			for i := range protocol.Commands {
				cmds = append(cmds, &protocol.Commands[i])
			}
		}
		for _, name := range args[2:] {
			if cmd := protocol.Lookup(name); cmd != nil {
				cmds = append(cmds, cmd)
			}
		}
		c.wr.WriteArray(2 * len(cmds))
		for _, cmd := range cmds {
			c.wr.WriteBulkString(cmd.Name)
			fields := 6
			if len(cmd.Args) > 0 {
				fields += 2
			}
			c.wr.WriteArray(fields)
			c.wr.WriteBulkString("summary")
			c.wr.WriteBulkString(cmd.Summary)
			c.wr.WriteBulkString("since")
			c.wr.WriteBulkString("0.1.0")
			c.wr.WriteBulkString("group")
			c.wr.WriteBulkString(cmd.Group)
			if len(cmd.Args) > 0 {
				c.wr.WriteBulkString("arguments")
				writeArgDocs(c, cmd.Args)
			}
		}
	default:
		return protocol.UnknownSubcommandError("command", args[1])
	}
	return nil
}

// writeArgDocs writes arguments as COMMAND DOCS does: a list of maps,
// flattened to arrays in RESP2.
func writeArgDocs(c *conn, args []protocol.Arg) {
	c.wr.WriteArray(len(args))
	for _, a := range args {
		var flags []string
		if a.Optional {
			flags = append(flags, "optional")
		}
		if a.Multiple {
			flags = append(flags, "multiple")
		}
		fields := 4
		if a.Token != "" {
			fields += 2
		}
		if len(flags) > 0 {
			fields += 2
		}
		if len(a.Args) > 0 {
			fields += 2
		}
		c.wr.WriteArray(fields)
		c.wr.WriteBulkString("name")
		c.wr.WriteBulkString(a.Name)
		c.wr.WriteBulkString("type")
		c.wr.WriteBulkString(a.Type)
		if a.Token != "" {
			c.wr.WriteBulkString("token")
			c.wr.WriteBulkString(a.Token)
		}
		if len(flags) > 0 {
			c.wr.WriteBulkString("flags")
			c.wr.WriteArray(len(flags))
			for _, f := range flags {
				c.wr.WriteString(f)
			}
		}
		if len(a.Args) > 0 {
			c.wr.WriteBulkString("arguments")
			writeArgDocs(c, a.Args)
		}
	}
}

func writeCommandInfo(c *conn, cmd *protocol.Command) {
	c.wr.WriteArray(10)
	c.wr.WriteBulkString(cmd.Name)
	c.wr.WriteInt(cmd.Arity)
	c.wr.WriteArray(len(cmd.Flags))
	for _, f := range cmd.Flags {
		c.wr.WriteString(f)
	}
	c.wr.WriteInt(cmd.FirstKey)
	c.wr.WriteInt(cmd.LastKey)
	c.wr.WriteInt(cmd.Step)
	c.wr.WriteArray(1)
	c.wr.WriteString("@" + cmd.Category) // ACL categories
	c.wr.WriteArray(0)                   // tips
	c.wr.WriteArray(0)                   // key specs
	c.wr.WriteArray(len(cmd.Subcommands))
	for _, sub := range cmd.Subcommands {
		c.wr.WriteArray(10)
		c.wr.WriteBulkString(cmd.Name + "|" + sub.Name)
		c.wr.WriteInt(sub.Arity)
		c.wr.WriteArray(0) // flags
		c.wr.WriteInt(0)
		c.wr.WriteInt(0)
		c.wr.WriteInt(0)
		c.wr.WriteArray(1)
		c.wr.WriteString("@" + sub.Category)
		c.wr.WriteArray(0)
		c.wr.WriteArray(0)
		c.wr.WriteArray(0)
	}
}

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
	c.tally.flush(c.counters) // the commands before INFO in its round count too
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
	for _, st := range s.commandStats() {
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
	for _, st := range s.commandStats() {
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
		{"maxmemory", strconv.FormatUint(s.mem.limit.Load(), 10)},
		{"maxmemory-policy", "noeviction"},
		{"protected-mode", yesNo(cfg.ProtectedMode)},
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

// yesNo is Redis's spelling of a boolean setting in CONFIG GET.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
