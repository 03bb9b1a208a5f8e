// Package lockfsm is the lock table as the state machine of a Raft group
// (issue 15): the commands a leader proposes, their encoding in log
// entries, and their application to a locker.Table in replicated mode
// (locker.Config.Replicated), on every replica alike; and exact snapshots
// of the table for the log to be compacted against.
//
// An entry is a batch of commands, one batch per round of a client
// connection, answered by one Result per command; or a group of such
// batches (AppendGroupEntry), which Combiner builds from the batches that
// wait while the leader's last entry is in flight, so that many clients
// with one command each cost Raft one entry. Applying is deterministic:
// it reads no clock to decide anything (the table only stamps each
// replica's own "soft" deadlines), uses no per-process seed, and does not
// depend on the shard count, so every replica gives the same answers and
// reaches the same state.
//
// Time is the leader's alone: a lease ends by expiry only through a Fire
// command, which the leader proposes for what its FSM reports due
// (FSM.CollectDue: leases and lock-delays from locker.Table.CollectDue,
// and waits), and which applies only in the term it was proposed in
// (after a Term command), so that a deposed leader's stale decisions
// cannot end leases a newer leader renewed.
//
// Duties runs those leader-only proposals on each node: it begins each term
// the node wins (a barrier, then OpTerm) and proposes OpFire for what is
// due, every tick.
//
// # Forwarded batches and exactly-once entries
//
// A follower forwards its clients' commands to the leader as a batch with
// a Tag (AppendTaggedEntry): Client names the forwarding node and the
// client's connection, Seq grows with each batch of that client. The
// leader proposes the entry as it came and answers with its results
// encoded by AppendResults; the follower decodes them (DecodeResults) and
// answers its client from them. Each error keeps its text and its
// errors.Is, so protocol.Reply maps it as on the leader.
//
// The FSM keeps a session per Client: the last Seq applied and its
// results. A forward retried after its answer was lost (the same Tag) is
// not applied again: it gets the recorded results. An older Seq gets
// ErrStaleRequest for each command and applies nothing, so a Client must
// have one batch in flight at a time: the next Seq goes out once the last
// one was answered, or given up on. Sessions are replicated, so a retry
// sent to a new leader after a failover is recognised too. Sessions are
// bounded (MaxSessions; the least recently used, by log index, goes
// first) and part of snapshots. The server must propose OpEndSession for
// a Client when its connection closes, so that the table does not fill
// with the sessions of connections long gone.
//
// # Waits
//
// ACQUIRE ... WAIT is OpWait, with a Waiter id that names it across nodes
// (the server uses its node, the connection and a sequence number; ids
// must be unique among queued waits, ErrWaiterExists). Its Result is a
// grant at once (Granted, Token), a refusal (Err), or Queued: it waits in
// the lock's queue of the table, by priority, then in log order, and an
// owner's second WAIT takes the place of its first (locker.AcquireWait).
// When a later entry frees the lock (RELEASE, an expiry or the end of a
// lock-delay through OpFire, FORCE-RELEASE, or an OpCancelWait ahead of
// it), the lock is handed to the head of the queue within that entry's
// apply, on every replica alike, and the FSM reports it to the OnGrant
// option: (waiter, key, token) on every replica, on the applying
// goroutine. Token 0 means the wait ended ungranted: its deadline passed,
// or its owner's later WAIT took its place. DELETE of a lock with waiters
// is refused (locker.ErrInUse), as on one node.
//
// Each queued wait has a soft deadline, its replica's clock at apply plus
// Wait, like a lease's. The leader's FSM.CollectDue reports waits past it
// (locker.DueWait: the waiter and the wait's number), Duties proposes them
// in an OpFire, and they end only in the term that collected them: a
// waiter whose node died does not wait forever. Since the node that
// forwarded the WAIT started its timer before the leader applied it, that
// node's timer runs out first, unless it is gone.
//
// Snapshots carry the queues exactly (order, priority, waiter ids,
// numbers, time left), so a restored replica hands each lock to the same
// waiter with the same token.
//
// MACQUIRE ... WAIT is OpWaitAll: granted at once as OpAcquireAll, or
// queued as locker.AcquireAllWait queues it, taking its keys one at a time
// in key order and holding each while it waits for the next. Its steps are
// taken inside the apply that moved it (the table calls its Notify there;
// the FSM calls ContinueAll before the command's OnGrant calls), so every
// replica takes the same key with the same token at the same index. It is
// named, cancelled, timed by OpFire and reported to OnGrant as an OpWait
// is (with every token), and a cancel or deadline gives back the keys it
// took. Snapshots (version 3) keep its progress.
//
// What the server must do:
//   - answer a WAIT from its Result, or, when Queued, park the client until
//     OnGrant names its waiter (ignoring the others' waiters, which the
//     hook reports on every node): a token grants, 0 answers as a wait
//     that timed out. Register the waiter before proposing the WAIT: the
//     node's own replica may apply the entry that hands the lock over
//     before the answer to a forwarded WAIT arrives (or before the answer
//     to its retry, which says Queued as the first one did);
//   - when the client's wait times out, or the connection closes, propose
//     OpCancelWait for its waiter and answer (or not, if gone) from that
//     command's Result, ignoring any OnGrant for the waiter after it sent
//     the cancel: the cancel dequeues the wait, or, if the lock was handed
//     to it meanwhile, releases that lease (N 1, Token the lease's) so that
//     it goes to the next waiter. The FSM remembers the last MaxGrants
//     grants made from queues for this; an older grant runs out by its ttl.
//     A grant that a later ACQUIRE, WAIT or MACQUIRE of its owner was
//     answered with (an OWNER's retry, through any node) is the retry's:
//     the cancel leaves it alone;
//   - propose OpEndSession for a Client when its connection closes;
//   - have the leader propose what FSM.CollectDue reports (Duties does).
//
// The server does all of this, and wires the rest around the FSM: RESP
// commands proposed in batches (Combiner), forwarding from followers,
// linearizable reads.
//
// Not here: EPHEMERAL ties across nodes. The node a connection uses ties
// its EPHEMERAL leases to it and proposes their release when it closes;
// the FSM knows nothing of the tie, so the leases of a node that dies run
// out by their ttl.
package lockfsm
