package locker

import "iter"

// keyIndex maps key hashes to entry indices: an open-addressing table with
// linear probing and backward-shift deletion. A slot is 8 bytes, the entry
// index and 32 bits of the key's hash, against the 16 bytes a slot of Go's
// map[uint64]uint32 takes; neither holds a pointer. Keys are compared in the
// arena only when the stored hash bits match.
//
// It grows as Redis's dict does, incrementally: at 3/4 full it allocates a
// table twice the size, and every insert or remove after that moves a few
// slots of the old table into it, so that no command pays for moving them
// all. A shard of a million-key table would otherwise stop for a millisecond
// or more at each doubling. While both tables are in use, lookups probe the
// new one, then the old; a slot leaving the old table, moved or removed,
// becomes a tombstone there, since shifting slots back could move one the
// migration has already passed.
//
// Not safe for concurrent use: the shard's mutex guards it.
type keyIndex struct {
	slots []indexSlot // power-of-two length
	count int         // entries in slots and old together
	old   []indexSlot // the table being moved into slots; nil when none
	moved int         // old's slots before this one have been visited
}

type indexSlot struct {
	hash  uint32 // low 32 bits of the key's hash; also picks the home slot
	entry uint32 // entry index; 0 marks an empty slot, tombstone a vacated one (old only)
}

const (
	indexMinSlots = 64
	// tombstone marks a slot of the old table whose entry has left it; no
	// entry has this index.
	tombstone = ^uint32(0)
	// migrateSlots is how many old slots each insert or remove moves on.
	// Any number above 2 ends the move before the new table is 3/4 full.
	migrateSlots = 64
)

func (x *keyIndex) mask() uint32 { return uint32(len(x.slots) - 1) }

// candidates yields, in probe order, the entries stored under hash h; the
// caller compares keys to find the one it wants.
func (x *keyIndex) candidates(h uint32) iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		if len(x.slots) == 0 {
			return
		}
		m := x.mask()
		for p := h & m; x.slots[p].entry != 0; p = (p + 1) & m {
			if x.slots[p].hash == h && !yield(x.slots[p].entry) {
				return
			}
		}
		if x.old != nil {
			x.oldCandidates(h, yield)
		}
	}
}

// oldCandidates is candidates for the old table, out of line: it is rarely
// in use, and the common path stays short.
func (x *keyIndex) oldCandidates(h uint32, yield func(uint32) bool) {
	m := uint32(len(x.old) - 1)
	for p := h & m; x.old[p].entry != 0; p = (p + 1) & m {
		if sl := x.old[p]; sl.hash == h && sl.entry != tombstone && !yield(sl.entry) {
			return
		}
	}
}

// insert adds entry under hash h. The entry must not be present.
func (x *keyIndex) insert(h, entry uint32) {
	switch {
	case x.old != nil:
		x.migrate()
	case (x.count+1)*4 > len(x.slots)*3: // linear probing stays short below 3/4
		x.old = x.slots
		x.slots = make([]indexSlot, max(2*len(x.old), indexMinSlots))
		x.migrate()
	}
	x.place(indexSlot{hash: h, entry: entry})
	x.count++
}

func (x *keyIndex) place(sl indexSlot) {
	m := x.mask()
	p := sl.hash & m
	for x.slots[p].entry != 0 {
		p = (p + 1) & m
	}
	x.slots[p] = sl
}

// migrate moves the next migrateSlots slots of the old table into the new,
// and drops the old table once it has visited all of it.
func (x *keyIndex) migrate() {
	end := min(x.moved+migrateSlots, len(x.old))
	for p := x.moved; p < end; p++ {
		if sl := x.old[p]; sl.entry != 0 && sl.entry != tombstone {
			x.place(sl)
			x.old[p].entry = tombstone
		}
	}
	x.moved = end
	if x.moved == len(x.old) {
		x.old, x.moved = nil, 0
	}
}

// idleMigrateRounds is how many migrate calls migrateIdle makes: 1,024
// slots, some microseconds under the shard's lock.
const idleMigrateRounds = 16

// migrateIdle moves a pending grow on for the reaper, once per tick: only
// inserts and removes move it otherwise, and a shard whose keys stop
// changing would go on probing two tables for absent keys.
func (x *keyIndex) migrateIdle() {
	for range idleMigrateRounds {
		if x.old == nil {
			return
		}
		x.migrate()
	}
}

// shrinkIfSparse starts moving the index into a smaller table when it is
// less than 1/8 full, as Redis's dict shrinks, and reports whether it did.
// The move is incremental, as a grow's: inserts, removes and migrateIdle
// carry it on. The new table is sized to stay at most 1/4 full even if every
// step of the move is an insert (each moves migrateSlots old slots, so there
// are at most len/migrateSlots of them), so no grow is needed before the move
// ends; growing again takes three times as many entries (3/4 full), and that
// gap keeps a steady load from shrinking and growing in turn. A large index
// gets small in a few such steps.
func (x *keyIndex) shrinkIfSparse() bool {
	if x.old != nil || len(x.slots) <= indexMinSlots || x.count*8 >= len(x.slots) {
		return false
	}
	n := indexMinSlots
	for n < 4*(x.count+len(x.slots)/migrateSlots) {
		n *= 2
	}
	if n >= len(x.slots) {
		return false
	}
	x.old = x.slots
	x.slots = make([]indexSlot, n)
	x.migrate()
	return true
}

// bytes is the memory the index holds, a table being moved from included.
func (x *keyIndex) bytes() int { return (cap(x.slots) + cap(x.old)) * 8 }

// remove deletes entry, stored under hash h. In the new table it shifts
// later members of its probe run back, so that no tombstone is left behind;
// in the old one it leaves a tombstone.
func (x *keyIndex) remove(h, entry uint32) {
	if x.old != nil {
		x.migrate() // before: the entry may move, but it stays in one table
	}
	if len(x.slots) == 0 {
		return
	}
	m := x.mask()
	p := h & m
	for x.slots[p].entry != entry {
		if x.slots[p].entry == 0 {
			x.removeOld(h, entry)
			return
		}
		p = (p + 1) & m
	}
	hole := p
	for q := (hole + 1) & m; x.slots[q].entry != 0; q = (q + 1) & m {
		home := x.slots[q].hash & m
		// The slot at q may move into the hole unless its home lies
		// cyclically after the hole and at or before q.
		if (q-home)&m >= (q-hole)&m {
			x.slots[hole] = x.slots[q]
			hole = q
		}
	}
	x.slots[hole] = indexSlot{}
	x.count--
}

// removeOld deletes entry, stored under hash h, from the old table, if it
// is there.
func (x *keyIndex) removeOld(h, entry uint32) {
	if x.old == nil {
		return
	}
	m := uint32(len(x.old) - 1)
	for p := h & m; x.old[p].entry != 0; p = (p + 1) & m {
		if x.old[p].entry == entry {
			x.old[p].entry = tombstone
			x.count--
			return
		}
	}
}

// firstCandidate returns the first entry stored under hash h, or 0: for a
// prefetch, which guesses that it is the key's own.
func (x *keyIndex) firstCandidate(h uint32) uint32 {
	for e := range x.candidates(h) {
		return e
	}
	return 0
}
