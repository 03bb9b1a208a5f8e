package contention

import (
	"math"
	"math/bits"
	"strconv"
	"time"
)

// histogram counts durations, rounded to the microsecond, in log-linear
// buckets as HdrHistogram does: each power of two of microseconds is cut
// into subBuckets equal buckets, so a bucket is at most 1/subBuckets of its
// lower bound wide, and the bucket's middle is within 1/(2×subBuckets)
// (1.6%) of every duration it counts. Durations under subBuckets µs have a
// bucket each (exact); the buckets reach 2^maxOctave µs (9.5 hours), and
// longer durations count in the last one. It also keeps the smallest and
// largest duration counted, which bound every estimate (a constant duration
// comes out exact) and the buckets a reset or a quantile has to visit. Its
// size is fixed, about 4 KB, whatever it counts; counting is a few shifts,
// two comparisons and an increment.
type histogram struct {
	counts   [buckets]uint32
	total    uint64
	min, max uint64 // µs, the extremes counted; meaningless while total is 0
}

const (
	subBits    = 5
	subBuckets = 1 << subBits
	maxOctave  = 35
	buckets    = (maxOctave - subBits + 1) * subBuckets
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

// bucketRange returns the smallest duration, in microseconds, bucket i
// counts and how many microseconds wide it is.
func bucketRange(i int) (lower, width uint64) {
	if i < subBuckets {
		return uint64(i), 1
	}
	shift := i/subBuckets - 1 // o - subBits
	sub := uint64(i % subBuckets)
	return (subBuckets + sub) << shift, 1 << shift
}

func (h *histogram) add(d time.Duration) {
	us := uint64(max(d, 0)+time.Microsecond/2) / uint64(time.Microsecond)
	h.counts[bucketOf(us)]++
	if h.total == 0 || us < h.min {
		h.min = us
	}
	if us > h.max {
		h.max = us
	}
	h.total++
}

// reset empties h, clearing only the buckets between its extremes: a lock
// the sketch stops tracking hands its entry to the next one at the cost of
// the buckets it used, not of the whole array.
func (h *histogram) reset() {
	if h.total > 0 {
		clear(h.counts[bucketOf(h.min) : bucketOf(h.max)+1])
	}
	h.total, h.min, h.max = 0, 0, 0
}

// quantile estimates the q-quantile (0 < q <= 1) of the durations counted,
// 0 for an empty histogram: the duration of rank ⌈q×total⌉ (the nearest
// rank) lies in some bucket, and the estimate is that bucket's middle,
// brought within the smallest and largest durations counted. It is within
// 1/(2×subBuckets) of the true duration (and exact under subBuckets µs),
// whatever the distribution, up to the last bucket, whose estimate is the
// largest duration counted.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q*float64(h.total) - 1e-9))
	rank = min(max(rank, 1), h.total)
	var seen uint64
	last := bucketOf(h.max)
	i := bucketOf(h.min)
	for ; i < last; i++ {
		seen += uint64(h.counts[i])
		if seen >= rank {
			break
		}
	}
	if i == buckets-1 {
		return time.Duration(h.max) * time.Microsecond // the last bucket has no upper bound
	}
	lower, width := bucketRange(i)
	mid := float64(lower) + float64(width-1)/2
	mid = min(max(mid, float64(h.min)), float64(h.max))
	return time.Duration(mid * float64(time.Microsecond))
}

// RoundedMillis returns d in milliseconds rounded to three significant
// digits (60 s is 60000, 20.54 ms is 20.5, 159.4 µs is 0.159): the precision
// of the percentiles, whose estimates are within 1.6%. LOCKSTATS and the
// status page's /api/lockstats give them so.
func RoundedMillis(d time.Duration) float64 {
	ms := float64(d) / float64(time.Millisecond)
	if ms <= 0 {
		return 0
	}
	// Rounded in decimal, as printed, not by scaling a float by 10^k.
	r, _ := strconv.ParseFloat(strconv.FormatFloat(ms, 'e', 2, 64), 64)
	return r
}

// FormatMillis is RoundedMillis as text, without an exponent: "60000",
// "20.5", "0.159", "0".
func FormatMillis(d time.Duration) string {
	return strconv.FormatFloat(RoundedMillis(d), 'f', -1, 64)
}
