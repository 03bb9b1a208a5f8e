package stats

import (
	"math"
	"math/bits"
	"time"
)

// LatencyBoundCount is the number of latency buckets with an upper bound:
// bucket k holds the calls that took at most 2^k µs (1 µs to about 1.05 s),
// and one more holds those above.
const LatencyBoundCount = 21

// LatencyBounds are the upper bounds of CommandStats.Buckets, all but the
// last, which counts the calls slower than the last bound.
var LatencyBounds = func() []time.Duration {
	b := make([]time.Duration, LatencyBoundCount)
	for k := range b {
		b[k] = time.Microsecond << k
	}
	return b
}()

// LatencyBucket is the index of the bucket for a call that took d ns: the
// least k with d <= 2^k µs. For d >= 1, that is the bit length of
// (d-1)/1000: d <= 1000·2^k iff (d-1)/1000 < 2^k.
func LatencyBucket(d int64) int {
	if d <= 0 {
		return 0
	}
	return min(bits.Len64(uint64(d-1)/1000), LatencyBoundCount)
}

// CommandStats is one command's figures: INFO commandstats' and
// latencystats' line, and the metrics leasehold_commands_total and
// leasehold_command_duration_seconds. Stats.Commands has those of the
// commands called or rejected at least once, in the command table's order,
// then "unknown". A connection's commands count once its round of commands
// ends (or INFO runs in it).
type CommandStats struct {
	Name     string        // lower case, as in the command table; "unknown" for every name not in it
	Calls    uint64        // commands that ran: OK and Failed
	OK       uint64        // commands that ran and were not answered with an error
	Failed   uint64        // commands that ran and were answered with an error
	Rejected uint64        // commands refused before they ran (not in Calls)
	Duration time.Duration // the time the Calls took
	// Buckets counts the Calls by time taken: Buckets[k] those that took at
	// most LatencyBounds[k] and more than the bound before, the last one
	// those slower than every bound.
	Buckets []uint64
}

// Percentile returns the upper bound of the bucket that the call at
// quantile q (0 < q <= 1) falls in, or the last bound's double above them:
// an estimate that errs high by at most a factor of two.
func (st CommandStats) Percentile(q float64) time.Duration {
	if st.Calls == 0 {
		return 0
	}
	rank := min(max(uint64(math.Ceil(q*float64(st.Calls))), 1), st.Calls)
	var seen uint64
	for k, n := range st.Buckets {
		if seen += n; seen >= rank {
			if k < len(LatencyBounds) {
				return LatencyBounds[k]
			}
			break
		}
	}
	return 2 * LatencyBounds[len(LatencyBounds)-1]
}
