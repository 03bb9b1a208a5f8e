package server

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/internal/keyslot"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
	"github.com/leasehold/leasehold/replica"
)

// clusterHandlersByName replace, in cluster mode, the handlers of the
// commands that change the lock table (they propose) and of those that read
// it (they linearize first). Parsing, ownership scopes and replies are the
// single node's.
var clusterHandlersByName = map[string]handler{
	"create":        clusterCreate,
	"acquire":       clusterAcquire,
	"macquire":      clusterMAcquire,
	"mrelease":      clusterMRelease,
	"release":       clusterRelease,
	"extend":        clusterExtend,
	"delete":        clusterDelete,
	"force-release": clusterForceRelease,
	"verify":        linearized(handleVerify),
	"status":        linearized(handleStatus),
	"holders":       linearized(handleHolders),
	"locks":         linearized(handleLocks),
}

// batchableCommands marks, in cluster mode, the commands whose handlers
// queue proposals (those in clusterHandlersByName that change the table).
func batchableCommands(clustered bool) []bool {
	if !clustered {
		return nil
	}
	marks := make([]bool, len(protocol.Commands))
	for i, cmd := range protocol.Commands {
		switch cmd.Name {
		case "create", "acquire", "macquire", "mrelease", "release", "extend", "delete", "force-release":
			marks[i] = true
		}
	}
	return marks
}

// sameSettings refuses h on a node whose lock-table settings differ from
// the leader's (replica.Replica.SettingsMismatch): its answers, and its table
// if it became the leader, would not be the group's.
func sameSettings(h handler) handler {
	return func(c *conn, args [][]byte) error {
		r := c.srv.replica
		if leader := r.SettingsMismatch(); leader != "" {
			return protocol.SettingsMismatchError(r.Settings(), leader)
		}
		return h(c, args)
	}
}

// linearized runs h once every change acknowledged before the command
// arrived is in the table it reads (replica.Replica.Linearize). Every command of a
// round arrived before its first ran (the goroutine transport reads no more
// until the round's replies are flushed), so one check serves the round's
// reads.
func linearized(h handler) handler {
	return func(c *conn, args [][]byte) error {
		if !c.linearized && !c.staleReads {
			if err := c.srv.replica.Linearize(); err != nil {
				return err
			}
			c.linearized = true
		}
		return h(c, args)
	}
}

// handleReadOnly is READONLY: stale reads from this node (see linearized).
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

// replyBool is the finish of a command whose reply is 1 when it was
// granted (CREATE created, RELEASE released, ...).
func (c *conn) replyBool(_ []lockfsm.Command, res []lockfsm.Result) error {
	if res[0].Err != nil {
		return res[0].Err
	}
	protocol.WriteBool(c.wr, res[0].Granted)
	return nil
}

func clusterCreate(c *conn, args [][]byte) error {
	req, err := protocol.ParseCreate(args)
	if err != nil {
		return err
	}
	c.queueProposal(c.replyBool, lockfsm.Command{Op: lockfsm.OpCreate, Key: req.Key, Options: createOptions(req)})
	return nil
}

func clusterAcquire(c *conn, args [][]byte) error {
	req, err := protocol.ParseAcquire(args)
	if err != nil {
		return err
	}
	if req.Ephemeral {
		if err := c.roomForEphemeral(1); err != nil {
			return err
		}
	}
	if req.Wait > 0 {
		return clusterAcquireWaiting(c, req)
	}
	ephemeral := req.Ephemeral
	c.queueProposal(func(cmds []lockfsm.Command, res []lockfsm.Result) error {
		r := res[0]
		if r.Err != nil {
			return r.Err
		}
		if r.Granted {
			c.srv.ties.granted(c, cmds[0].Key, r.Token, ephemeral)
		}
		protocol.WriteToken(c.wr, r.Token, r.Granted)
		return nil
	}, lockfsm.Command{Op: lockfsm.OpAcquire, Key: req.Key, TTL: req.TTL, Owner: c.scopedOwner(req.Owner), Shared: req.Shared})
	return nil
}

func clusterMAcquire(c *conn, args [][]byte) error {
	req, err := protocol.ParseMAcquire(args)
	if err != nil {
		return err
	}
	if req.Ephemeral {
		if err := c.roomForEphemeral(len(req.Keys)); err != nil {
			return err
		}
	}
	if req.Wait > 0 {
		return clusterMAcquireWaiting(c, req)
	}
	ephemeral := req.Ephemeral
	c.queueProposal(func(cmds []lockfsm.Command, res []lockfsm.Result) error {
		r := res[0]
		if r.Err != nil {
			return r.Err
		}
		var tokens []uint64
		if r.Granted {
			tokens = r.Tokens
			c.tieAll(cmds[0].Keys, tokens, ephemeral)
		}
		protocol.WriteTokens(c.wr, tokens)
		return nil
	}, lockfsm.Command{Op: lockfsm.OpAcquireAll, Keys: req.Keys, TTL: req.TTL, Owner: c.scopedOwner(req.Owner), Shared: req.Shared})
	return nil
}

func clusterMRelease(c *conn, args [][]byte) error {
	req, err := protocol.ParseMRelease(args)
	if err != nil {
		return err
	}
	cmds := make([]lockfsm.Command, len(req.Keys))
	for j, key := range req.Keys {
		cmds[j] = lockfsm.Command{Op: lockfsm.OpRelease, Key: key, Token: req.Tokens[j], Scope: c.ownerScope()}
	}
	c.queueProposal(func(cmds []lockfsm.Command, res []lockfsm.Result) error {
		released := 0
		for j, r := range res {
			if r.Granted {
				c.srv.ties.untie(c, cmds[j].Key, cmds[j].Token)
				released++
			}
		}
		c.wr.WriteInt(released)
		return nil
	}, cmds...)
	return nil
}

func clusterRelease(c *conn, args [][]byte) error {
	req, err := protocol.ParseToken(args)
	if err != nil {
		return err
	}
	c.queueProposal(func(cmds []lockfsm.Command, res []lockfsm.Result) error {
		if res[0].Granted {
			c.srv.ties.untie(c, cmds[0].Key, cmds[0].Token)
		}
		protocol.WriteBool(c.wr, res[0].Granted)
		return nil
	}, lockfsm.Command{Op: lockfsm.OpRelease, Key: req.Key, Token: req.Token, Scope: c.ownerScope()})
	return nil
}

func clusterExtend(c *conn, args [][]byte) error {
	req, err := protocol.ParseExtend(args)
	if err != nil {
		return err
	}
	c.queueProposal(c.replyBool, lockfsm.Command{Op: lockfsm.OpExtend, Key: req.Key, Token: req.Token, TTL: req.TTL, Scope: c.ownerScope()})
	return nil
}

func clusterDelete(c *conn, args [][]byte) error {
	c.queueProposal(c.replyBool, lockfsm.Command{Op: lockfsm.OpDelete, Key: args[1]})
	return nil
}

func clusterForceRelease(c *conn, args [][]byte) error {
	req, err := protocol.ParseForceRelease(args)
	if err != nil {
		return err
	}
	req.Key = cloneBytes(req.Key)                  // logged once applied; the reader reuses args
	if !req.All && req.Token == locker.AllLeases { // token 0, given, names no lease
		c.queueProposal(func([]lockfsm.Command, []lockfsm.Result) error {
			c.logForceRelease(req, 0)
			c.wr.WriteInt(0)
			return nil
		})
		return nil
	}
	c.queueProposal(func(_ []lockfsm.Command, res []lockfsm.Result) error {
		c.logForceRelease(req, res[0].N)
		c.wr.WriteInt(res[0].N)
		return nil
	}, lockfsm.Command{Op: lockfsm.OpForceRelease, Key: req.Key, Token: req.Token})
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
