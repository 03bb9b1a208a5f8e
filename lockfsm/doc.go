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
// Not here yet: WAIT queues and EPHEMERAL ties across nodes, and the
// server's wiring (RESP commands proposed in batches, forwarding from
// followers, linearizable reads), which are the next steps of issue 15.
package lockfsm
