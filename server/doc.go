// Package server glues the wire to the lock table: it accepts TCP
// connections, reads commands with protocol's bounded reader, dispatches them
// through the command table to handlers that parse (protocol), act and reply
// (protocol, through redcon's Writer), commits what they changed (persist)
// before their replies leave, and enforces the connection limits.
//
// A lock command is written once for both modes (commands_lock.go): its
// handler turns the request into lockfsm.Commands and hands them to the
// server's applier, which runs them on the node's own table (applier.go) or
// proposes them through the Raft log of cluster mode (replicated*.go, on
// the replica package), and writes the reply from their results.
//
// Connections are served by epoll event loops (Config.IOLoops, 1 by default
// on Linux; transport_epoll_linux.go), in both modes: each loop is one
// goroutine that owns many connections, reads a socket only when epoll says
// it is readable and writes the replies of a round at once; a connection
// whose changes are being committed through Raft is parked meanwhile. With
// IOLoops 0, and on systems without epoll, each connection is served by a
// goroutine of its own with blocking reads (transport_goroutine.go). Either
// way the Server owns those goroutines: Close stops accepting, closes every
// connection and waits for them. docs/design.md follows one request through.
//
// Files are named for what they hold: transport_*.go, dispatch.go,
// commands_*.go, pubsub.go, acl.go and auth.go (security), stats.go,
// slowlog.go and lockstats.go (observability; the command counters are
// internal/cmdstats).
package server
