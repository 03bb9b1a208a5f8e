package persist

import (
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/rs/zerolog"
)

// BenchmarkJournaledGrantRelease is the lock table's hot path with a Store
// as its journal, committing every 64 operations.
func BenchmarkJournaledGrantRelease(b *testing.B) {
	dir := b.TempDir()
	s := openB(b, dir)
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

type benchSession struct {
	store *Store
	table *locker.Table
}

func openB(b *testing.B, dir string) *benchSession {
	clock := &locker.ManualClock{}
	clock.Advance(time.Hour)
	store, err := Open(Options{Dir: dir, Fsync: FsyncNo, Shards: 4, Clock: clock, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	cfg := locker.DefaultConfig()
	cfg.Shards = 4
	cfg.Clock = clock
	cfg.Journal = store
	cfg.FirstToken = store.FirstToken(1000)
	table, err := locker.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Load(table); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { table.Close() })
	return &benchSession{store, table}
}
