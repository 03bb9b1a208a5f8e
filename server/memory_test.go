package server

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/servertest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/locker"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// oomText is Redis's reply to a write refused at maxmemory, word for word.
const oomText = "OOM command not allowed when used memory > 'maxmemory'."

// startServerReading is startServer with the server's memory reading
// replaced by read, so that a test decides what the heap in use is.
func startServerReading(t *testing.T, read func() uint64, opts ...option) *testServer {
	t.Helper()
	cfg := testConfig(t, opts...)
	srv, err := New(cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatal(err)
	}
	srv.mem.Read = read
	run := servertest.Start(t, srv, ErrServerClosed)
	return &testServer{Server: srv, t: t, addr: run.Addr, run: run}
}

func withMaxMemory(n int64) option { return func(c *Config) { c.MaxMemory = n } }

// TestMaxMemoryOverTheWire: while the heap in use is over --maxmemory, a
// command that would make a lock or a lease gets Redis's -OOM text, every
// other command works on, and INFO says so; once the heap is back under,
// new leases are granted again.
func TestMaxMemoryOverTheWire(t *testing.T) {
	var used atomic.Uint64
	used.Store(50)
	ts := startServerReading(t, used.Load, withMaxMemory(100))
	rdb := ts.client()
	a := do(t, rdb, "ACQUIRE", "a", 10000).Token()
	do(t, rdb, "CREATE", "c").Is(1)
	do(t, rdb, "CREATE", "f").Is(1)

	used.Store(200)
	probes := 0
	testutil.Eventually(t, 30*time.Second, "refusals begin", func() bool {
		probes++
		return refused(do(t, rdb, "ACQUIRE", "probe"+strconv.Itoa(probes), 10000))
	})
	if msg := do(t, rdb, "ACQUIRE", "new", 1000).Err("OOM"); msg != oomText {
		t.Fatalf("reply %q, want %q", msg, oomText)
	}
	do(t, rdb, "ACQUIRE", "f", 1000).Err(oomText)              // an existing free lock: a new lease
	do(t, rdb, "ACQUIRE", "a", 1000, "WAIT", 100).Err(oomText) // a wait that would queue
	do(t, rdb, "CREATE", "z").Err(oomText)
	do(t, rdb, "MACQUIRE", 1000, 2, "f", "y").Err(oomText)
	wantStatus(t, status(t, rdb, "f"), map[string]string{"state": "free"})

	// Everything else works on.
	do(t, rdb, "VERIFY", "a", a).Is(1)
	do(t, rdb, "EXTEND", "a", a, 20000).Is(1)
	wantStatus(t, status(t, rdb, "a"), map[string]string{"state": "held"})
	if r := do(t, rdb, "LOCKS", 0, "COUNT", 10); r.err != nil {
		t.Fatalf("LOCKS over maxmemory: %s", r)
	}
	do(t, rdb, "PING").Str("PONG")
	do(t, rdb, "DELETE", "c").Is(1)
	do(t, rdb, "RELEASE", "a", a).Is(1)
	mem := infoMap(t, rdb, "memory")
	for field, want := range map[string]string{
		"maxmemory":          "100",
		"used_memory":        "200",
		"maxmemory_policy":   "noeviction",
		"maxmemory_refusals": "6", // the probe's and the five above
	} {
		if mem[field] != want {
			t.Errorf("INFO memory %s = %q, want %q", field, mem[field], want)
		}
	}

	used.Store(90)
	testutil.Eventually(t, 30*time.Second, "refusals end", func() bool {
		return do(t, rdb, "ACQUIRE", "again", 1000).err == nil
	})
	do(t, rdb, "CREATE", "z").Is(1)
}

// TestMaxMemoryRealHeap runs the real reading, the Go heap in use: a limit
// of one byte is always exceeded, and no limit (the default) never is.
func TestMaxMemoryRealHeap(t *testing.T) {
	t.Run("limit", func(t *testing.T) {
		ts := startServer(t, withMaxMemory(1))
		rdb := ts.client()
		testutil.Eventually(t, 30*time.Second, "refusals begin", func() bool {
			return refused(do(t, rdb, "ACQUIRE", "k", 1000))
		})
		do(t, rdb, "ACQUIRE", "k", 1000).Err(oomText)
		do(t, rdb, "VERIFY", "k", 1).Is(0)
		if n, err := strconv.ParseInt(infoField(t, rdb, "memory", "used_memory"), 10, 64); err != nil || n <= 1 {
			t.Fatalf("INFO used_memory = %d, %v", n, err)
		}
	})
	t.Run("default", func(t *testing.T) {
		ts := startServer(t)
		rdb := ts.client()
		do(t, rdb, "ACQUIRE", "k", 1000).Token()
		mem := infoMap(t, rdb, "memory")
		if mem["maxmemory"] != "0" || mem["maxmemory_refusals"] != "0" {
			t.Fatalf("INFO memory without a limit: %v", mem)
		}
	})
}

// TestMemoryReturnedAfterMassExpiry takes 200,000 leases, lets them all
// expire, and checks that the lock table gives its memory back and that
// the Go heap returns it to the OS: a burst must not pin its peak for the
// life of the process. It asserts what came back, never how fast.
func TestMemoryReturnedAfterMassExpiry(t *testing.T) {
	const n = 200_000              // a table of some 22 MB: over returnMin, the least fall returned at once
	clock := &locker.ManualClock{} // the leases expire when the test says, however slow the load
	ts := startServer(t, withManualClock(clock))
	rdb := ts.client()
	before := infoMap(t, rdb, "memory")
	rssBefore := rss()
	c := context.Background()
	const batch = 10_000
	for start := 0; start < n; start += batch {
		pipe := rdb.Pipeline()
		for j := start; j < start+batch; j++ {
			pipe.Do(c, "ACQUIRE", "mass-expiry-lock-"+strconv.Itoa(j), 1000, "OWNER", "owner-"+strconv.Itoa(j))
		}
		if _, err := pipe.Exec(c); err != nil {
			t.Fatal(err)
		}
	}
	tableAt := func() int64 { return infoInt(t, rdb, "locks", "lock_table_bytes") }
	testutil.Eventually(t, 30*time.Second, "the reaper counts the table", func() bool { return tableAt() >= n*64 })
	peakTable := tableAt()
	peak := infoMap(t, rdb, "memory")
	rssPeak := rss()

	clock.Advance(2 * time.Second)
	testutil.Eventually(t, 30*time.Second, "every lease expired", func() bool { return infoInt(t, rdb, "locks", "locks") == 0 })
	testutil.Eventually(t, 30*time.Second, "the table gave its memory back", func() bool { return tableAt() < peakTable/20 })
	released := func() int64 { return infoInt(t, rdb, "memory", "heap_released") }
	// At least what the table held goes back to the OS. (Go's scavenger
	// alone returned half of it within 15 s, and RSS stayed near its peak.)
	testutil.Eventually(t, 30*time.Second, "the heap returned it to the OS", func() bool {
		return released()-atoi(t, peak["heap_released"]) >= peakTable
	})
	after := infoMap(t, rdb, "memory")
	t.Logf("lock table bytes: %d at %d leases, %d after expiry", peakTable, n, tableAt())
	t.Logf("used_memory: %s before, %s at the peak, %s after; heap_released %s, %s, %s",
		before["used_memory"], peak["used_memory"], after["used_memory"],
		before["heap_released"], peak["heap_released"], after["heap_released"])
	t.Logf("process RSS (server and test client): %d kB before, %d kB at the peak, %d kB after", rssBefore, rssPeak, rss())
}

// refused reports whether r is an -OOM reply.
func refused(r reply) bool { return r.err != nil && strings.HasPrefix(r.err.Error(), "OOM ") }

func infoInt(t *testing.T, rdb *redis.Client, section, field string) int64 {
	t.Helper()
	return atoi(t, infoField(t, rdb, section, field))
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rss is the process's resident set in kB, for the log; 0 where /proc has
// no answer.
func rss() int64 {
	if runtime.GOOS != "linux" {
		return 0
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			n, _ := strconv.ParseInt(string(bytes.Fields(v)[0]), 10, 64)
			return n
		}
	}
	return 0
}
