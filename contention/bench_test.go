package contention

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkAcquiredEnded measures one lease's two events (grant, end), on
// keys that all fit the sketch and on 1e5 keys that keep displacing each
// other (every event then evicts the lightest lock).
func BenchmarkAcquiredEnded(b *testing.B) {
	for _, keys := range []int{100, 100000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			s := newStats(b, DefaultTop, DefaultConfig().Shards)
			names := make([]string, keys)
			for i := range names {
				names[i] = fmt.Sprintf("lock:%07d", i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := names[i%keys]
				tok := uint64(i)
				s.Acquired(k, tok)
				s.Ended(k, tok, time.Millisecond, false)
			}
		})
	}
}
