package server

import (
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/internal/clusterinfo"
	"github.com/leasehold/leasehold/internal/keyslot"
	"github.com/leasehold/leasehold/protocol"
)

// handleReadOnly is READONLY: stale reads from this node (see
// replicatedApplier.admit).
// On a single node every read is current anyway.
func handleReadOnly(c *conn, _ [][]byte) error {
	c.staleReads = true
	c.wr.WriteString("OK")
	return nil
}

// handleReadWrite is READWRITE: linearizable reads again.
func handleReadWrite(c *conn, _ [][]byte) error {
	c.staleReads = false
	c.wr.WriteString("OK")
	return nil
}

// handleCluster is CLUSTER: the Raft group as this node sees it, and its
// membership.
func handleCluster(c *conn, args [][]byte) error {
	sub := strings.ToLower(string(args[1]))
	if sub == "help" {
		return writeHelpSubcommand(c, args)
	}
	i := slices.IndexFunc(protocol.Lookup(args[0]).Subcommands, func(s protocol.Subcommand) bool { return s.Name == sub })
	if i < 0 {
		return protocol.UnknownSubcommandError("cluster", args[1])
	}
	if protocol.Lookup(args[0]).Subcommands[i].Arity != len(args) {
		return protocol.ArityError("cluster|" + sub)
	}
	r := c.srv.replica
	if r == nil {
		return protocol.ErrNotCluster
	}
	switch sub {
	case "info":
		c.wr.WriteBulkString(clusterinfo.Info(r.Stats()))
	case "nodes":
		members, leaderID, err := r.Members()
		if err != nil {
			return protocol.ErrTryAgain
		}
		c.wr.WriteBulkString(clusterinfo.Nodes(r.ID(), members, leaderID))
	case "myid":
		c.wr.WriteBulkString(r.ID())
	case "slots":
		return c.writeSlots()
	case "shards":
		return c.writeShards()
	case "keyslot":
		c.wr.WriteInt(int(keyslot.Of(args[2])))
	case "addnode":
		if err := r.AddNode(string(args[2]), string(args[3])); err != nil {
			return protocol.ClusterChangeError(err)
		}
		c.wr.WriteString("OK")
	case "forget":
		if err := r.Forget(string(args[2])); err != nil {
			return protocol.ClusterChangeError(err)
		}
		c.wr.WriteString("OK")
	case "snapshot":
		if err := r.Snapshot(); err != nil {
			return protocol.ClusterChangeError(err)
		}
		c.wr.WriteString("OK")
	}
	return nil
}

// infoCluster is INFO's cluster section: cluster_enabled, as Redis's, and
// in cluster mode CLUSTER INFO's lines.
func (s *Server) infoCluster(b *strings.Builder) {
	if s.replica == nil {
		infoLine(b, "cluster_enabled", 0)
		return
	}
	b.WriteString(clusterinfo.Info(s.replica.Stats()))
}

// Redis Cluster's routing, for clients that speak it (redis-cli -c,
// go-redis's ClusterClient): CLUSTER SLOTS and CLUSTER SHARDS describe one
// shard holding every slot, led by the Raft leader, and with --redirect a
// follower answers a command on a key with MOVED to the leader instead of
// forwarding it. During an election the answer is TRYAGAIN, never a MOVED
// toward a leader nobody knows (redis-cli would loop).

// announceAddr is the RESP address clients reach this node at.
func (s *Server) announceAddr() string {
	if s.cfg.AnnounceAddr != "" {
		return s.cfg.AnnounceAddr
	}
	if a := s.Addr(); a != nil {
		return a.String()
	}
	if a := s.TLSAddr(); a != nil {
		return a.String()
	}
	return ""
}

// writeSlots is CLUSTER SLOTS: every slot, on the leader.
func (c *conn) writeSlots() error {
	id, addr, err := c.srv.replica.LeaderRESP()
	if err != nil {
		return err
	}
	host, port := splitAddr(addr)
	c.wr.WriteArray(1)
	c.wr.WriteArray(3)
	c.wr.WriteInt(0)
	c.wr.WriteInt(keyslot.Slots - 1)
	c.wr.WriteArray(3)
	c.wr.WriteBulkString(host)
	c.wr.WriteInt(port)
	c.wr.WriteBulkString(id)
	return nil
}

// writeShards is CLUSTER SHARDS, Redis 7's shape: one shard, its slots and
// its one node, the leader.
func (c *conn) writeShards() error {
	id, addr, err := c.srv.replica.LeaderRESP()
	if err != nil {
		return err
	}
	host, port := splitAddr(addr)
	c.wr.WriteArray(1)
	c.wr.WriteArray(4)
	c.wr.WriteBulkString("slots")
	c.wr.WriteArray(2)
	c.wr.WriteInt(0)
	c.wr.WriteInt(keyslot.Slots - 1)
	c.wr.WriteBulkString("nodes")
	c.wr.WriteArray(1)
	c.wr.WriteArray(14)
	for _, kv := range [][2]string{{"id", id}, {"ip", host}, {"endpoint", host}, {"role", "master"}, {"health", "online"}} {
		c.wr.WriteBulkString(kv[0])
		c.wr.WriteBulkString(kv[1])
	}
	c.wr.WriteBulkString("port")
	c.wr.WriteInt(port)
	c.wr.WriteBulkString("replication-offset")
	c.wr.WriteInt64(int64(c.srv.replica.AppliedIndex()))
	return nil
}

// splitAddr splits HOST:PORT, a port it cannot read being 0.
func splitAddr(addr string) (host string, port int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	port, _ = strconv.Atoi(p)
	return h, port
}
