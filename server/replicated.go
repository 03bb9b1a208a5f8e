package server

import (
	"encoding/binary"
	"slices"

	"github.com/leasehold/leasehold/internal/keyslot"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
	"github.com/leasehold/leasehold/replica"
)

// replicatedApplier runs lock commands in cluster mode, through the Raft
// log (package replica): a connection's changes are queued and proposed
// one entry per round (replicated_batch.go), its waits queue in the
// replicated table (replicated_wait.go), and its reads are linearizable
// unless it asked for READONLY.
type replicatedApplier struct {
	r        *replica.Replica
	redirect bool // Config.Redirect: MOVED on a follower
}

// lockCommands marks, by index in protocol.Commands, the commands that run
// on the lock table (the lock group and the Redis commands): those the
// applier admits. readCommands marks those that only
// read the table (Redis's "readonly" flag), lockWriteCommands those that
// change it ("write"), which a connection proposes together in cluster mode.
var (
	lockCommands      = lockCommandsFlagged("")
	readCommands      = lockCommandsFlagged("readonly")
	lockWriteCommands = lockCommandsFlagged("write")
)

// lockCommandsFlagged returns, by index into protocol.Commands, whether
// each command is of the lock group and has flag ("": any).
func lockCommandsFlagged(flag string) []bool {
	has := make([]bool, len(protocol.Commands))
	for i, cmd := range protocol.Commands {
		has[i] = cmd.UsesLocks() && (flag == "" || slices.Contains(cmd.Flags, flag))
	}
	return has
}

func (a *replicatedApplier) admit(c *conn, i int, args [][]byte) error {
	r := a.r
	if first := protocol.Commands[i].FirstKey; a.redirect && first > 0 && first < len(args) && r.IsFollower() {
		_, addr, err := r.LeaderRESP()
		if err != nil {
			return err
		}
		return protocol.MovedError(keyslot.Of(args[first]), addr)
	}
	// A node whose settings differ from the leader's gives answers, and
	// would have a table if it became the leader, that are not the group's.
	if leader := r.SettingsMismatch(); leader != "" {
		return protocol.SettingsMismatchError(r.Settings(), leader)
	}
	// Every command of a round arrived before its first ran (the goroutine
	// transport reads no more until the round's replies are flushed), so
	// one leader check serves the round's reads. On an event loop it was
	// made before the command was dispatched (conn.linearizeFirst).
	if readCommands[i] && !c.linearized && !c.staleReads {
		if c.loop != nil { // its check, made first, failed
			err := c.linearizeErr
			c.linearizeErr = nil
			if err == nil {
				err = protocol.ErrTryAgain
			}
			return err
		}
		if err := r.Linearize(); err != nil {
			return err
		}
		c.linearized = true
	}
	return nil
}

func (a *replicatedApplier) apply(c *conn, cmds []lockfsm.Command, reply lockReply) error {
	c.queueProposal(reply, cmds)
	return nil
}

func (a *replicatedApplier) wait(c *conn, cmd lockfsm.Command, ephemeral bool) error {
	w := clusterWait{cmd: cmd, ephemeral: ephemeral}
	if cmd.Op == lockfsm.OpWaitAll {
		w.keys = cmd.Keys
	} else {
		w.keys = [][]byte{cmd.Key}
	}
	return c.clusterWaiting(w)
}

func (a *replicatedApplier) table() *locker.Table { return a.r.Table() }

func (a *replicatedApplier) release(key []byte, token uint64) bool {
	res, err := a.r.Propose(lockfsm.Tag{}, []lockfsm.Command{{Op: lockfsm.OpRelease, Key: key, Token: token}})
	return err == nil && res[0].Granted
}

func (a *replicatedApplier) releaseLater(key []byte, token uint64) {
	a.r.ProposeAsync(lockfsm.Tag{}, []lockfsm.Command{{Op: lockfsm.OpRelease, Key: key, Token: token}}, nil)
}

// closed tells the state machine to forget c's batches (their results
// kept for retries). If it fails, the session table's bound forgets them
// in time.
func (a *replicatedApplier) closed(c *conn) {
	if c.clientID != nil {
		a.r.ProposeAsync(lockfsm.Tag{}, []lockfsm.Command{{Op: lockfsm.OpEndSession, Client: c.clientID}}, nil)
	}
}

// Cluster mode (Config.Cluster): the lock table is the state machine of a
// Raft group, which the replica package drives. A command that changes the
// table becomes a lockfsm.Command, proposed through the replica, and its
// client is answered from the Result every replica computes alike when the
// entry is applied; reads wait until the node has applied what a quorum
// had committed when they arrived (replica.Linearize). On an event loop a
// connection's replies wait, parked, for its proposal's answer
// (replicated_batch.go); on the goroutine transport its goroutine blocks.
//
// Only the leader proposes, once its term has begun: any other node
// forwards to it, and a node that cannot reach a leader ready to propose
// within the replica's retry budget answers TRYAGAIN: nothing ran.

// proposalTag tags c's next batch of changes: c's client id and the
// batch's number, so that the batch applies once however often it is sent.
func (c *conn) proposalTag() lockfsm.Tag {
	c.proposalSeq++
	return lockfsm.Tag{Client: c.clusterClientID(), Seq: c.proposalSeq}
}

// clusterClientID names c across the cluster: this node, this run of the
// server (a client id must not come back after a restart, with numbers
// starting over), and the connection.
func (c *conn) clusterClientID() []byte {
	if c.clientID == nil {
		id := append([]byte(c.srv.replica.ID()), 0)
		id = append(id, c.srv.owners.run[:]...)
		c.clientID = binary.BigEndian.AppendUint64(id, c.id)
	}
	return c.clientID
}

// RaftAddr is the address this node's Raft listener is bound to, "" on a
// single node.
func (s *Server) RaftAddr() string {
	if s.replica == nil {
		return ""
	}
	return s.replica.RaftAddr()
}
