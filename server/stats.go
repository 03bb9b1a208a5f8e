package server

import (
	"runtime"
	"time"

	"github.com/leasehold/leasehold/internal/stats"
	"github.com/leasehold/leasehold/replica"
)

// StatsSnapshot reads every section of Stats. It reads the Go runtime's
// memory statistics, which stops the world briefly: call it at a scrape's
// pace, not per command.
func (s *Server) StatsSnapshot() stats.Stats {
	return stats.Stats{
		Version:     s.cfg.Version,
		Uptime:      time.Since(s.started),
		Clients:     s.clientStats(),
		Memory:      s.memoryStats(),
		Traffic:     s.trafficStats(),
		Locks:       s.lockStats(),
		Commands:    s.cmdStats.Commands(),
		Persistence: s.persistStats(),
		Cluster:     s.clusterStats(),
		Tokens:      s.tokenStats(),
	}
}

func (s *Server) clientStats() stats.ClientStats {
	return stats.ClientStats{
		Connected:        s.clientCount(),
		MaxClients:       s.maxClients(),
		Blocked:          s.stats.blocked.Load(),
		OutputBufferPeak: s.stats.outputPeak.Load(),
	}
}

func (s *Server) memoryStats() stats.MemoryStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return stats.MemoryStats{
		Used:         s.mem.Read(),
		Sys:          m.Sys,
		HeapReleased: m.HeapReleased,
		Max:          s.mem.Limit(),
		Refusals:     s.mem.Refusals(),
		ReturnsToOS:  s.mem.Returns(),
		GCCycles:     m.NumGC,
		GCPauseTotal: time.Duration(m.PauseTotalNs),
	}
}

func (s *Server) trafficStats() stats.TrafficStats {
	st := stats.TrafficStats{
		ConnectionsReceived:   s.stats.connectionsReceived.Load(),
		ConnectionsRejected:   s.stats.connectionsRejected.Load(),
		CommandsProcessed:     s.commandCount(),
		ProtocolErrors:        s.stats.protocolErrors.Load(),
		SecurityAttacks:       s.stats.securityAttacks.Load(),
		ACLDeniedAuth:         s.auth.failures.Load(),
		ACLDeniedCommand:      s.auth.deniedCmd.Load(),
		ACLDeniedKey:          s.auth.deniedKey.Load(),
		ACLDeniedChannel:      s.auth.deniedChannel.Load(),
		ACLDeniedTLSCert:      s.auth.deniedCert.Load(),
		ProtectedModeRefusals: s.auth.refused.Load(),
		HandlerPanics:         s.stats.panics.Load(),
		PubSubSlowClosed:      s.hub.dropped.Load(),
		OutputLimitCloses:     s.stats.outputLimitCloses.Load(),
		IdleCloses:            s.cmdStats.IdleCloses.Load(),
		EventsPublished:       s.hub.published.Load(),
		EventsDropped:         s.hub.eventsDropped.Load(),
	}
	st.NetInputBytes, st.NetOutputBytes = s.cmdStats.NetBytes()
	if s.tls != nil {
		st.TLS = true
		st.TLSHandshakeFailures = s.tls.failures.Load()
	}
	s.hub.mu.RLock()
	st.PubSubChannels = len(s.hub.channels)
	st.PubSubPatterns = len(s.hub.patterns)
	s.hub.mu.RUnlock()
	return st
}

func (s *Server) lockStats() stats.LockStats {
	st := s.lockTable().Stats()
	return stats.LockStats{
		Locks:             st.Locks,
		Held:              st.Held,
		Granted:           st.Granted,
		Renewed:           st.Renewed,
		Released:          st.Released,
		Expired:           st.Expired,
		Forced:            s.stats.forcedReleases.Load(),
		Delayed:           st.Delayed,
		Waits:             st.Waits,
		WaitGrants:        st.WaitGrants,
		WaitTimeouts:      s.stats.waitTimeouts.Load(),
		WaitCancels:       st.WaitCancels,
		ArenaBytes:        st.ArenaBytes,
		TableBytes:        st.TableBytes,
		MaxLocks:          s.lockTable().Config().MaxLocks,
		TableFullRefusals: st.TableFullRefusals,
		HeldExclusive:     st.Held - st.HeldShared - st.HeldPermits,
		HeldShared:        st.HeldShared,
		HeldPermits:       st.HeldPermits,
		HandOffs:          st.HandOffs,
		LockDelayRefusals: st.LockDelayRefusals,
		WaitTime:          st.WaitTime,
		HoldTime:          st.HoldTime,
		ReaperLateness:    st.ReaperLateness,
	}
}

func (s *Server) persistStats() *stats.PersistStats {
	if s.store == nil {
		return nil
	}
	st := s.store.Stats()
	ps := &stats.PersistStats{
		Dir:            s.cfg.Persist.Dir,
		Fsync:          st.Policy.String(),
		LogBytes:       st.LogBytes,
		SnapshotBytes:  st.SnapshotBytes,
		Compactions:    st.Compactions,
		LastCompaction: st.LastCompaction,
		Fsyncs:         st.Fsyncs,
		FsyncTotal:     st.FsyncTotal,
		LastFsync:      st.LastFsync,
		TokenCeiling:   st.TokenCeiling,
		OK:             st.Err == nil && st.WriteErr == nil,
		WriteFailures:  st.WriteFailures,
		FailingSince:   st.FailingSince,
		LastResume:     st.LastResume,
	}
	switch {
	case st.Err != nil:
		ps.Error = st.Err.Error()
	case st.WriteErr != nil:
		ps.Error = st.WriteErr.Error()
	}
	return ps
}

// clusterStats reads what CLUSTER INFO reports; nil on a single node.
func (s *Server) clusterStats() *replica.Stats {
	if s.replica == nil {
		return nil
	}
	st := s.replica.Stats()
	return &st
}
