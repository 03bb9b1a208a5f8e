package contention

import (
	"math/bits"
	"time"
)

// histogram counts durations in log-scaled buckets, subBuckets per power of
// two of microseconds (an error under 1/subBuckets, about 19%), from 1 µs
// to 2^maxOctave µs (over an hour); longer durations count in the last
// bucket. Its size is fixed: 512 bytes, whatever it counts.
type histogram struct {
	counts [buckets]uint32
	total  uint64
}

const (
	subBits    = 2
	subBuckets = 1 << subBits
	maxOctave  = 32
	buckets    = maxOctave * subBuckets
)

// bucketOf is the bucket counting a duration of us microseconds: the bucket
// of the octave [2^o, 2^(o+1)) and, inside it, of the next subBits bits.
func bucketOf(us uint64) int {
	if us < subBuckets {
		return int(us) // the first octaves are exact
	}
	o := bits.Len64(us) - 1 // us >= 2^o
	sub := int(us>>(o-subBits)) & (subBuckets - 1)
	i := (o-subBits+1)*subBuckets + sub
	return min(i, buckets-1)
}

// upperBound is the largest duration, in microseconds, bucket i counts.
func upperBound(i int) uint64 {
	if i < subBuckets {
		return uint64(i)
	}
	o := i/subBuckets + subBits - 1
	sub := uint64(i % subBuckets)
	return (uint64(subBuckets)+sub+1)<<(o-subBits) - 1
}

func (h *histogram) add(d time.Duration) {
	us := uint64(max(d, 0) / time.Microsecond)
	h.counts[bucketOf(us)]++
	h.total++
}

// quantile returns the upper bound of the bucket holding the q-quantile
// (0 < q <= 1), 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.total) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i, n := range h.counts {
		seen += uint64(n)
		if seen >= rank {
			return time.Duration(upperBound(i)) * time.Microsecond
		}
	}
	return time.Duration(upperBound(buckets-1)) * time.Microsecond
}
