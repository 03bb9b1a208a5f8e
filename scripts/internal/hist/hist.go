// Package hist counts latencies for the load generators, scripts/loadgen
// and scripts/clusterbench (a module of its own, which imports it across
// the module boundary), so that both measure alike.
package hist

import (
	"math/bits"
	"time"
)

// Histogram counts durations in log-linear buckets, as HdrHistogram does:
// values below 2^subBits ns are exact, and above that every power of two is
// split into 2^(subBits-1) equal buckets, so a recorded value is known to
// within 1/2^(subBits-1) (under 1.6%). Recording is an index computation and
// an increment; one Histogram per goroutine, merged at the end. The zero
// value is empty and ready.
type Histogram struct {
	counts [histBuckets]uint64
	total  uint64
	sum    uint64 // ns, for the mean
	max    uint64
}

const (
	subBits     = 7
	subCount    = 1 << subBits       // exact values 0..127 ns
	halfCount   = 1 << (subBits - 1) // buckets per power of two above that
	histBuckets = subCount + (64-subBits)*halfCount
)

// bucketOf returns the bucket index of v nanoseconds.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(v) - subBits // >= 1
	top := v >> shift                // in [halfCount, subCount)
	return subCount + (shift-1)*halfCount + int(top-halfCount)
}

// bucketRange returns the smallest and largest value bucket i holds.
func bucketRange(i int) (lo, hi uint64) {
	if i < subCount {
		return uint64(i), uint64(i)
	}
	k := i - subCount
	shift := uint(k/halfCount + 1)
	top := uint64(k%halfCount + halfCount)
	return top << shift, (top+1)<<shift - 1
}

// Record counts d; a negative d counts as 0.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[bucketOf(v)]++
	h.total++
	h.sum += v
	if v > h.max {
		h.max = v
	}
}

// Merge adds o's counts to h's.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
	if o.max > h.max {
		h.max = o.max
	}
}

// Quantile returns the value at quantile q (0..1): the midpoint of the bucket
// holding the ceil(q*total)-th smallest value, capped at the maximum seen.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.total) + 0.999999)
	if rank < 1 {
		rank = 1
	}
	if rank > h.total {
		rank = h.total
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			mid := lo + (hi-lo)/2
			if mid > h.max {
				mid = h.max
			}
			return time.Duration(mid)
		}
	}
	return time.Duration(h.max)
}

// Latency is a Histogram's summary in milliseconds, as redis-benchmark
// reports it.
type Latency struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Ms returns d in milliseconds, as Latency gives durations.
func Ms(d time.Duration) float64 { return float64(d) / 1e6 }

// Summary returns h's count, mean, p50, p99, p99.9 and maximum.
func (h *Histogram) Summary() Latency {
	l := Latency{Count: h.total, MaxMs: Ms(time.Duration(h.max))}
	if h.total > 0 {
		l.MeanMs = Ms(time.Duration(h.sum / h.total))
		l.P50Ms = Ms(h.Quantile(0.50))
		l.P99Ms = Ms(h.Quantile(0.99))
		l.P999Ms = Ms(h.Quantile(0.999))
	}
	return l
}
