package server

import (
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
	"github.com/leasehold/leasehold/replica"
)

// A lock command is written once, whatever the mode: its handler
// (commands_lock.go) parses the request (protocol), turns it into
// lockfsm.Commands, and hands them to the server's applier with the
// lockReply that writes the client's reply from their results. As etcd
// sends every write through raftRequest whatever the member count, the
// handler does not know which applier it has:
//
//   - localApplier, on a single node, runs the commands at once against
//     the node's own table (lockfsm.Run), and the reply is written before
//     apply returns;
//   - replicatedApplier, in cluster mode, queues them for the round's
//     proposal (replicated_batch.go), and the reply is written when the
//     entry is applied, in the order the commands came.
type applier interface {
	// admit is the step before any lock command runs (i is its index in
	// protocol.Commands): the replicated applier refuses it on a node
	// whose settings differ from the leader's, answers MOVED on a
	// follower with Config.Redirect, and makes a read linearizable.
	admit(c *conn, i int, args [][]byte) error
	// apply runs cmds, whose byte slices may alias the reader's buffers,
	// and has reply write their reply from their results, now or later.
	// An error is the reply.
	apply(c *conn, cmds []lockfsm.Command, reply lockReply) error
	// wait runs cmd, an OpWait (ACQUIRE ... WAIT) or OpWaitAll (MACQUIRE
	// ... WAIT): granted at once, or parked until the lock is handed over
	// or the wait ends. The reply is written by then.
	wait(c *conn, cmd lockfsm.Command, ephemeral bool) error
	// table is the lock table reads read: on a single node the node's, in
	// cluster mode this replica's as of its last entry applied.
	table() *locker.Table
	// release ends the lease of key with token for the server's own
	// reasons (an EPHEMERAL lease whose connection closed, a grant nobody
	// is left to take), and reports whether it did. In cluster mode it is
	// a proposal; one that fails leaves the lease to its ttl.
	release(key []byte, token uint64) bool
	// releaseLater is release without waiting for the outcome, for a
	// connection that closes on an event loop, which must not block.
	releaseLater(key []byte, token uint64)
	// closed is told when c has closed; it does not block.
	closed(c *conn)
}

// newApplier is the applier of a server with rep (nil on a single node)
// or table.
func newApplier(cfg Config, rep *replica.Replica, table *locker.Table) applier {
	if rep != nil {
		return &replicatedApplier{r: rep, redirect: cfg.Redirect}
	}
	return localApplier{t: table}
}

// lockReply writes a lock command's reply from its commands' results (or
// returns the error to reply with). The few facts a reply needs beyond the
// commands are carried here, by value, so that the single node's hot path
// allocates nothing.
type lockReply struct {
	write     func(c *conn, r lockReply, cmds []lockfsm.Command, res []lockfsm.Result) error
	ephemeral bool                          // ACQUIRE, MACQUIRE: tie the leases to the connection
	force     *protocol.ForceReleaseRequest // FORCE-RELEASE: what the operator asked, for the log
	script    *protocol.Script              // EVAL and its kin: the script whose reply this is
	err       error                         // an error reply queued behind proposals (queueError)
	wait      *blockState                   // a WAIT in cluster mode (replicated_wait.go)
}

// localApplier runs lock commands on a single node's table.
type localApplier struct{ t *locker.Table }

func (localApplier) admit(*conn, int, [][]byte) error { return nil }

func (a localApplier) apply(c *conn, cmds []lockfsm.Command, reply lockReply) error {
	res := c.scratch.results(len(cmds))
	for i := range cmds {
		lockfsm.RunInto(a.t, &cmds[i], &res[i])
	}
	return reply.write(c, reply, cmds, res)
}

func (localApplier) wait(c *conn, cmd lockfsm.Command, ephemeral bool) error {
	if cmd.Op == lockfsm.OpWaitAll {
		return macquireWaiting(c, &cmd, ephemeral)
	}
	return acquireWaiting(c, &cmd, ephemeral)
}

func (a localApplier) table() *locker.Table { return a.t }

func (a localApplier) release(key []byte, token uint64) bool { return a.t.Release(key, token) }

func (a localApplier) releaseLater(key []byte, token uint64) { a.t.Release(key, token) }

func (localApplier) closed(*conn) {}

// commandScratch is a connection's room for the commands of the lock
// command it runs and their results, reused from one to the next so that
// the single node's path allocates nothing.
type commandScratch struct {
	cmds []lockfsm.Command
	res  []lockfsm.Result
	oneC [1]lockfsm.Command
	oneR [1]lockfsm.Result
}

// one returns room for one command, to be set whole.
func (s *commandScratch) one() []lockfsm.Command { return s.oneC[:] }

// cleared is one, zeroed, and the command in it to set field by field: the
// hottest handlers (ACQUIRE, RELEASE, EXTEND, and the Redis lock
// libraries' SET NX and release script) set theirs so, since a composite
// literal stored whole (cmds[0] = lockfsm.Command{...}) is built on the
// stack and then moved, 288 bytes with write barriers: about 100
// instructions a command more (cachegrind).
func (s *commandScratch) cleared() ([]lockfsm.Command, *lockfsm.Command) {
	s.oneC[0] = lockfsm.Command{}
	return s.oneC[:], &s.oneC[0]
}

// commands returns room for n commands, zeroed.
func (s *commandScratch) commands(n int) []lockfsm.Command {
	if cap(s.cmds) < n {
		s.cmds = make([]lockfsm.Command, n)
	}
	s.cmds = s.cmds[:n]
	clear(s.cmds)
	return s.cmds
}

// results returns room for n results.
func (s *commandScratch) results(n int) []lockfsm.Result {
	if n == 1 {
		return s.oneR[:]
	}
	if cap(s.res) < n {
		s.res = make([]lockfsm.Result, n)
	}
	return s.res[:n]
}
