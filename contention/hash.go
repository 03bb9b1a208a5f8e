package contention

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// hashKey is a seeded 64-bit hash of key, never 0 (index's empty place):
// wyhash's folded 64×64-bit multiply over the key's 8-byte words. Every
// event on every key pays for it, most of them on keys not tracked, for
// which it is nearly all the cost; maphash.String took three calls and
// about three times the instructions on a 12-byte key. It resists chosen
// collisions only as far as its random seed does, which is enough here: a
// collision costs a key a place in the index's probe or a sketch's counter,
// never a wrong count (lookup compares the keys).
func hashKey(seed uint64, key string) uint64 {
	const (
		p0 = 0xa0761d6478bd642f
		p1 = 0xe7037ed1a0b428db
		p2 = 0x8ebc6af09c88c6e3
	)
	all := unsafe.Slice(unsafe.StringData(key), len(key))
	b, n := all, len(all)
	h := seed ^ p0
	switch {
	case n > 8:
		for len(b) > 8 {
			h = mum(binary.LittleEndian.Uint64(b)^p1, h^p2)
			b = b[8:]
		}
		// The last word overlaps the one before: no byte-by-byte tail.
		h = mum(binary.LittleEndian.Uint64(all[n-8:])^p1, h^p2)
	case n >= 4:
		w := uint64(binary.LittleEndian.Uint32(b))<<32 | uint64(binary.LittleEndian.Uint32(b[n-4:]))
		h = mum(w^p1, h^p2)
	case n > 0:
		w := uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
		h = mum(w^p1, h^p2)
	}
	return max(mum(h^uint64(n), p0), 1)
}

// mum folds the 128-bit product of a and b into 64 bits.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
