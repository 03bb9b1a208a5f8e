package stats

import (
	"testing"
	"time"
)

func TestLatencyBucket(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{-5, 0},
		{1, 0},
		{time.Microsecond, 0},
		{time.Microsecond + 1, 1},
		{2 * time.Microsecond, 1},
		{3 * time.Microsecond, 2},
		{1024 * time.Microsecond, 10},
		{1024*time.Microsecond + 1, 11},
		{LatencyBounds[LatencyBoundCount-1], LatencyBoundCount - 1},
		{LatencyBounds[LatencyBoundCount-1] + 1, LatencyBoundCount},
		{time.Hour, LatencyBoundCount},
	} {
		if got := LatencyBucket(int64(tc.d)); got != tc.want {
			t.Errorf("LatencyBucket(%v) = %d, want %d", tc.d, got, tc.want)
		}
		if k := tc.want; tc.d > 0 && k < LatencyBoundCount && tc.d > LatencyBounds[k] {
			t.Errorf("%v is above its bucket's bound %v", tc.d, LatencyBounds[k])
		}
	}
}

func TestPercentile(t *testing.T) {
	st := CommandStats{Calls: 1000, Buckets: make([]uint64, LatencyBoundCount+1)}
	st.Buckets[2] = 990 // ≤ 4µs
	st.Buckets[5] = 9   // ≤ 32µs
	st.Buckets[LatencyBoundCount] = 1
	for q, want := range map[float64]time.Duration{
		0.5:   4 * time.Microsecond,
		0.99:  4 * time.Microsecond,
		0.995: 32 * time.Microsecond,
		0.999: 32 * time.Microsecond,
		1:     2 * LatencyBounds[LatencyBoundCount-1],
	} {
		if got := st.Percentile(q); got != want {
			t.Errorf("Percentile(%v) = %v, want %v", q, got, want)
		}
	}
}
