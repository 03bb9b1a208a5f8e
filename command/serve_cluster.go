package command

import (
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/cluster"
	"github.com/urfave/cli/v2"
)

// clusterFlags are serve's cluster-mode flags (docs/cluster.md).
func clusterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "cluster", EnvVars: env("CLUSTER"), Usage: "run as a member of a Raft group that replicates the lock table (docs/cluster.md); needs --node-id, --raft-addr and --data-dir"},
		&cli.StringFlag{Name: "node-id", EnvVars: env("NODE_ID"), Usage: "cluster mode: this member's name in the group, the same across restarts"},
		&cli.StringFlag{Name: "raft-addr", EnvVars: env("RAFT_ADDR"), Usage: "cluster mode: HOST:PORT for traffic between members; the other members dial it, so not 0.0.0.0"},
		&cli.BoolFlag{Name: "bootstrap", EnvVars: env("BOOTSTRAP"), Usage: "cluster mode: make this node, if its data directory is new, the first member of a new group (safe to leave on across restarts)"},
	}
}

// clusterOnlyFlags mean nothing without --cluster.
var clusterOnlyFlags = []string{"node-id", "raft-addr", "bootstrap"}

// notInClusterMode are single-node flags that cluster mode refuses: the
// Raft log, not persist's, is what the data directory keeps.
var notInClusterMode = []string{"fsync", "restart-grace", "repair"}

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
