package server

import (
	"runtime"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/replica"
)

// Stats is a snapshot of the figures INFO reports, for an exporter of
// metrics (package admin). Each section is read by the function INFO's
// section renders from, so the two cannot disagree. Counters count from the
// start of the process; in cluster mode the lock table's counters count from
// the replica's last snapshot restore, which makes a new table. Reading
// takes no lock a command holds for long: counters are atomics, and the
// open connections' command counts are summed under the server's mutex,
// as INFO does.
type Stats struct {
	Version     string
	Uptime      time.Duration
	Clients     ClientStats
	Memory      MemoryStats
	Traffic     TrafficStats
	Locks       LockStats
	Commands    []CommandStats
	Persistence *PersistStats // nil without a data directory
	Cluster     *ClusterStats // nil on a single node
	Tokens      TokenStats    // INFO locks' last_token and token_headroom
}

// ClientStats is INFO's clients section.
type ClientStats struct {
	Connected        int   // open connections
	MaxClients       int   // the bound on them (--max-clients, fitted to the open-file limit)
	Blocked          int64 // connections parked in ACQUIRE or MACQUIRE ... WAIT
	OutputBufferPeak int64 // the most unsent output one connection has had, in bytes
}

// MemoryStats is INFO's memory section.
type MemoryStats struct {
	Used         uint64 // the Go heap in use, the reading --maxmemory is checked against
	Sys          uint64 // bytes obtained from the OS
	HeapReleased uint64 // heap bytes given back to the OS
	Max          uint64 // --maxmemory; 0 for no bound
	Refusals     uint64 // commands refused with OOM by --maxmemory
	ReturnsToOS  uint64 // times the memory watch gave freed heap back to the OS
	GCCycles     uint32
	GCPauseTotal time.Duration
}

// TrafficStats is INFO's stats section: connections, commands, and what was
// refused.
type TrafficStats struct {
	ConnectionsReceived   uint64 // accepted, whatever became of them
	ConnectionsRejected   uint64 // refused by --max-clients
	CommandsProcessed     uint64
	ProtocolErrors        uint64
	SecurityAttacks       uint64 // connections closed for sending HTTP (POST, Host:)
	TLS                   bool   // whether a TLS listener runs; TLSHandshakeFailures counts only then
	TLSHandshakeFailures  uint64
	ACLDeniedAuth         uint64 // AUTH and HELLO ... AUTH refused
	ACLDeniedCommand      uint64 // commands a user's rules refused
	ACLDeniedKey          uint64 // keys a user's rules refused
	ACLDeniedChannel      uint64 // channels a user's rules refused
	ACLDeniedTLSCert      uint64 // client certificates that named no usable user
	ProtectedModeRefusals uint64 // connections protected mode refused
	HandlerPanics         uint64
	PubSubChannels        int    // channels with a subscriber
	PubSubPatterns        int    // patterns with a subscriber
	PubSubSlowClosed      uint64 // subscribers closed for not reading their events
	OutputLimitCloses     uint64 // connections closed by their client output buffer limit
	NetInputBytes         uint64 // read from client sockets (under TLS, the encrypted bytes after the handshake)
	NetOutputBytes        uint64 // written to client sockets (likewise)
	IdleCloses            uint64 // connections closed by the idle timeout (--idle-timeout)
	// EventsPublished counts the lock events routed to subscribers (while
	// anyone subscribes; events nobody listens to are not made at all);
	// EventsDropped the messages of them a subscriber did not get, its
	// output being past its limit.
	EventsPublished, EventsDropped uint64
}

// LockStats is the counters of INFO's locks section.
type LockStats struct {
	Locks             int // locks in the table
	Held              int // live leases
	Granted           uint64
	Renewed           uint64
	Released          uint64
	Expired           uint64 // leases ended by their deadline: holders that did not renew
	Forced            uint64 // leases and lock-delays FORCE-RELEASE ended
	Delayed           uint64 // lock-delays begun by an expiry
	Waits             uint64 // requests queued by ACQUIRE ... WAIT
	WaitGrants        uint64 // waits granted from the queue
	WaitTimeouts      uint64 // waits that ended without the lock
	WaitCancels       uint64 // waits taken out of the queue
	ArenaBytes        int    // memory held for keys and owners
	TableBytes        int    // memory the table's structures hold
	MaxLocks          int    // --max-locks; 0 for no bound
	TableFullRefusals uint64 // new locks refused by --max-locks
	// HeldExclusive, HeldShared and HeldPermits split Held by mode: plain
	// leases, readers' (SHARED) and semaphore permits.
	HeldExclusive, HeldShared, HeldPermits int
	HandOffs                               uint64 // leases passed to a waiter as the lock freed
	LockDelayRefusals                      uint64 // ACQUIREs refused for a lock-delay
	// WaitTime, HoldTime and ReaperLateness are the lock table's
	// histograms (locker.Stats): queued to granted or given up, granted to
	// released or expired, and a lease's deadline to the reaper expiring it.
	WaitTime, HoldTime, ReaperLateness locker.Histogram
}

// PersistStats is INFO's persistence section, with a data directory.
type PersistStats struct {
	Dir            string
	Fsync          string // the policy: always, everysec or no
	LogBytes       int64  // the logs since the last snapshot
	SnapshotBytes  int64
	Compactions    int
	LastCompaction time.Time // zero before the first
	Fsyncs         uint64
	FsyncTotal     time.Duration // the time all fsyncs took
	LastFsync      time.Duration
	TokenCeiling   uint64 // fencing tokens are reserved on disk up to this one
	OK             bool   // false while writes fail or after the directory failed
	Error          string // the failure, "" when OK
	WriteFailures  uint64
	FailingSince   time.Time // zero when writes succeed
	LastResume     time.Time // zero for never
}

// ClusterStats is this node's part in its Raft group, as CLUSTER INFO
// shows it (replica.Stats).
type ClusterStats = replica.Stats

// StatsSnapshot reads every section of Stats. It reads the Go runtime's
// memory statistics, which stops the world briefly: call it at a scrape's
// pace, not per command.
func (s *Server) StatsSnapshot() Stats {
	return Stats{
		Version:     s.cfg.Version,
		Uptime:      time.Since(s.started),
		Clients:     s.clientStats(),
		Memory:      s.memoryStats(),
		Traffic:     s.trafficStats(),
		Locks:       s.lockStats(),
		Commands:    s.commandStats(),
		Persistence: s.persistStats(),
		Cluster:     s.clusterStats(),
		Tokens:      s.tokenStats(),
	}
}

func (s *Server) clientStats() ClientStats {
	return ClientStats{
		Connected:        s.clientCount(),
		MaxClients:       s.maxClients(),
		Blocked:          s.stats.blocked.Load(),
		OutputBufferPeak: s.stats.outputPeak.Load(),
	}
}

func (s *Server) memoryStats() MemoryStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return MemoryStats{
		Used:         s.mem.read(),
		Sys:          m.Sys,
		HeapReleased: m.HeapReleased,
		Max:          s.mem.limit.Load(),
		Refusals:     s.mem.refusals.Load(),
		ReturnsToOS:  s.mem.returns.Load(),
		GCCycles:     m.NumGC,
		GCPauseTotal: time.Duration(m.PauseTotalNs),
	}
}

func (s *Server) trafficStats() TrafficStats {
	st := TrafficStats{
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
		IdleCloses:            s.cmdStats.idleCloses.Load(),
		EventsPublished:       s.hub.published.Load(),
		EventsDropped:         s.hub.eventsDropped.Load(),
	}
	st.NetInputBytes, st.NetOutputBytes = s.netBytes()
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

func (s *Server) lockStats() LockStats {
	st := s.lockTable().Stats()
	return LockStats{
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

func (s *Server) persistStats() *PersistStats {
	if s.store == nil {
		return nil
	}
	st := s.store.Stats()
	ps := &PersistStats{
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
func (s *Server) clusterStats() *ClusterStats {
	if s.replica == nil {
		return nil
	}
	st := s.replica.Stats()
	return &st
}
