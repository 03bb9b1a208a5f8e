package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"
)

// Config is what a Node is made of. Start from DefaultConfig.
type Config struct {
	// NodeID names this member in the Raft configuration. It must stay the
	// same across restarts of the same data directory.
	NodeID string

	// RaftAddr is the HOST:PORT the node listens on for Raft traffic and
	// tells its peers; so HOST must be an address they can reach (not
	// 0.0.0.0). Port 0 picks a free port (tests); Node.Addr reports it.
	RaftAddr string

	// DataDir holds the node's Raft state under DataDir/raft: the log and
	// the term and vote (raft.db, or wal/ with LogStoreWAL) and snapshots/.
	DataDir string

	// LogStore is what keeps the Raft log and the term and vote:
	// LogStoreWAL or LogStoreBolt; "" (the default) is the kind the data
	// directory holds, LogStoreWAL for a new one. A data directory keeps
	// the kind it was created with; opening it with the other is refused.
	LogStore string

	// Bootstrap makes this node, if its stores are empty, the first member
	// of a new cluster: a configuration with itself as the only voter. It is
	// ignored when the stores hold state, so it is safe to leave on across
	// restarts of the first node.
	Bootstrap bool

	// Join lists Raft addresses of existing members. A node that starts
	// with empty stores (and neither Bootstrap nor Peers) asks them in
	// turn, in the background, to add it (Node.Joined); the one asked
	// passes the request once to its leader if it is not the leader, and
	// the leader adds the node the safe way (Node.Join). Ignored once the
	// node has Raft state.
	Join []string

	// Peers is a static initial configuration: every node started with the
	// same full list (this node included, at RaftAddr) and empty stores
	// bootstraps it, all as voters. Ignored once the node has Raft state.
	// Bootstrap, Peers and Join are exclusive.
	Peers []Peer

	// Seed, with Bootstrap, is called when the node starts a new group (its
	// stores are empty) for the state machine's first state, in the format
	// of its snapshots: the group starts from it (at index 1, term 1) in
	// place of an empty state, and nodes that join later receive it. It is
	// how a single node's data becomes a cluster's. Not with Peers: every
	// member of a static list would need the same seed.
	Seed func() ([]byte, error)

	// Recover, for disaster recovery only, makes this node, if its stores
	// hold state, the only voter of its group (hashicorp/raft's
	// RecoverCluster): for a group that lost its majority for good, or a
	// node restored from a copy of a data directory. Other members must
	// then join it again with wiped data directories. Entries this node
	// did not have are lost.
	Recover bool

	// Handler answers the requests other nodes send with Node.Forward:
	// called on the node that receives one (normally the leader), on a
	// goroutine per request, and its answer is sent back. nil refuses them
	// (Forward then fails with ErrNoHandler, not delivered). Node.Close
	// waits for calls in progress, so it must return in bounded time.
	Handler func(req []byte) []byte

	// FSM is the replicated state machine. If it also implements
	// raft.BatchingFSM, hashicorp/raft hands it batches of entries.
	FSM raft.FSM

	// Logger receives the node's and hashicorp/raft's log lines.
	Logger zerolog.Logger

	// HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout and
	// CommitTimeout are hashicorp/raft's (see raft.Config). The defaults are
	// raft.DefaultConfig's: 1 s, 1 s, 500 ms, 50 ms. A follower starts an
	// election after HeartbeatTimeout without hearing from the leader; a
	// leader steps down after LeaderLeaseTimeout without a quorum.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// SnapshotInterval, SnapshotThreshold and TrailingLogs are
	// hashicorp/raft's (raft.DefaultConfig's: check every 120 s, snapshot
	// when 8192 entries are past the last snapshot, keep 10240 entries
	// after one so a slightly lagging follower is caught up from the log
	// rather than by a snapshot install).
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64

	// TransferTimeout bounds the leadership transfer that Close of a leader
	// tries before shutting down.
	TransferTimeout time.Duration

	// CatchUpTimeout bounds how long Join waits for a new non-voter to
	// catch up before it would make it a voter.
	CatchUpTimeout time.Duration

	// TLS, when set, makes every Raft connection to and from this node
	// mutual TLS (TLS 1.2 at least); nil is plain TCP. Every node of a
	// cluster must have it, or none. It must hold:
	//   - Certificates: the node's certificate and key, used both to
	//     accept and to dial, so its extended key usage must allow server
	//     and client authentication (or GetCertificate and
	//     GetClientCertificate, to reload without a restart).
	//   - ClientCAs: the CA(s) a dialling peer's certificate must chain
	//     to. Its certificate is required (ClientAuth is forced to
	//     tls.RequireAndVerifyClientCert).
	//   - RootCAs: the CA(s) the certificate of a peer this node dials
	//     must chain to. Usually the same pool as ClientCAs.
	//   - ServerName: empty to verify a dialled peer's certificate against
	//     the host of its RaftAddr (so each node's certificate names its
	//     IP address or host name), or one fixed name that every node's
	//     certificate carries (e.g. "leasehold-raft"), which spares
	//     per-node certificates but no longer ties a certificate to an
	//     address.
	// InsecureSkipVerify and GetConfigForClient are refused. The config is
	// cloned; later changes to it have no effect.
	TLS *tls.Config

	// AllowedPeer, if set (TLS only), is asked about the common name of
	// every peer's verified certificate, in both directions, and a peer it
	// answers false for is refused during the handshake. Without it the
	// CA is the boundary: any certificate the CA signed for client
	// authentication may talk Raft to a node, so a CA shared with RESP
	// clients should come with an AllowedPeer naming the nodes.
	AllowedPeer func(cn string) bool
}

// DefaultConfig returns a Config with every default set; the caller fills in
// NodeID, RaftAddr, DataDir, FSM (and Bootstrap, Logger).
func DefaultConfig() Config {
	rc := raft.DefaultConfig()
	return Config{
		Logger:             zerolog.Nop(),
		HeartbeatTimeout:   rc.HeartbeatTimeout,
		ElectionTimeout:    rc.ElectionTimeout,
		LeaderLeaseTimeout: rc.LeaderLeaseTimeout,
		CommitTimeout:      rc.CommitTimeout,
		SnapshotInterval:   rc.SnapshotInterval,
		SnapshotThreshold:  rc.SnapshotThreshold,
		TrailingLogs:       rc.TrailingLogs,
		TransferTimeout:    2 * rc.ElectionTimeout,
		CatchUpTimeout:     30 * time.Second,
	}
}

// Validate reports the first thing wrong with c, nil if nothing is.
func (c Config) Validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("cluster: NodeID is empty")
	case c.DataDir == "":
		return errors.New("cluster: DataDir is empty")
	case c.FSM == nil:
		return errors.New("cluster: FSM is nil")
	case c.TransferTimeout <= 0:
		return errors.New("cluster: TransferTimeout must be positive")
	case c.CatchUpTimeout <= 0:
		return errors.New("cluster: CatchUpTimeout must be positive")
	case c.LogStore != "" && c.LogStore != LogStoreBolt && c.LogStore != LogStoreWAL:
		return fmt.Errorf("cluster: LogStore %q: want %q or %q", c.LogStore, LogStoreBolt, LogStoreWAL)
	}
	if err := c.validatePeers(); err != nil {
		return err
	}
	if c.TLS != nil {
		if err := validateTLS(c.TLS); err != nil {
			return err
		}
	} else if c.AllowedPeer != nil {
		return errors.New("cluster: AllowedPeer needs TLS")
	}
	host, _, err := net.SplitHostPort(c.RaftAddr)
	if err != nil {
		return fmt.Errorf("cluster: RaftAddr %q: %w", c.RaftAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("cluster: RaftAddr %q: peers cannot reach an unspecified host", c.RaftAddr)
	}
	if err := raft.ValidateConfig(c.raftConfig()); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// raftConfig is hashicorp/raft's configuration for c: raft.DefaultConfig
// with c's settings over it.
func (c Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotInterval = c.SnapshotInterval
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.TrailingLogs = c.TrailingLogs
	rc.Logger = newHclogAdapter(c.Logger, "raft")
	return rc
}
