package clusterinfo

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/replica"
)

// Info is CLUSTER INFO's text: field:value lines, as Redis's.
func Info(st replica.Stats) string {
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

// Nodes is CLUSTER NODES's text: a line per member, "id raft-addr
// flags leader-id": flags are myself, leader or follower, and voter or
// nonvoter.
func Nodes(self string, members []replica.Member, leaderID string) string {
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
