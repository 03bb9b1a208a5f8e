package server

import (
	"strings"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
)

// infoLimits is INFO's limits section: every bound the server holds a
// client to, set by a flag or fixed, in one place, under the names
// docs/limits.md gives them (a test keeps the two alike). Some also appear
// in the section Redis has them in (maxclients in clients, maxmemory in
// memory), for tools that read them there.
func (s *Server) infoLimits(b *strings.Builder) {
	cfg := s.cfg
	lc := s.lockTable().Config()
	// Connections and the wire.
	infoLine(b, "maxclients", s.maxClients())
	infoLine(b, "idle_timeout_ms", s.idleTimeout().Milliseconds())
	infoLine(b, "max_inline_len", cfg.Limits.MaxInlineLen)
	infoLine(b, "max_multibulk_len", cfg.Limits.MaxMultibulk)
	infoLine(b, "proto_max_bulk_len", cfg.Limits.MaxBulkLen)
	infoLine(b, "client_query_buffer_limit", cfg.Limits.MaxQueryBuffer)
	infoLine(b, "client_output_buffer_limit", cfg.OutputLimits)
	infoLine(b, "client_output_pause_bytes", outputPause)
	infoLine(b, "client_round_commands", roundCommands)
	infoLine(b, "client_round_input_bytes", roundInputBytes)
	infoLine(b, "client_round_time_us", roundTime.Microseconds())
	infoLine(b, "shutdown_timeout_ms", cfg.ShutdownTimeout.Milliseconds())
	// The lock table.
	infoLine(b, "maxmemory", s.mem.Limit())
	infoLine(b, "max_locks", lc.MaxLocks)
	infoLine(b, "max_ttl_ms", lc.MaxTTL.Milliseconds())
	infoLine(b, "max_key_len", lc.MaxKeyLen)
	infoLine(b, "max_permits", locker.MaxLimit)
	infoLine(b, "max_token", locker.MaxSafeToken)
	// One command's work and reply.
	infoLine(b, "max_multi_keys", protocol.MaxMultiKeys)
	infoLine(b, "max_ephemeral_per_conn", maxEphemeral)
	infoLine(b, "status_holders", locker.StatusHolders)
	infoLine(b, "holders_max_count", protocol.MaxHoldersCount)
	infoLine(b, "holders_page_bytes", locker.HolderPageBytes)
	infoLine(b, "locks_max_count", protocol.MaxLocksCount)
	infoLine(b, "locks_match_steps", locksMatchSteps)
	infoLine(b, "max_pattern_len", protocol.MaxPatternLen)
	// Subscriptions.
	infoLine(b, "max_subscribe_args", protocol.MaxSubscribeArgs)
	infoLine(b, "max_channels_per_conn", protocol.MaxChannelsPerConn)
	infoLine(b, "max_patterns_per_conn", protocol.MaxPatternsPerConn)
	infoLine(b, "max_pattern_backtrack", protocol.MaxPatternBacktrack)
	infoLine(b, "max_backtrack_per_conn", protocol.MaxBacktrackPerConn)
}
