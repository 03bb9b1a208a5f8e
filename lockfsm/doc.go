// Package lockfsm is the lock table as the state machine of a Raft group
// (issue 15): the commands a leader proposes, their encoding in log
// entries, and their application to a locker.Table in replicated mode
// (locker.Config.Replicated), on every replica alike; and exact snapshots
// of the table for the log to be compacted against.
//
// An entry is a batch of commands, one batch per event-loop round of the
// leader, answered by one Result per command. Applying is deterministic:
// it reads no clock to decide anything (the table only stamps each
// replica's own "soft" deadlines), uses no per-process seed, and does not
// depend on the shard count, so every replica gives the same answers and
// reaches the same state.
//
// Time is the leader's alone: a lease ends by expiry only through a Fire
// command, which the leader proposes for what its table reports due
// (locker.Table.CollectDue), and which applies only in the term it was
// proposed in (after a Term command), so that a deposed leader's stale
// decisions cannot end leases a newer leader renewed.
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
// Not here yet: WAIT queues and EPHEMERAL ties across nodes, and the
// server's wiring (RESP commands proposed in batches, forwarding from
// followers, linearizable reads), which are the next steps of issue 15.
package lockfsm
