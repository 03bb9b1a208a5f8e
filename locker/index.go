package locker

import "iter"

// keyIndex maps key hashes to entry indices: an open-addressing table with
// linear probing and backward-shift deletion. A slot is 8 bytes, the entry
// index and 32 bits of the key's hash, against the 16 bytes a slot of Go's
// map[uint64]uint32 takes; neither holds a pointer. Keys are compared in the
// arena only when the stored hash bits match.
//
// Not safe for concurrent use: the shard's mutex guards it.
type keyIndex struct {
	slots []indexSlot // power-of-two length
	count int
}

type indexSlot struct {
	hash  uint32 // low 32 bits of the key's hash; also picks the home slot
	entry uint32 // entry index; 0 marks an empty slot
}

const indexMinSlots = 64

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
	}
}

// insert adds entry under hash h. The entry must not be present.
func (x *keyIndex) insert(h, entry uint32) {
	// Grow at 3/4 full: linear probing stays short below that.
	if (x.count+1)*4 > len(x.slots)*3 {
		x.grow()
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

func (x *keyIndex) grow() {
	old := x.slots
	x.slots = make([]indexSlot, max(2*len(old), indexMinSlots))
	for _, sl := range old {
		if sl.entry != 0 {
			x.place(sl)
		}
	}
}

// remove deletes entry, stored under hash h, and shifts later members of its
// probe run back so that no tombstone is left behind.
func (x *keyIndex) remove(h, entry uint32) {
	m := x.mask()
	p := h & m
	for x.slots[p].entry != entry {
		if x.slots[p].entry == 0 {
			return // not present
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

// firstCandidate returns the first entry stored under hash h, or 0: for a
// prefetch, which guesses that it is the key's own.
func (x *keyIndex) firstCandidate(h uint32) uint32 {
	for e := range x.candidates(h) {
		return e
	}
	return 0
}
