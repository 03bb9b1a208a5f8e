package server

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/internal/keyslot"
	"github.com/leasehold/leasehold/protocol"
	"github.com/leasehold/leasehold/replica"
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
		c.wr.WriteBulkString(formatClusterInfo(r.Stats()))
	case "nodes":
		members, leaderID, err := r.Members()
		if err != nil {
			return protocol.ErrTryAgain
		}
		c.wr.WriteBulkString(formatClusterNodes(r.ID(), members, leaderID))
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
	b.WriteString(formatClusterInfo(s.replica.Stats()))
}

// formatClusterInfo is CLUSTER INFO's text: field:value lines, as Redis's.
func formatClusterInfo(st replica.Stats) string {
	state := "ok"
	if !st.LeaderKnown {
		state = "fail"
	}
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s:%s\r\n", k, v) }
	num := func(k string, v uint64) { line(k, strconv.FormatUint(v, 10)) }
	line("cluster_enabled", "1")
	line("cluster_state", state)
	line("cluster_role", st.Role)
	line("cluster_node_id", st.NodeID)
	line("cluster_raft_addr", st.RaftAddr)
	line("cluster_leader_id", st.LeaderID)
	line("cluster_leader_raft_addr", st.LeaderRaftAddr)
	num("cluster_term", st.Term)
	num("cluster_term_begun", st.TermBegun)
	num("cluster_fsm_term", st.FSMTerm)
	num("cluster_commit_index", st.CommitIndex)
	num("cluster_applied_index", st.AppliedIndex)
	num("cluster_last_log_index", st.LastLogIndex)
	num("cluster_last_snapshot_index", st.LastSnapshotIndex)
	line("cluster_last_contact", st.LastContact)
	line("cluster_known_nodes", strconv.Itoa(st.KnownNodes))
	line("cluster_heartbeat_fast_path", st.HeartbeatFastPath)
	num("cluster_proposed_entries", st.ProposedEntries)
	num("cluster_proposed_batches", st.ProposedBatches)
	line("cluster_settings", st.Settings)
	if st.SettingsMismatch() {
		line("cluster_settings_leader", st.SettingsLeader) // differs: lock commands are refused
	}
	return b.String()
}

// formatClusterNodes is CLUSTER NODES's text: a line per member, "id raft-addr
// flags leader-id": flags are myself, leader or follower, and voter or
// nonvoter.
func formatClusterNodes(self string, members []replica.Member, leaderID string) string {
	if leaderID == "" {
		leaderID = "-"
	}
	var b strings.Builder
	for _, s := range members {
		var flags []string
		if s.ID == self {
			flags = append(flags, "myself")
		}
		if s.Leader {
			flags = append(flags, "leader")
		} else {
			flags = append(flags, "follower")
		}
		if s.Voter {
			flags = append(flags, "voter")
		} else {
			flags = append(flags, "nonvoter")
		}
		fmt.Fprintf(&b, "%s %s %s %s\n", s.ID, s.Addr, strings.Join(flags, ","), leaderID)
	}
	return b.String()
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
