package persist

import (
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// BenchmarkJournaledGrantRelease is the lock table's hot path with a Store
// as its journal, committing every 64 operations.
func BenchmarkJournaledGrantRelease(b *testing.B) {
	dir := b.TempDir()
	s := open(b, dir, nil, sessionOpts{fsync: FsyncNo})
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = []byte("key" + strconv.Itoa(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i&1023]
		tok, ok, _ := s.table.Acquire(&locker.Request{Key: k, TTL: time.Minute})
		if ok {
			s.table.Release(k, tok)
		}
		if i&63 == 0 {
			s.store.Commit()
		}
	}
}
