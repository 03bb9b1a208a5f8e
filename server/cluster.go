package server

import (
	"encoding/binary"

	"github.com/leasehold/leasehold/lockfsm"
)

// Cluster mode (Config.Cluster): the lock table is the state machine of a
// Raft group, which the replica package drives. A command that changes the
// table becomes a lockfsm.Command, proposed through the replica, and its
// client is answered from the Result every replica computes alike when the
// entry is applied; reads wait until the node has applied what a quorum
// had committed when they arrived (replica.Linearize). The handlers block
// while they do, so cluster mode serves every connection on a goroutine of
// its own (IOLoops 0).
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
