package server

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

// TestSetIdleTimeout changes the idle timeout of a running server, on each
// transport: a connection already open is closed once it is silent for the
// new timeout, and none closes a connection any more. Lowered from an hour,
// the silence before the change counts, as in Redis; set from none, it
// counts from the change, since reads went untimed. The event loop applies
// it to a connection waiting for input; the goroutine transport from its
// next read.
func TestSetIdleTimeout(t *testing.T) {
	t.Parallel() // its cases wait on timeouts, each on a server of its own
	const idle = 200 * time.Millisecond
	for _, tc := range []struct {
		name    string
		loops   int
		from    time.Duration
		nextCmd bool // the new timeout applies from the connection's next read
	}{
		{"event loop, from none", 1, 0, false},
		{"event loop, from an hour", 1, time.Hour, false},
		{"goroutines, from none", 0, 0, true},
		{"goroutines, from an hour", 0, time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := startServer(t, withIOLoops(tc.loops), withIdleTimeout(tc.from))
			rc := ts.dial()
			rc.send("PING\r\n")
			rc.expect("PONG")
			// Silent for longer than the new timeout before it is set (a
			// second connection's traffic marks the time, not a sleep).
			other := ts.client()
			began := time.Now()
			testutil.Eventually(t, 10*time.Second, "time passing", func() bool {
				return other.Ping(context.Background()).Err() == nil && time.Since(began) > 2*idle
			})

			set := time.Now()
			was, err := ts.SetIdleTimeout(idle)
			if err != nil || was != tc.from {
				t.Fatalf("SetIdleTimeout: was %v, %v; want %v", was, err, tc.from)
			}
			if tc.nextCmd {
				rc.send("PING\r\n")
				rc.expect("PONG")
			}
			rest, err := readEOF(rc) // dial's deadline (10 s) bounds the wait
			took := time.Since(set)
			if !errors.Is(err, io.EOF) || rest != "" {
				t.Fatalf("want EOF, got %v after %q", err, rest)
			}
			if took < idle && (tc.from == 0 || tc.nextCmd) || took > 5*time.Second {
				t.Fatalf("closed %v after the change, want about %v", took, idle)
			}
			if got := infoField(t, other, "limits", "idle_timeout_ms"); got != "200" {
				t.Errorf("INFO idle_timeout_ms = %s, want 200", got)
			}

			// Back to none: a silent connection stays, for several times
			// the old timeout.
			if was, err := ts.SetIdleTimeout(0); err != nil || was != idle {
				t.Fatalf("SetIdleTimeout(0): was %v, %v", was, err)
			}
			rc = ts.dial()
			rc.send("PING\r\n")
			rc.expect("PONG")
			rc.SetReadDeadline(time.Now().Add(3 * idle))
			if _, err := rc.r.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("a silent connection under no idle timeout: %v, want it open", err)
			}
		})
	}
	ts := startServer(t)
	if _, err := ts.SetIdleTimeout(-time.Second); err == nil {
		t.Fatal("a negative idle timeout was taken")
	}
}

// TestSetMaxMemory changes --maxmemory of a running server: a limit below
// the heap in use refuses what makes leases, raising it (or none) accepts
// them again, and INFO shows the limit in force.
func TestSetMaxMemory(t *testing.T) {
	var used atomic.Uint64
	used.Store(200)
	ts := startServerReading(t, used.Load) // no limit
	rdb := ts.client()
	do(t, rdb, "ACQUIRE", "before", 10000).Token()

	probes := 0
	acquire := func() reply {
		probes++
		return do(t, rdb, "ACQUIRE", "probe"+strconv.Itoa(probes), 10000)
	}
	for _, step := range []struct {
		limit   int64
		refused bool
	}{
		{100, true},
		{300, false},
		{150, true},
		{0, false},
	} {
		if _, err := ts.SetMaxMemory(step.limit); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 30*time.Second, "maxmemory "+strconv.FormatInt(step.limit, 10)+" in force", func() bool {
			return refused(acquire()) == step.refused
		})
		if got := infoField(t, rdb, "memory", "maxmemory"); got != strconv.FormatInt(step.limit, 10) {
			t.Errorf("INFO maxmemory = %s, want %d", got, step.limit)
		}
	}
	if _, err := ts.SetMaxMemory(-1); err == nil {
		t.Fatal("a negative maxmemory was taken")
	}
}
