package server

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

// TestPrefetchAroundWaitAndQuit pipelines, with the prefetch gate open, a
// batch that parks mid-buffer in ACQUIRE ... WAIT and ends in QUIT followed
// by more lock commands. Every command before QUIT must run once, in order,
// after the wait ends; the commands after QUIT are peeked (and their keys
// prefetched) but must never run.
func TestPrefetchAroundWaitAndQuit(t *testing.T) {
	ts := startPrefetchingServer(t)
	rdb := ts.client()
	holder, err := rdb.Do(ctx(t), "ACQUIRE", "w", 30000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	waitForPrefetching(t, ts)

	var b strings.Builder
	b.WriteString(resp("ACQUIRE", "before", "30000"))
	b.WriteString(resp("ACQUIRE", "w", "30000", "WAIT", "5000"))
	for i := range 20 {
		b.WriteString(resp("ACQUIRE", "after:"+strconv.Itoa(i), "30000"))
	}
	b.WriteString(resp("STATUS", "w"))
	b.WriteString(resp("QUIT"))
	for i := range 20 {
		b.WriteString(resp("ACQUIRE", "never:"+strconv.Itoa(i), "30000"))
	}
	rc := ts.dial()
	rc.send(b.String())
	if got := rc.line(); !strings.HasPrefix(got, ":") {
		t.Fatalf("ACQUIRE before = %q", got)
	}
	// Parked, with the rest of the batch buffered behind it.
	testutil.Eventually(t, 5*time.Second, "ACQUIRE w WAIT parks", func() bool { return ts.stats.blocked.Load() == 1 })
	if n, err := rdb.Do(ctx(t), "RELEASE", "w", holder).Int(); err != nil || n != 1 {
		t.Fatalf("RELEASE w = %d, %v", n, err)
	}
	if got := rc.line(); !strings.HasPrefix(got, ":") || got == ":"+strconv.FormatUint(holder, 10) {
		t.Fatalf("ACQUIRE w WAIT = %q, want a new token", got)
	}
	for i := range 20 {
		if got := rc.line(); !strings.HasPrefix(got, ":") {
			t.Fatalf("ACQUIRE after:%d = %q", i, got)
		}
	}
	if got := rc.line(); !strings.HasPrefix(got, "*") {
		t.Fatalf("STATUS w = %q, want an array", got)
	}
	for rc.line() != "+OK" { // STATUS's fields, then QUIT's reply
	}
	if !rc.closed() {
		t.Fatal("the connection stayed open after QUIT")
	}
	for i := range 20 {
		if _, err := rdb.Do(ctx(t), "ACQUIRE", "never:"+strconv.Itoa(i), 1000).Uint64(); err != nil {
			t.Fatalf("never:%d is held (%v): a command after QUIT ran", i, err)
		}
	}
}
