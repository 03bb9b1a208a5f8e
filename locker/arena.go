package locker

import (
	"math/bits"
	"slices"
)

// The arena stores keys and owner ids in 64 KiB pages carved into power-of-two
// slots, one size class per page, with a free list per class. A stored string
// is named by a 32-bit ref (page<<16 | offset) plus the length kept by the
// caller, so entries hold integers rather than pointers.
//
// A page none of whose slots is in use can be given back to the heap
// (shrink): its slots leave their class's free list, and its number is
// reused, before any new one, when a class needs a page again. Refs to other
// pages are untouched, so nothing stored moves.
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
	pages   [][]byte // nil for a page given back
	used    []uint32 // slots in use per page; pageGone for a page given back
	empty   int      // pages held with no slot in use
	holes   []uint32 // pages given back, reused before a new one; lowest last
	classes [arenaClassCount]arenaClass
}

// pageGone marks a page given back in a per-page count of slots in use.
const pageGone = ^uint32(0)

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
			cl.page = a.newPage()
			cl.next = 0
			cl.started = true
		}
		ref = cl.page<<arenaPageBits | cl.next
		cl.next += size
	}
	p := ref >> arenaPageBits
	if a.used[p] == 0 {
		a.empty--
	}
	a.used[p]++
	copy(a.get(ref, len(b)), b)
	return ref
}

// newPage allocates a page, reusing the lowest number given back if any,
// and returns its number.
func (a *arena) newPage() uint32 {
	var p uint32
	if n := len(a.holes); n > 0 {
		p = a.holes[n-1]
		a.holes = a.holes[:n-1]
		a.pages[p] = make([]byte, arenaPageSize)
		a.used[p] = 0
	} else {
		if len(a.pages) >= 1<<(32-arenaPageBits) {
			// A ref has 16 bits of page: 4 GiB of keys and owners in
			// one shard. Refuse loudly rather than wrap around.
			panic("locker: a shard's key arena is full (4 GiB); use more shards")
		}
		p = uint32(len(a.pages))
		a.pages = append(a.pages, make([]byte, arenaPageSize))
		a.used = append(a.used, 0)
	}
	a.empty++
	return p
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
	p := ref >> arenaPageBits
	a.used[p]--
	if a.used[p] == 0 {
		a.empty++
	}
}

// shrinkMinPages is the fewest empty pages (of entries, or of an arena)
// given back at once after a drop; see shrinkNow for the whole hysteresis.
const shrinkMinPages = 4

// shrinkNow says whether a set of pages, held of them empty, should give
// its empty pages back: at once after a large drop, when at least
// shrinkMinPages and half of those held are empty; or, settled, when the
// caller has seen empty pages stay for a while (see shard.tidy). A steady
// load, whose pages are in use, gives nothing back; a load that comes and
// goes by a page gives it back at most once a quiet period, not every tick.
func shrinkNow(empty, held int, settled bool) bool {
	return empty > 0 && (settled || empty >= shrinkMinPages && empty*2 >= held)
}

// shrink gives every page with no slot in use back to the heap when
// shrinkNow says so, and reports whether it did. It costs a pass over the
// free lists and the pages.
func (a *arena) shrink(settled bool) bool {
	if !shrinkNow(a.empty, a.pagesHeld(), settled) {
		return false
	}
	for c := range a.classes {
		cl := &a.classes[c]
		cl.free = keepIf(cl.free, func(ref uint32) bool { return a.used[ref>>arenaPageBits] != 0 })
		if cl.started && a.used[cl.page] == 0 {
			cl.started = false
		}
	}
	for p, n := range a.used {
		if n == 0 {
			a.pages[p] = nil
			a.used[p] = pageGone
			a.holes = append(a.holes, uint32(p))
		}
	}
	a.empty = 0
	last := len(a.used)
	for last > 0 && a.used[last-1] == pageGone {
		last--
	}
	if last < len(a.used) {
		clear(a.pages[last:])
		a.pages, a.used = a.pages[:last], a.used[:last]
		a.holes = keepIf(a.holes, func(p uint32) bool { return p < uint32(last) })
	}
	slices.Sort(a.holes)
	slices.Reverse(a.holes) // the lowest is reused first
	return true
}

// keepIf returns the elements of s that keep accepts, in a new slice of
// their size, so that a long slice's memory goes back to the heap.
func keepIf(s []uint32, keep func(uint32) bool) []uint32 {
	n := 0
	for _, v := range s {
		if keep(v) {
			n++
		}
	}
	out := make([]uint32, 0, n)
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// pagesHeld is the number of pages the arena holds memory for.
func (a *arena) pagesHeld() int { return len(a.pages) - len(a.holes) }

// footprint is the bytes of pages the arena holds from the heap.
func (a *arena) footprint() int { return a.pagesHeld() * arenaPageSize }

// listBytes is the bytes the arena's free lists hold from the heap.
func (a *arena) listBytes() int {
	n := 0
	for c := range a.classes {
		n += cap(a.classes[c].free) * 4
	}
	return n
}
