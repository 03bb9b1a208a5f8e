package server

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
	"github.com/redis/go-redis/v9"
)

// startPrefetchingServer starts a server whose table prefetches the keys of
// pipelined commands from its first lock on (PrefetchFrom 1).
func startPrefetchingServer(t *testing.T) *testServer {
	return startServer(t, func(c *Config) { c.Locker.PrefetchFrom = 1 })
}

// waitForPrefetching waits for the reaper to open ts's prefetch gate, once
// the table holds a lock. Where the platform has no prefetch stub the gate
// stays shut, and the replies must be the same all the same.
func waitForPrefetching(t *testing.T, ts *testServer) {
	t.Helper()
	if locker.PrefetchSupported {
		testutil.Eventually(t, 5*time.Second, "the reaper opens the prefetch gate", ts.table.PrefetchWorthwhile)
	}
}

// TestPipelinedCommandsWithPrefetch sends pipelines of mixed commands with
// the table's prefetching switched on (PrefetchFrom 1), so that every
// pipelined lock command's key is prefetched before it runs, and checks
// every reply. Prefetching must change no answer.
func TestPipelinedCommandsWithPrefetch(t *testing.T) {
	ts := startPrefetchingServer(t)
	rdb := ts.client()
	held, err := rdb.Do(ctx(t), "ACQUIRE", "held", 60000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	waitForPrefetching(t, ts)

	for round := range 3 {
		pipe := rdb.Pipeline()
		held2 := pipe.Do(ctx(t), "ACQUIRE", "held", 1000)
		verify := pipe.Do(ctx(t), "VERIFY", "held", held)
		var fresh []*redis.Cmd
		for i := range 40 {
			fresh = append(fresh, pipe.Do(ctx(t), "ACQUIRE", "fresh:"+strconv.Itoa(round)+":"+strconv.Itoa(i), 60000))
		}
		ping := pipe.Do(ctx(t), "PING")
		status := pipe.Do(ctx(t), "STATUS", "held")
		unknown := pipe.Do(ctx(t), "NOSUCHCOMMAND", "x")
		long := pipe.Do(ctx(t), "ACQUIRE", strings.Repeat("k", 100_000), 1000)
		empty := pipe.Do(ctx(t), "VERIFY", "", 1)
		if _, err := pipe.Exec(ctx(t)); err == nil {
			t.Fatal("Exec reported no error; the pipeline has three commands that must fail")
		}
		if err := held2.Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("ACQUIRE of a held lock: %v, want nil", err)
		}
		if n, err := verify.Int(); err != nil || n != 1 {
			t.Errorf("VERIFY of the held lease: %d, %v", n, err)
		}
		for i, c := range fresh {
			if tok, err := c.Uint64(); err != nil || tok == 0 {
				t.Fatalf("ACQUIRE fresh %d: %d, %v", i, tok, err)
			}
		}
		if s, err := ping.Text(); err != nil || s != "PONG" {
			t.Errorf("PING: %q, %v", s, err)
		}
		if st, err := status.Slice(); err != nil || len(st) < 4 || st[1] != "held" || st[3] != strconv.FormatUint(held, 10) {
			t.Errorf("STATUS held: %v, %v", st, err)
		}
		for name, c := range map[string]*redis.Cmd{"unknown command": unknown, "overlong key": long, "empty key": empty} {
			if c.Err() == nil || errors.Is(c.Err(), redis.Nil) {
				t.Errorf("%s: %v, want an error", name, c.Err())
			}
		}
	}

	// The same through a raw socket, with an inline command in the middle
	// and the last command split across two writes.
	rc := ts.dial()
	batch := resp("ACQUIRE", "raw:1", "60000") + resp("ACQUIRE", "held", "1000") + "PING\r\n" + resp("VERIFY", "held", strconv.FormatUint(held, 10))
	last := resp("ACQUIRE", "raw:2", "60000")
	rc.send(batch + last[:9])
	time.Sleep(10 * time.Millisecond) // a deliberate gap, so that the server most likely reads the first part alone
	rc.send(last[9:])
	for i, want := range []string{":", "$-1", "+PONG", ":1", ":"} {
		if got := rc.line(); !strings.HasPrefix(got, want) || (want == ":" && len(got) < 2) {
			t.Fatalf("raw reply %d = %q, want %q...", i, got, want)
		}
	}
}
