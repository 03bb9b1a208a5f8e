package replica

import (
	"strconv"

	"github.com/leasehold/leasehold/cluster"
)

// Stats is this node's part in its Raft group, read once from raft's
// statistics and the state machine: what CLUSTER INFO lists and the
// metrics export.
type Stats struct {
	NodeID   string
	RaftAddr string
	Role     string // leader, leader-starting, candidate or follower
	// Leader: this node leads and its term has begun: it proposes.
	Leader                    bool
	LeaderKnown               bool
	LeaderID, LeaderRaftAddr  string // "" when no leader is known
	Term, TermBegun, FSMTerm  uint64
	CommitIndex, AppliedIndex uint64
	LastLogIndex              uint64
	LastSnapshotIndex         uint64
	LastContact               string // raft's words: "never", "0", or a duration
	KnownNodes                int
	HeartbeatFastPath         string // raft's heartbeat fast path: "off" (cluster.Node.Stats)
	ProposedEntries           uint64 // log entries this node proposed as leader through its combiner
	ProposedBatches           uint64 // the connections' batches (its own and those forwarded) they carried
	Settings                  string // this node's lock-table settings
	SettingsLeader            string // the leader's, when they differ ("" if not): lock commands are refused
}

// SettingsMismatch reports whether this node's lock-table settings differ
// from its leader's, so that it refuses lock commands.
func (s *Stats) SettingsMismatch() bool { return s.SettingsLeader != "" }

// Stats reads this node's statistics.
func (r *Replica) Stats() Stats {
	st := r.node.Stats()
	combined := r.combiner.Stats()
	s := Stats{
		NodeID:            r.node.ID(),
		RaftAddr:          st["raft_addr"],
		Leader:            r.Ready(),
		LeaderID:          st["leader_id"],
		LeaderRaftAddr:    st["leader_addr"],
		Term:              parseUint(st["term"]),
		TermBegun:         r.duties.Term(),
		FSMTerm:           r.fsm.Term(),
		CommitIndex:       parseUint(st["commit_index"]),
		AppliedIndex:      parseUint(st["applied_index"]),
		LastLogIndex:      parseUint(st["last_log_index"]),
		LastSnapshotIndex: parseUint(st["last_snapshot_index"]),
		LastContact:       st["last_contact"],
		KnownNodes:        int(parseUint(st["num_peers"])) + 1,
		HeartbeatFastPath: st["heartbeat_fast_path"],
		ProposedEntries:   combined.Entries,
		ProposedBatches:   combined.Members,
		Settings:          r.fsm.Settings(),
		SettingsLeader:    r.fsm.SettingsMismatch(),
	}
	s.LeaderKnown = s.LeaderID != ""
	switch {
	case s.Leader:
		s.Role = "leader"
	case r.node.IsLeader():
		s.Role = "leader-starting"
	case st["state"] == "Candidate":
		s.Role = "candidate"
	default:
		s.Role = "follower"
	}
	return s
}

// parseUint reads one of raft's numeric stats, 0 if it is not a number.
func parseUint(v string) uint64 {
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// Member is one member of the group, as this node knows it.
type Member = cluster.Server

// Members returns the latest configuration this node knows (committed or
// not), in configuration order, and the leader's id ("" if none is known).
func (r *Replica) Members() (members []Member, leaderID string, err error) {
	members, err = r.node.Servers()
	leaderID, _ = r.node.Leader()
	return members, leaderID, err
}
