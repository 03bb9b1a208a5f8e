package locker

import "math/bits"

// The arena stores keys and owner ids in 64 KiB pages carved into power-of-two
// slots, one size class per page, with a free list per class. A stored string
// is named by a 32-bit ref (page<<16 | offset) plus the length kept by the
// caller, so entries hold integers rather than pointers.
const (
	arenaPageBits   = 16
	arenaPageSize   = 1 << arenaPageBits
	arenaMinBits    = 4 // smallest slot: 16 bytes
	arenaClassCount = arenaPageBits - arenaMinBits + 1
)

type arenaClass struct {
	free    []uint32 // refs of released slots, reused first
	page    uint32   // page being carved; valid when next < arenaPageSize
	next    uint32   // offset of the next uncarved slot in page
	started bool
}

type arena struct {
	pages   [][]byte
	classes [arenaClassCount]arenaClass
}

func classOf(n int) int {
	if n <= 1<<arenaMinBits {
		return 0
	}
	return bits.Len(uint(n-1)) - arenaMinBits
}

// put copies b into a slot and returns its ref. b must be 1..arenaPageSize bytes.
func (a *arena) put(b []byte) uint32 {
	c := classOf(len(b))
	size := uint32(1) << (c + arenaMinBits)
	cl := &a.classes[c]
	var ref uint32
	if n := len(cl.free); n > 0 {
		ref = cl.free[n-1]
		cl.free = cl.free[:n-1]
	} else {
		if !cl.started || cl.next+size > arenaPageSize {
			if len(a.pages) >= 1<<(32-arenaPageBits) {
				// A ref has 16 bits of page: 4 GiB of keys and owners in
				// one shard. Refuse loudly rather than wrap around.
				panic("locker: a shard's key arena is full (4 GiB); use more shards")
			}
			cl.page = uint32(len(a.pages))
			cl.next = 0
			cl.started = true
			a.pages = append(a.pages, make([]byte, arenaPageSize))
		}
		ref = cl.page<<arenaPageBits | cl.next
		cl.next += size
	}
	copy(a.get(ref, len(b)), b)
	return ref
}

// get returns the n stored bytes at ref; the slice aliases the arena.
func (a *arena) get(ref uint32, n int) []byte {
	off := ref & (arenaPageSize - 1)
	return a.pages[ref>>arenaPageBits][off : off+uint32(n) : off+uint32(n)]
}

// release returns the slot at ref, which held n bytes, to its free list.
func (a *arena) release(ref uint32, n int) {
	c := classOf(n)
	a.classes[c].free = append(a.classes[c].free, ref)
}

// footprint is the bytes the arena holds from the heap.
func (a *arena) footprint() int { return len(a.pages) * arenaPageSize }
