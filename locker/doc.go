// Package locker owns the lock table: named locks, their leases and the fencing
// tokens that number every grant. It does no I/O and knows nothing of the
// network; the server package turns wire commands into calls on a Table.
//
// Every way to acquire takes one Request (the key or keys, ttl, owner,
// Mode, priority and wait) and answers with the token or tokens and whether
// they were granted: Acquire for one key now, AcquireAll for several, all or
// none, and AcquireWait and AcquireAllWait for a request that may queue,
// through a Wait or MultiWait handle that reports the grant.
//
// Design in brief:
//   - The table is split into shards by a hash of the key; each shard has one
//     mutex and every operation holds it for a short, allocation-free section.
//   - Entries, keys and owners live in pointer-free paged slices and slab
//     arenas indexed by integers, so the garbage collector has almost nothing to
//     scan however many leases are live.
//   - Leases are expired by a hierarchical timer wheel per shard, driven by one
//     reaper goroutine that the Table owns. The wheel only reclaims: every
//     operation treats a lease whose deadline has passed as expired, whether or
//     not the wheel has fired yet.
//   - Deadlines are read from an injected monotonic Clock, so tests drive time
//     by hand and a wall-clock jump neither expires nor prolongs a lease.
//   - Fencing tokens come from a per-shard counter that starts at
//     Config.FirstToken and only grows; a key always maps to the same shard, so a
//     key's tokens grow through release, expiry, DELETE and re-CREATE. Tokens
//     of different locks may coincide. See BootEpochToken for how tokens stay
//     ahead across a restart and below 2^53.
//
// # Replicated mode
//
// With Config.Replicated the table is one replica of a Raft group's state
// machine: replicas that apply the same calls in the same order reach the
// same state and give the same answers, whatever their shard count, hash
// seed or clock.
//   - Tokens come from one counter per key slot (internal/keyslot, Redis
//     Cluster's CRC16), shared by all shards: a grant's token is
//     max(counter, floor)+1. The floor starts at Config.FirstToken, which
//     must be the same on every replica, and only rises (RaiseTokenFloor,
//     applied by the state machine at the start of each term).
//   - Nothing ends by itself: no lease, reader, permit or lock-delay ends
//     on touch or by the reaper, however far the Clock moves. Deadlines are
//     still dated from the Clock (each replica's soft deadline: when it
//     applied the grant or renewal, plus the ttl). The leader asks
//     CollectDue what has passed by its clock, proposes it, and every replica
//     applies it with Fire, which ends only what still matches (key, token,
//     and the lease's renewal count): a stale proposal never ends a newer
//     or renewed lease. A lock-delay begun by Fire runs from the later of the
//     deadline and the apply.
//   - The reaper (Start) only gives memory back; the timer wheel serves
//     CollectDue alone.
//   - Waits (AcquireWait) queue as in the default mode: a lock freed by a
//     call (Release, Fire, ForceRelease, CancelWait) is handed to its
//     queue's head within that call, so replicas hand it to the same
//     waiter. The table does not time waits out; its state machine does.
//   - A snapshot is TokenState plus Dump, plus Queue of each lock waited
//     for; RestoreTokenState plus Restore plus RestoreQueue rebuild a
//     replica that issues the same next tokens to the same waiters, and
//     Restore expires nothing.
package locker
