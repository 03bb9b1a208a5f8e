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
package locker
