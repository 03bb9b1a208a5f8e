package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/limits"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestConfigValidatesOutputLimits: Config.Validate refuses what
// OutputLimits.Validate refuses.
func TestConfigValidatesOutputLimits(t *testing.T) {
	bad := DefaultConfig()
	bad.OutputLimits.Normal.Soft = -1
	if err := bad.Validate(); err == nil {
		t.Fatal("a negative limit passed Validate")
	}
}

func TestOutputLimitsInInfoAndConfig(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.OutputLimits.Normal = limits.OutputLimit{Hard: 1 << 20, Soft: 1 << 19, SoftFor: 30 * time.Second}
	})
	rdb := ts.client()
	want := "normal 1048576 524288 30 pubsub 33554432 8388608 60"
	got := do(t, rdb, "CONFIG", "GET", "client-output-buffer-limit").Slice()
	if len(got) != 2 || got[1] != want {
		t.Fatalf("CONFIG GET client-output-buffer-limit: %q, want %q", got, want)
	}
	if got := infoField(t, rdb, "clients", "client_output_buffer_limit"); got != want {
		t.Fatalf("INFO client_output_buffer_limit: %q, want %q", got, want)
	}
	for field, want := range map[string]string{
		"client_output_pause_bytes": fmt.Sprint(outputPause),
		"client_round_commands":     fmt.Sprint(roundCommands),
		"client_round_input_bytes":  fmt.Sprint(roundInputBytes),
		"client_round_time_us":      fmt.Sprint(roundTime.Microseconds()),
	} {
		if got := infoField(t, rdb, "clients", field); got != want {
			t.Errorf("INFO %s: %s, want %s", field, got, want)
		}
	}
	if got := infoField(t, rdb, "stats", "client_output_buffer_limit_disconnections"); got != "0" {
		t.Fatalf("client_output_buffer_limit_disconnections %s at start", got)
	}
}

// readUntilClosed reads rc until the server closes it, and fails the test if
// it is still open after the timeout.
func readUntilClosed(t *testing.T, rc *rawConn, timeout time.Duration) {
	t.Helper()
	rc.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64<<10)
	for {
		if _, err := rc.r.Read(buf); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the connection is still open after %v", timeout)
			}
			return
		}
	}
}

// TestOutputLimitDisconnectsNonReadingClient drives a client that does not
// read past each bound of the normal class: hard (at once) and soft (once
// its output has stayed above it for the soft time). It is disconnected,
// counted in INFO, and the other clients carry on.
func TestOutputLimitDisconnectsNonReadingClient(t *testing.T) {
	for _, lim := range []limits.OutputLimit{
		{Hard: 16 << 10},
		{Soft: 16 << 10, SoftFor: time.Second},
	} {
		t.Run(lim.String(), func(t *testing.T) {
			ts := startServer(t, func(c *Config) { c.OutputLimits.Normal = lim })
			rdb := ts.client()
			attacker := ts.dial()
			attacker.send(strings.Repeat("COMMAND DOCS\r\n", 1000)) // some 10 MB of replies
			testutil.Eventually(t, 30*time.Second, "the client's disconnection", func() bool {
				return infoField(t, rdb, "stats", "client_output_buffer_limit_disconnections") == "1"
			})
			readUntilClosed(t, attacker, 30*time.Second)
			do(t, rdb, "PING").Str("PONG")
		})
	}
}

// TestOutputLimitSlowSubscriber checks the pubsub class, which took the
// place of a fixed 32 MiB backlog. A subscriber that stops reading is
// disconnected once its unsent messages pass the hard limit, or once they
// have stayed above the soft limit for the soft time (as in Redis, while
// messages keep coming). One that goes above the soft limit and then reads
// in time stays connected and gets every message, in order, however often
// it does so. The soft times are below Redis's whole seconds, which only
// its syntax requires.
func TestOutputLimitSlowSubscriber(t *testing.T) {
	tests := []struct {
		name  string
		lim   limits.OutputLimit
		reads bool // the subscriber reads each time its messages are above the limit
	}{
		{"hard", limits.OutputLimit{Hard: 64 << 10}, false},
		{"soft", limits.OutputLimit{Soft: 64 << 10, SoftFor: 500 * time.Millisecond}, false},
		{"soft, then reads", limits.OutputLimit{Soft: 64 << 10, SoftFor: time.Second}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, func(c *Config) { c.OutputLimits.PubSub = tt.lim })
			rdb := ts.client()
			stat := func(field string) string { return infoField(t, rdb, "stats", field) }
			sub := ts.dial()
			sub.send("CLIENT ID\r\nPSUBSCRIBE __lock__:*\r\n")
			id, ok := sub.reply().(int64)
			if !ok {
				t.Fatal("CLIENT ID did not answer an integer")
			}
			sub.reply()
			owner := strings.Repeat("o", 1000) // events of a kilobyte each
			published := 0
			publish := func(n int) {
				t.Helper()
				pipe := rdb.Pipeline()
				for range n {
					pipe.Do(ctx(t), "ACQUIRE", fmt.Sprintf("k%d", published), 60000, "OWNER", owner)
					published++
				}
				if _, err := pipe.Exec(ctx(t)); err != nil {
					t.Fatal(err)
				}
			}
			// fill publishes, the subscriber reading nothing, until the
			// server holds more of its messages than the limit (the
			// socket's buffers take megabytes first): disconnected at once
			// above the hard limit, above the soft one once the soft clock
			// runs.
			fill := func() {
				t.Helper()
				over := func() bool {
					if tt.lim.Hard > 0 {
						return stat("client_output_buffer_limit_disconnections") == "1"
					}
					return ts.unsentMessages(t, id) > tt.lim.Soft
				}
				for start := published; !over(); publish(200) {
					if published-start >= 20<<10 { // 20 MB of events
						t.Fatal("the subscriber that does not read never held more than the limit")
					}
				}
			}

			if !tt.reads {
				fill()
				// Messages keep coming, a few at a time, until the soft
				// time runs out.
				testutil.Eventually(t, 30*time.Second, "the subscriber's disconnection", func() bool {
					if stat("client_output_buffer_limit_disconnections") != "0" {
						return true
					}
					publish(10)
					return false
				})
				readUntilClosed(t, sub, 30*time.Second)
				for _, field := range []string{"client_output_buffer_limit_disconnections", "pubsub_slow_subscribers_closed"} {
					if got := stat(field); got != "1" {
						t.Errorf("%s %s, want 1", field, got)
					}
				}
				do(t, rdb, "PING").Str("PONG")
				return
			}

			// Each time, it reads in time, back below the soft limit. The
			// second time comes once the soft time has passed since the
			// first ended: a soft clock (or a write deadline) left running
			// would end the connection then.
			sub.SetReadDeadline(time.Now().Add(30 * time.Second))
			read := 0
			for round := range 2 {
				if round > 0 {
					// Not a wait for something to happen: the soft time
					// must pass.
					time.Sleep(tt.lim.SoftFor)
				}
				fill()
				for ; read < published; read++ {
					got := nextMessage(t, sub)
					if len(got) != 4 || got[0] != "pmessage" || got[2] != fmt.Sprintf("__lock__:k%d", read) {
						t.Fatalf("message %d of %d: %.80q, want the event of k%d", read, published, got, read)
					}
				}
			}
			sub.send("PING\r\n")
			if got := nextMessage(t, sub); len(got) != 2 || got[0] != "pong" {
				t.Fatalf("PING while subscribed: %#v", got)
			}
			for _, field := range []string{"client_output_buffer_limit_disconnections", "pubsub_slow_subscribers_closed"} {
				if got := stat(field); got != "0" {
					t.Errorf("%s %s, want 0", field, got)
				}
			}
		})
	}
}

// TestWriteSocketSoftLimitCloses checks the goroutine transport's writer at
// the soft limit: output above it that the client does not take within the
// soft time ends the connection, as the hard limit does, whatever its class.
// The writer goroutine has nobody after it to close the socket: the
// connection's own goroutine waits in Read on a client that sends nothing.
func TestWriteSocketSoftLimitCloses(t *testing.T) {
	for _, pubsub := range []bool{false, true} {
		t.Run(fmt.Sprintf("pubsub=%v", pubsub), func(t *testing.T) {
			lim := limits.OutputLimit{Soft: 1 << 10, SoftFor: 100 * time.Millisecond}
			ts := startServer(t, func(c *Config) { c.OutputLimits = limits.OutputLimits{Normal: lim, PubSub: lim} })
			server, client := net.Pipe() // unbuffered: a write waits for the client to read
			t.Cleanup(func() { server.Close(); client.Close() })
			c := newGoroutineConn(ts.Server, server)
			// net.Pipe takes no write at once: all of it goes to the writer
			// goroutine, whose write meets the soft time's deadline.
			c.wmu.Lock()
			err := c.writeSocket(make([]byte, lim.Soft+1), pubsub)
			c.wmu.Unlock()
			if err != nil {
				t.Fatalf("write above the soft limit: %v, want it queued", err)
			}
			// The client reads nothing until the soft time has run out:
			// reading would let the write finish within it.
			testutil.Eventually(t, 10*time.Second, "the soft-limit disconnection counted", func() bool {
				return ts.stats.outputLimitCloses.Load() == 1
			})
			client.SetReadDeadline(time.Now().Add(10 * time.Second))
			for {
				if _, err := client.Read(make([]byte, 4096)); err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						t.Fatal("the connection is still open after its soft time ran out")
					}
					break
				}
			}
			if got := ts.stats.outputLimitCloses.Load(); got != 1 {
				t.Fatalf("%d disconnections counted, want 1", got)
			}
		})
	}
}

// unsentMessages returns the bytes of messages the server holds for the
// connection with CLIENT ID id: those queued for its writer, and on an event
// loop the output its socket refused (read on the loop, which owns it). The
// goroutine transport's writer may hold one write more, blocked on the
// socket.
func (ts *testServer) unsentMessages(t testing.TB, id int64) int64 {
	t.Helper()
	c := ts.connByID(uint64(id))
	if c == nil {
		t.Fatalf("connection %d has been closed", id)
	}
	c.outMu.Lock()
	n := c.outBytes
	c.outMu.Unlock()
	if c.loop != nil {
		refused := make(chan int, 1)
		if !c.loop.post(func() { refused <- c.pending.Len() }) {
			t.Fatal("the event loop has stopped")
		}
		select {
		case r := <-refused:
			n += r
		case <-time.After(30 * time.Second):
			t.Fatal("the event loop did not answer in 30 s")
		}
	}
	return int64(n)
}
