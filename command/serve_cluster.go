package command

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/replica"
	"github.com/urfave/cli/v2"
)

// clusterFlags are serve's cluster-mode flags (docs/cluster.md).
func clusterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "cluster", EnvVars: env("CLUSTER"), Usage: "run as a member of a Raft group that replicates the lock table (docs/cluster.md); needs --node-id, --raft-addr and --data-dir"},
		&cli.StringFlag{Name: "node-id", EnvVars: env("NODE_ID"), Usage: "cluster mode: this member's name in the group, the same across restarts"},
		&cli.StringFlag{Name: "raft-addr", EnvVars: env("RAFT_ADDR"), Usage: "cluster mode: HOST:PORT for traffic between members; the other members dial it, so not 0.0.0.0"},
		&cli.BoolFlag{Name: "bootstrap", EnvVars: env("BOOTSTRAP"), Usage: "cluster mode: make this node, if its data directory is new, the first member of a new group (safe to leave on across restarts)"},
		&cli.StringFlag{Name: "join", EnvVars: env("JOIN"), Usage: "cluster mode: comma-separated --raft-addr of members of an existing group; a node with a new data directory asks them to add it (as a non-voter until it has caught up), and keeps asking until one does"},
		&cli.StringFlag{Name: "peers", EnvVars: env("PEERS"), Usage: "cluster mode: the group's first members, id=HOST:PORT comma-separated (their --raft-addr), given alike to each of them in place of --bootstrap and --join"},
		&cli.DurationFlag{Name: "raft-heartbeat-timeout", Value: cluster.DefaultConfig().HeartbeatTimeout, EnvVars: env("RAFT_HEARTBEAT_TIMEOUT"), Usage: "cluster mode: a follower that hears nothing from the leader this long starts an election (randomised up to twice this), and a leader steps down after half of it without a quorum; shorter fails over faster, but a pause or a slow disk this long costs an election"},
		&cli.StringFlag{Name: "raft-log-store", EnvVars: env("RAFT_LOG_STORE"), DefaultText: "the data directory's; wal for a new one", Usage: "cluster mode: what keeps the Raft log: wal (hashicorp/raft-wal, one fsync per write: about a third more lock cycles a second than bolt, docs/cluster.md) or bolt (raft-boltdb, two fsyncs per write, what Consul has run for years); a data directory keeps the one it was created with"},
		&cli.BoolFlag{Name: "redirect", EnvVars: env("REDIRECT"), Usage: "cluster mode: a follower answers a command on a key with Redis Cluster's MOVED to the leader (for redis-cli -c and go-redis's ClusterClient) instead of forwarding it"},
		&cli.StringFlag{Name: "announce-addr", EnvVars: env("ANNOUNCE_ADDR"), Usage: "cluster mode: HOST:PORT clients reach this node's RESP listener at, as CLUSTER SLOTS and MOVED give it (default: --addr's)"},
		&cli.BoolFlag{Name: "recover", EnvVars: env("RECOVER"), Usage: "cluster mode, disaster recovery only: make this node, from its data directory, the only voter of its group (a group that lost its majority for good, or a node restored from a backup); the others then join it again with empty data directories (docs/cluster.md)"},
		&cli.BoolFlag{Name: "cluster-tls", EnvVars: env("CLUSTER_TLS"), Usage: "cluster mode: mutual TLS between nodes, with --tls-cert-file, --tls-key-file and --tls-ca-cert-file unless the --cluster-tls-* files are given; the certificate must allow server and client authentication"},
		&cli.StringFlag{Name: "cluster-tls-cert-file", EnvVars: env("CLUSTER_TLS_CERT_FILE"), Usage: "cluster mode: the node's certificate between nodes, PEM; read again on SIGHUP"},
		&cli.StringFlag{Name: "cluster-tls-key-file", EnvVars: env("CLUSTER_TLS_KEY_FILE"), Usage: "cluster mode: that certificate's key, PEM"},
		&cli.StringFlag{Name: "cluster-tls-ca-cert-file", EnvVars: env("CLUSTER_TLS_CA_CERT_FILE"), Usage: "cluster mode: the CA every node's certificate must chain to, PEM"},
		&cli.StringFlag{Name: "cluster-tls-server-name", EnvVars: env("CLUSTER_TLS_SERVER_NAME"), Usage: "cluster mode: a name every node's certificate carries (default: verify each node against the host of its --raft-addr)"},
		&cli.StringFlag{Name: "cluster-tls-allowed-cn", EnvVars: env("CLUSTER_TLS_ALLOWED_CN"), Usage: "cluster mode: comma-separated common names a node's certificate may have; others are refused in the handshake (default: any certificate of the CA)"},
	}
}

// clusterTLSFlags mean nothing without --cluster-tls.
var clusterTLSFlags = []string{"cluster-tls-cert-file", "cluster-tls-key-file", "cluster-tls-ca-cert-file", "cluster-tls-server-name", "cluster-tls-allowed-cn"}

// clusterTLSConfig reads the --cluster-tls flags: nil without
// --cluster-tls. The files default to the RESP listener's.
func clusterTLSConfig(c *cli.Context) (*replica.TLSConfig, error) {
	str := func(name string) string { return flag(c, name).String(name) }
	if !flag(c, "cluster-tls").Bool("cluster-tls") {
		if given := givenFlags(c, clusterTLSFlags); len(given) > 0 {
			return nil, fmt.Errorf("%s need --cluster-tls", strings.Join(given, ", "))
		}
		return nil, nil
	}
	or := func(name, fallback string) string {
		if v := str(name); v != "" {
			return v
		}
		return str(fallback)
	}
	cfg := &replica.TLSConfig{
		CertFile:   or("cluster-tls-cert-file", "tls-cert-file"),
		KeyFile:    or("cluster-tls-key-file", "tls-key-file"),
		CACertFile: or("cluster-tls-ca-cert-file", "tls-ca-cert-file"),
		ServerName: str("cluster-tls-server-name"),
	}
	for _, cn := range strings.Split(str("cluster-tls-allowed-cn"), ",") {
		if cn = strings.TrimSpace(cn); cn != "" {
			cfg.AllowedCNs = append(cfg.AllowedCNs, cn)
		}
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" || cfg.CACertFile == "" {
		return nil, errors.New("--cluster-tls needs a certificate, its key and a CA: --cluster-tls-cert-file, --cluster-tls-key-file and --cluster-tls-ca-cert-file, or the --tls-* files")
	}
	return cfg, nil
}

// clusterOnlyFlags mean nothing without --cluster.
var clusterOnlyFlags = append([]string{"node-id", "raft-addr", "bootstrap", "join", "peers", "recover", "redirect", "announce-addr", "raft-heartbeat-timeout", "raft-log-store", "cluster-tls"}, clusterTLSFlags...)

// notInClusterMode are single-node flags that cluster mode refuses: the
// Raft log, not persist's, is what the data directory keeps.
var notInClusterMode = []string{"fsync", "repair"}

// clusterConfig reads the cluster flags: nil without --cluster.
func clusterConfig(c *cli.Context, dataDir string) (*cluster.Config, error) {
	str := func(name string) string { return flag(c, name).String(name) }
	if !flag(c, "cluster").Bool("cluster") {
		if given := givenFlags(c, clusterOnlyFlags); len(given) > 0 {
			return nil, fmt.Errorf("%s only mean something with --cluster", strings.Join(given, ", "))
		}
		return nil, nil
	}
	if given := givenFlags(c, notInClusterMode); len(given) > 0 {
		return nil, fmt.Errorf("%s are single-node settings: in cluster mode the Raft log in --data-dir keeps the state (docs/cluster.md)", strings.Join(given, ", "))
	}
	if dataDir == "" {
		return nil, errors.New("--cluster needs --data-dir: a member keeps its Raft log and snapshots there")
	}
	cfg := cluster.DefaultConfig()
	cfg.NodeID = str("node-id")
	cfg.RaftAddr = str("raft-addr")
	cfg.DataDir = dataDir
	cfg.Bootstrap = flag(c, "bootstrap").Bool("bootstrap")
	cfg.Recover = flag(c, "recover").Bool("recover")
	cfg.LogStore = str("raft-log-store")
	if hb := flag(c, "raft-heartbeat-timeout").Duration("raft-heartbeat-timeout"); hb != cfg.HeartbeatTimeout {
		if hb < 50*time.Millisecond {
			return nil, fmt.Errorf("--raft-heartbeat-timeout %s: at least 50ms", hb)
		}
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = hb, hb, hb/2
		cfg.TransferTimeout = 2 * hb
	}
	for _, addr := range strings.Split(str("join"), ",") {
		if addr = strings.TrimSpace(addr); addr != "" {
			cfg.Join = append(cfg.Join, addr)
		}
	}
	for _, p := range strings.Split(str("peers"), ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		id, addr, ok := strings.Cut(p, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("--peers %q: want id=HOST:PORT, comma-separated", p)
		}
		cfg.Peers = append(cfg.Peers, cluster.Peer{ID: id, Addr: addr})
	}
	switch {
	case cfg.NodeID == "":
		return nil, errors.New("--cluster needs --node-id: this member's name in the group")
	case cfg.RaftAddr == "":
		return nil, errors.New("--cluster needs --raft-addr: the HOST:PORT the other members dial")
	}
	return &cfg, nil // the rest is checked by cluster.Open

}

// givenFlags returns those of names set on the command line or in the
// environment, as --flags.
func givenFlags(c *cli.Context, names []string) []string {
	var given []string
	for _, name := range names {
		if flag(c, name).IsSet(name) {
			given = append(given, "--"+name)
		}
	}
	return given
}
