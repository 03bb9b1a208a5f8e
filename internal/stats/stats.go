package stats

import (
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/replica"
)

// Stats is a snapshot of the figures a server's INFO reports
// (server.Server.StatsSnapshot), for an exporter of metrics (package
// admin). The server reads each section with the function its INFO section
// renders from, so the two cannot disagree. Counters count from the
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
	Persistence *PersistStats  // nil without a data directory
	Cluster     *replica.Stats // nil on a single node, this node's part in its Raft group as CLUSTER INFO shows it
	Tokens      TokenStats     // INFO locks' last_token and token_headroom
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

// TokenStats is how far the fencing tokens have gone toward their bound,
// locker.MaxSafeToken (2^53 - 1, the largest integer a float64 holds
// exactly, so that every client language reads a token right).
type TokenStats struct {
	// Highest is the highest token the server has issued or must stay
	// above: the first token's floor (the boot-epoch token), the
	// reservation on disk with --data-dir, and in cluster mode the highest
	// key slot's counter or the term's floor.
	Highest uint64
	// Headroom is the tokens left: MaxSafeToken - Highest.
	Headroom uint64
}
