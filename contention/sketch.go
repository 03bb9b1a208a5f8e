package contention

import "math/bits"

// sketch is a count-min sketch of the sampled events of a shard's untracked
// keys: four rows of byte counters, a key counting in one counter of each
// row, its estimate the smallest of the four (never below its true count
// since the last halving, above it by what collided with it in every row).
// It adds by conservative update, raising only the counters at that
// minimum, which keeps the collisions' excess low. Counters stop at 255;
// halve, every window samples, keeps them well below.
//
// As in Caffeine's frequency sketch, a key's four counters share one 64-byte
// block (16 counters of each row): an event then costs one cache miss, not
// four, on a server whose lock table keeps evicting the sketch from the
// cache, for a little more collision between the keys of a block.
type sketch struct {
	counts []uint8 // blocks of sketchRows×16 counters, row after row
	blocks uint    // a power of two
	window int     // samples between two halvings: a counter for each
}

const (
	sketchRows  = 4
	sketchBlock = 64 // bytes: sketchRows rows of 16 counters
)

// newSketch sizes a sketch for a shard that tracks places locks: 32
// counters a row per place, at least 1024 (4 KB with the defaults).
func newSketch(places int) sketch {
	perRow := 1 << max(bits.Len(uint(32*places-1)), 10)
	blocks := uint(perRow * sketchRows / sketchBlock)
	return sketch{counts: make([]uint8, blocks*sketchBlock), blocks: blocks, window: perRow}
}

// add counts one event of the key of hash h and returns its estimate.
func (s *sketch) add(h uint64) uint8 {
	// The shard and the presence filter use h's low and high bits; the
	// sketch takes its block and counters from a multiplicative remix of
	// it: the block from the top bits, each row's counter from 4 bits
	// below them.
	x := h * 0x9e3779b97f4a7c15
	block := s.counts[(x>>32)&uint64(s.blocks-1)*sketchBlock:][:sketchBlock]
	var at [sketchRows]uint8
	least := uint8(255)
	for r := range at {
		at[r] = uint8(r*16) | uint8(x>>(60-4*r))&15
		least = min(least, block[at[r]])
	}
	if least == 255 {
		return least
	}
	for _, i := range at {
		if block[i] == least {
			block[i] = least + 1
		}
	}
	return least + 1
}

// halve ages every count by half.
func (s *sketch) halve() {
	for i := range s.counts {
		s.counts[i] >>= 1
	}
}
