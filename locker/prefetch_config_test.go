package locker

import (
	"strconv"
	"testing"
	"time"
)

// TestPrefetchAllocatesNothing: Prefetch runs on the hot path of every
// pipelined batch in a large table, so it must not allocate (the index's
// candidates iterator included), whether the keys are present or not.
func TestPrefetchAllocatesNothing(t *testing.T) {
	tb, _ := newTestTable(t)
	keys := make([][]byte, PrefetchMax+4)
	for i := range keys {
		keys[i] = []byte("key:" + strconv.Itoa(i))
		if i%2 == 0 {
			mustAcquire(t, tb, string(keys[i]), time.Minute, "")
		}
	}
	if n := testing.AllocsPerRun(100, func() { tb.Prefetch(keys) }); n != 0 {
		t.Fatalf("Prefetch allocates %v times per call", n)
	}
}

// TestPrefetchFromDefault: a zero PrefetchFrom means the documented default,
// and Config reports the threshold in force.
func TestPrefetchFromDefault(t *testing.T) {
	tb, _ := newTestTable(t)
	if got := tb.Config().PrefetchFrom; got != DefaultPrefetchFrom {
		t.Fatalf("PrefetchFrom 0 became %d, want %d", got, DefaultPrefetchFrom)
	}
	tb.ExpireDue()
	if tb.PrefetchWorthwhile() {
		t.Fatal("an empty table with the default threshold asks for prefetching")
	}
}
