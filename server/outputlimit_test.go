package server

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

func TestParseOutputLimits(t *testing.T) {
	def := DefaultOutputLimits()
	tests := []struct {
		in   string
		want OutputLimits
		err  string
	}{
		{in: "normal 0 0 0 pubsub 32mb 8mb 60", want: def},
		{in: "normal 1kb 2k 3", want: OutputLimits{Normal: OutputLimit{Hard: 1024, Soft: 2000, SoftFor: 3 * time.Second}, PubSub: def.PubSub}},
		{in: "PUBSUB 1GB 1m 0", want: OutputLimits{PubSub: OutputLimit{Hard: 1 << 30, Soft: 1e6}}},
		{in: "pubsub 100 50b 1 normal 7 0 0", want: OutputLimits{Normal: OutputLimit{Hard: 7}, PubSub: OutputLimit{Hard: 100, Soft: 50, SoftFor: time.Second}}},
		{in: "", err: "want groups"},
		{in: "normal 0 0", err: "want groups"},
		{in: "replica 256mb 64mb 60", err: "no replicas"},
		{in: "other 0 0 0", err: "unknown class"},
		{in: "normal -1 0 0", err: "size"},
		{in: "normal 1tb 0 0", err: "size"},
		{in: "normal 0 0 1.5", err: "soft seconds"},
		{in: "normal 0 0 -1", err: "soft seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseOutputLimits(tt.in, def)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
			// String is Redis's CONFIG GET form, which parses back.
			if again, err := ParseOutputLimits(got.String(), OutputLimits{}); err != nil || again != got {
				t.Fatalf("%q parses to %+v, %v", got.String(), again, err)
			}
		})
	}
	if got := def.String(); got != "normal 0 0 0 pubsub 33554432 8388608 60" {
		t.Fatalf("default %q, want Redis's", got)
	}
	bad := DefaultConfig()
	bad.OutputLimits.Normal.Soft = -1
	if err := bad.Validate(); err == nil {
		t.Fatal("a negative limit passed Validate")
	}
}

func TestOutputLimitsInInfoAndConfig(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.OutputLimits.Normal = OutputLimit{Hard: 1 << 20, Soft: 1 << 19, SoftFor: 30 * time.Second}
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
	for _, lim := range []OutputLimit{
		{Hard: 16 << 10},
		{Soft: 16 << 10, SoftFor: time.Second},
	} {
		t.Run(lim.String(), func(t *testing.T) {
			ts := startServer(t, func(c *Config) { c.OutputLimits.Normal = lim })
			rdb := ts.client()
			attacker := ts.dial()
			attacker.send(strings.Repeat("COMMAND DOCS\r\n", 1000)) // some 10 MB of replies
			eventually(t, 30*time.Second, "the client's disconnection", func() bool {
				return infoField(t, rdb, "stats", "client_output_buffer_limit_disconnections") == "1"
			})
			readUntilClosed(t, attacker, 30*time.Second)
			do(t, rdb, "PING").Str("PONG")
		})
	}
}

// TestOutputLimitDisconnectsSlowSubscriber checks the pubsub class, which
// took the place of a fixed 32 MiB backlog: a subscriber that stops reading
// is disconnected once its messages pass the configured hard limit.
func TestOutputLimitDisconnectsSlowSubscriber(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.OutputLimits.PubSub = OutputLimit{Hard: 64 << 10} })
	rdb := ts.client()
	sub := ts.dial()
	sub.send("PSUBSCRIBE __lock__:*\r\n")
	sub.reply()
	owner := strings.Repeat("o", 1000) // events of a kilobyte each
	for round := 0; infoField(t, rdb, "stats", "client_output_buffer_limit_disconnections") != "1"; round++ {
		if round == 100 { // 20 MB of events
			t.Fatal("the subscriber that does not read is still connected")
		}
		pipe := rdb.Pipeline()
		for i := range 200 {
			pipe.Do(ctx(t), "ACQUIRE", fmt.Sprintf("k%d-%d", round, i), 60000, "OWNER", owner)
		}
		if _, err := pipe.Exec(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if got := infoField(t, rdb, "stats", "pubsub_slow_subscribers_closed"); got != "1" {
		t.Fatalf("pubsub_slow_subscribers_closed %s, want 1", got)
	}
	readUntilClosed(t, sub, 30*time.Second)
}

// TestBufferedReplies checks the one read of redcon's unexported buffer.
func TestBufferedReplies(t *testing.T) {
	var sink strings.Builder
	w := redcon.NewWriter(&sink)
	if n := bufferedReplies(w); n != 0 {
		t.Fatalf("new writer: %d bytes", n)
	}
	w.WriteBulkString("hello")
	w.WriteInt(42)
	want := len("$5\r\nhello\r\n:42\r\n")
	if n := bufferedReplies(w); n != want {
		t.Fatalf("%d bytes buffered, want %d", n, want)
	}
	if err := w.Flush(); err != nil || bufferedReplies(w) != 0 || sink.Len() != want {
		t.Fatalf("after Flush (%v): %d buffered, %d written", err, bufferedReplies(w), sink.Len())
	}
}
