package server

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/leasehold/leasehold/contention"
	"github.com/leasehold/leasehold/internal/limits"
	"github.com/leasehold/leasehold/internal/tlsconf"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/persist"
	"github.com/leasehold/leasehold/protocol"
	"github.com/leasehold/leasehold/replica"
)

// DefaultPort is leasehold's own port, chosen to stay clear of Redis's 6379.
const DefaultPort = 7379

// Config holds every setting of a Server. Build it from DefaultConfig.
type Config struct {
	// Addr is the TCP address to listen on, HOST:PORT; port 0 picks a free
	// one. "" for no plain listener, with a TLS one (TLS.Addr), as Redis's
	// port 0 beside tls-port.
	Addr string
	// MaxClients bounds open connections; one more is told so and closed.
	// New lowers the bound it enforces, with a warning, where the open-file
	// limit cannot serve that many (limits.FitMaxClients).
	MaxClients int
	// IdleTimeout closes a connection that sends nothing for this long; 0
	// never does (Redis's "timeout 0").
	IdleTimeout time.Duration
	// IOLoops is the number of epoll event loops serving connections (Linux
	// only); 0 serves each connection on a goroutine of its own instead.
	IOLoops int
	// Limits bound what one client can make the server buffer. Their
	// PreAuth is set per connection: for one that has not authenticated.
	Limits protocol.ReaderLimits
	// OutputLimits disconnect a client whose replies or messages pile up
	// unread, as Redis's client-output-buffer-limit.
	OutputLimits limits.OutputLimits
	// Locker configures the lock table.
	Locker locker.Config
	// Persist configures the data directory; without a Dir nothing touches
	// disk.
	Persist PersistConfig
	// ShutdownTimeout bounds Close: the time it gives connections to finish
	// the commands in hand and take their replies before it closes them
	// regardless, and goes on to release their EPHEMERAL leases and sync the
	// data directory.
	ShutdownTimeout time.Duration
	// Version is reported by INFO and HELLO.
	Version string
	// MaxMemory bounds the Go heap in use, in bytes, as Redis's maxmemory
	// with its noeviction policy: while over it, commands that would make a
	// lock or a lease (ACQUIRE, MACQUIRE, CREATE) get -OOM, and every other
	// command goes on. The heap is sampled every 100 ms. 0 for no bound.
	MaxMemory int64
	// RequirePass is the default user's password, as Redis's requirepass:
	// when set, a connection runs nothing but AUTH, HELLO and QUIT until it
	// authenticates, and is held to Redis's pre-auth input limits
	// (protocol.PreAuthMaxMultibulk, protocol.PreAuthMaxBulkLen). The server
	// keeps only its SHA-256 digest. "" for none.
	RequirePass string
	// ACLFile is a file of users, in Redis's ACL file syntax (one "user
	// <name> <rules...>" a line; docs/security.md), read by New and again
	// by ReloadACL. If it defines the default user, RequirePass must be
	// empty; if not, the default user has RequirePass, or is off without
	// one. "" for none: the default user is then the only one.
	ACLFile string
	// ProtectedMode, as Redis's protected-mode: while the default user is
	// on and nopass (no RequirePass, no ACLFile saying otherwise), a
	// connection from a peer that is not loopback is told why and closed.
	ProtectedMode bool
	// PeerIsLoopback, for tests only, decides which peers protected mode
	// counts as loopback in place of the real check; nil otherwise.
	PeerIsLoopback func(net.Addr) bool

	// TLS configures a TLS listener beside (or instead of) Addr's.
	TLS tlsconf.Config

	// Cluster, when set, makes the server a member of a Raft group that
	// replicates its lock table (cluster mode, cluster.go): its NodeID,
	// RaftAddr and DataDir, with Bootstrap, Join or Peers. New fills in FSM
	// and Logger. Persist must be empty (the group's log is the data
	// directory), and connections are served on goroutines (IOLoops is
	// taken as 0). nil for a single node.
	Cluster *replica.NodeConfig
	// ClusterTLS, with Cluster, makes every connection between nodes mutual
	// TLS (replica.TLSConfig); nil for plain TCP.
	ClusterTLS *replica.TLSConfig
	// Redirect, with Cluster, makes a follower answer a command on a key
	// with Redis Cluster's MOVED to the leader's address instead of
	// forwarding it (cluster_redirect.go).
	Redirect bool
	// SlowlogSlowerThan logs, in SLOWLOG, the commands that run at least
	// this many microseconds, as Redis's slowlog-log-slower-than: negative
	// logs none (and reads no clock), 0 every command.
	SlowlogSlowerThan int64
	// SlowlogMaxLen is how many entries SLOWLOG keeps, the newest.
	SlowlogMaxLen int
	// LockStatsTop is how many of the hottest locks LOCKSTATS reports at
	// most (contention.Config.Top; its shards track a few more between
	// them, contention.Config.PerShard). 0 turns lock statistics off: the
	// lock table then tells no observer of its events, and builds them
	// only while someone subscribes.
	LockStatsTop int

	// AnnounceAddr, with Cluster, is the HOST:PORT clients reach this node's
	// RESP listener at, as CLUSTER SLOTS and MOVED give it; "" for the
	// plain listener's address (the TLS listener's if there is none).
	AnnounceAddr string
}

// DefaultConfig returns a Config with every default set. The bulk length
// limit is far below Redis's 512 MiB: no lock command needs more than a key
// and an owner id, so 1 MiB bounds what a stranger can make us hold.
func DefaultConfig() Config {
	reader := protocol.DefaultReaderLimits()
	reader.MaxBulkLen = 1 << 20
	reader.MaxQueryBuffer = 64 << 20
	return Config{
		Addr:         fmt.Sprintf("127.0.0.1:%d", DefaultPort),
		MaxClients:   10000,
		IOLoops:      defaultIOLoops,
		Limits:       reader,
		OutputLimits: limits.DefaultOutputLimits(),
		Locker:       locker.DefaultConfig(),
		// Well inside the time a service manager gives before SIGKILL
		// (Kubernetes: 30 s; systemd: 90 s).
		ShutdownTimeout: 10 * time.Second,
		Version:         "dev",
		ProtectedMode:   true,
		TLS:             tlsconf.Default(),
		// The slowlog's are Redis's defaults.
		SlowlogSlowerThan: 10000,
		SlowlogMaxLen:     128,
		LockStatsTop:      contention.DefaultTop, // on: about a hash and a load an event for a lock not tracked (docs/performance.md)
	}
}

// Validate reports the first setting out of range; it never changes c.
func (c Config) Validate() error {
	if c.Addr == "" && c.TLS.Addr == "" {
		return errors.New("server: no address to listen on: set addr, tls addr, or both")
	}
	if _, _, err := net.SplitHostPort(c.Addr); c.Addr != "" && err != nil {
		return fmt.Errorf("server: addr %q: %w", c.Addr, err)
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if c.MaxClients < 1 {
		return fmt.Errorf("server: max clients must be positive, got %d", c.MaxClients)
	}
	if c.IOLoops < 0 || c.IOLoops > 1024 {
		return fmt.Errorf("server: io loops must be between 0 and 1024, got %d", c.IOLoops)
	}
	if c.IdleTimeout < 0 {
		return errors.New("server: idle timeout must not be negative")
	}
	if c.MaxMemory < 0 {
		return fmt.Errorf("server: maxmemory must not be negative (0 for no bound), got %d", c.MaxMemory)
	}
	if c.ShutdownTimeout <= 0 {
		return fmt.Errorf("server: shutdown timeout must be positive, got %s", c.ShutdownTimeout)
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if err := c.OutputLimits.Validate(); err != nil {
		return err
	}
	if c.Persist.RestartGrace < 0 || c.Persist.RestartGrace > c.Locker.MaxTTL {
		return fmt.Errorf("server: restart grace must be between 0 and the max ttl %s, got %s", c.Locker.MaxTTL, c.Persist.RestartGrace)
	}
	if c.SlowlogMaxLen < 0 {
		return fmt.Errorf("server: slowlog max len must not be negative, got %d", c.SlowlogMaxLen)
	}
	if c.LockStatsTop < 0 || c.LockStatsTop > maxLockStatsTop {
		return fmt.Errorf("server: lockstats top must be between 0 and %d, got %d", maxLockStatsTop, c.LockStatsTop)
	}
	if c.Cluster != nil && c.Persist.Dir != "" {
		return errors.New("server: cluster mode keeps its state in the cluster's data directory; Persist.Dir must be empty")
	}
	if c.Cluster == nil {
		switch {
		case c.ClusterTLS != nil:
			return errors.New("server: ClusterTLS is for cluster mode only; it must be nil without Cluster")
		case c.Redirect:
			return errors.New("server: Redirect is for cluster mode only; it must be false without Cluster")
		case c.AnnounceAddr != "":
			return errors.New("server: AnnounceAddr is for cluster mode only; it must be empty without Cluster")
		}
	}
	return c.Locker.Validate()
}

// PersistConfig is the data directory's part of Config.
type PersistConfig struct {
	// Dir is the data directory; empty for none.
	Dir string
	// Fsync is when the log is fsynced (always, everysec, no).
	Fsync persist.Policy
	// Repair starts on a damaged directory by dropping everything from the
	// damage on, instead of refusing to start.
	Repair bool
	// RestartGrace extends every lease live at start to at least this long
	// after the start, so holders can renew after the outage.
	RestartGrace time.Duration
	// CompactBytes is the log size that triggers compaction (with twice the
	// last snapshot's size); 0 for persist.DefaultCompactBytes.
	CompactBytes int64
	// TimeSource reads the machine's boot id and clocks, by which restored
	// deadlines are converted; nil for the machine's own. Tests fake it.
	TimeSource persist.TimeSource
	// Fault, for tests only, fails the log's writes and fsyncs
	// (persist.Options.Fault); nil otherwise.
	Fault func(op string) error
}
