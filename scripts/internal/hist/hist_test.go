package hist

import (
	"math"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 12345, 1e6, 1e9, 123456789012, math.MaxUint64} {
		i := bucketOf(v)
		if i < prev || i >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d: out of order or range", v, i)
		}
		prev = i
		lo, hi := bucketRange(i)
		if v < lo || v > hi {
			t.Fatalf("bucketOf(%d) = %d holds [%d, %d]", v, i, lo, hi)
		}
		if v >= subCount && float64(hi-lo)/float64(lo) > 1.0/halfCount {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/%d", i, lo, hi, halfCount)
		}
	}
	// Buckets tile the line: each starts right after the previous ends.
	for i := 1; i < histBuckets; i++ {
		_, hiPrev := bucketRange(i - 1)
		lo, _ := bucketRange(i)
		if lo != hiPrev+1 {
			t.Fatalf("bucket %d starts at %d, previous ends at %d", i, lo, hiPrev)
		}
	}
}

func TestQuantiles(t *testing.T) {
	var a, b Histogram
	// 1..1000 µs, split over two Histograms to test merge.
	for i := 1; i <= 1000; i++ {
		h := &a
		if i%2 == 0 {
			h = &b
		}
		h.Record(time.Duration(i) * time.Microsecond)
	}
	a.Merge(&b)
	s := a.Summary()
	if s.Count != 1000 {
		t.Fatalf("count %d", s.Count)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p50", s.P50Ms, 0.5}, {"p99", s.P99Ms, 0.99}, {"p999", s.P999Ms, 0.999}, {"max", s.MaxMs, 1}, {"mean", s.MeanMs, 0.5005},
	} {
		if math.Abs(c.got-c.want)/c.want > 0.02 {
			t.Errorf("%s = %.4f ms, want %.4f ms within 2%%", c.name, c.got, c.want)
		}
	}
	var empty Histogram
	if s := empty.Summary(); s.P99Ms != 0 || s.Count != 0 {
		t.Fatalf("empty summary %+v", s)
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	for i := 0; i < b.N; i++ {
		h.Record(time.Duration(i&0xfffff) * 37)
	}
}
