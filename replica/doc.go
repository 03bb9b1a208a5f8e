// Package replica is cluster mode's Raft side: it opens this node's member
// of the Raft group (cluster.Node) over the lock table's state machine
// (lockfsm.FSM), runs the leader's duties, proposes the commands the server
// hands it (on the leader, combined into few entries; on a follower,
// forwarded to the leader), makes reads linearizable, tells the server of
// the hand-offs its clients' waits are waiting for, and reports the node's
// part in the group as one typed Stats. It also turns a single node's data
// directory into the first state of a new group (migrate.go), and holds the
// mutual TLS between nodes (tls.go).
//
// It knows nothing of RESP connections: the server parses commands into
// lockfsm.Commands, gives them to Propose, and answers its clients from the
// Results. The errors it returns are the wire errors a client should get
// (protocol.ErrTryAgain: nothing was done; protocol.ErrUncertain: the
// outcome is unknown). cluster calls back into this package through
// cluster.Config.Handler (the forwarded requests of forward.go), never into
// the server.
package replica
