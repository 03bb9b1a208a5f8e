package locker

import "unsafe"

// PrefetchMax is the most keys one Prefetch call handles; the rest are ignored.
const PrefetchMax = 16

// DefaultPrefetchFrom is the default Config.PrefetchFrom: about 7.5 MB of
// entries and index, more than a core's share of the CPU's caches.
const DefaultPrefetchFrom = 100_000

// Prefetch starts loading, for each key, the index slot and then the entry
// that a command on the key will read, and returns at once; it changes
// nothing. Call it with the keys of pipelined commands that are about to
// run, when PrefetchWorthwhile says so.
//
// In a table far larger than the CPU's caches, a command on a random key
// waits on two cache misses in a row: its index slot, then its entry. A
// pipelined batch of commands pays them one command after another.
// Prefetching the batch's keys first lets the misses overlap, in two passes:
// slots, then (those having arrived) entries. Each step holds the shard's
// lock only to compute an address, and issues a prefetch instruction rather
// than a load, so the unlock does not wait for memory. Redis 8 prefetches
// the keys of batched commands for the same reason.
func (t *Table) Prefetch(keys [][]byte) {
	keys = keys[:min(len(keys), PrefetchMax)]
	var hashes [PrefetchMax]uint32
	var shards [PrefetchMax]*shard
	for i, k := range keys {
		h, s := t.locate(k)
		hashes[i], shards[i] = h, s
		s.mu.Lock()
		if x := &s.index; len(x.slots) > 0 {
			prefetch(uintptr(unsafe.Pointer(&x.slots[h&x.mask()])))
			if x.old != nil { // growing: the key may still be in the old table
				prefetch(uintptr(unsafe.Pointer(&x.old[h&uint32(len(x.old)-1)])))
			}
		}
		s.mu.Unlock()
	}
	for i, s := range shards[:len(keys)] {
		s.mu.Lock()
		if e := s.index.firstCandidate(hashes[i]); e != 0 {
			prefetch(uintptr(unsafe.Pointer(s.at(e))))
		}
		s.mu.Unlock()
	}
}

// PrefetchWorthwhile reports whether the table is large enough for Prefetch
// to save more than it costs (Config.PrefetchFrom live locks); in a small
// table everything is in cache and the extra hashing and locking only cost.
// The reaper refreshes the answer every tick (ExpireDue does). It is always
// false on platforms without a prefetch instruction stub (only amd64 and
// arm64 have one).
func (t *Table) PrefetchWorthwhile() bool { return t.prefetching.Load() }

// updatePrefetching refreshes PrefetchWorthwhile's answer from the shards'
// lock counts.
func (t *Table) updatePrefetching() {
	locks := 0
	for _, s := range t.shards {
		locks += int(s.counts.locks.Load())
	}
	t.prefetching.Store(PrefetchSupported && locks >= t.cfg.PrefetchFrom)
}
