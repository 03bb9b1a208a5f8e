package server

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
)

// nextMessage reads one pub/sub array off a raw connection.
func nextMessage(t *testing.T, rc *rawConn) []any {
	t.Helper()
	v, ok := rc.reply().([]any)
	if !ok {
		t.Fatalf("want a pub/sub array, got %#v", v)
	}
	return v
}

func TestLockEventsOverPubSub(t *testing.T) {
	clock := &locker.ManualClock{}
	ts := startServer(t, withManualClock(clock))
	rdb := ts.client()

	one := ts.dial()
	one.send("SUBSCRIBE __lock__:k\r\n")
	if got := nextMessage(t, one); !slices.Equal(got, []any{"subscribe", "__lock__:k", int64(1)}) {
		t.Fatalf("subscribe reply %#v", got)
	}
	many := ts.dial()
	many.send("PSUBSCRIBE __lock__:jobs:*\r\n")
	if got := nextMessage(t, many); !slices.Equal(got, []any{"psubscribe", "__lock__:jobs:*", int64(1)}) {
		t.Fatalf("psubscribe reply %#v", got)
	}

	tok := do(t, rdb, "ACQUIRE", "k", 100, "OWNER", "w 1").Token()
	do(t, rdb, "EXTEND", "k", tok, 100).Is(1)
	clock.Advance(100 * time.Millisecond)
	do(t, rdb, "VERIFY", "k", tok).Is(0) // settles the expiry
	job := do(t, rdb, "ACQUIRE", "jobs:7", 1000).Token()
	do(t, rdb, "RELEASE", "jobs:7", job).Is(1)
	do(t, rdb, "CREATE", "jobs:8").Is(1)
	do(t, rdb, "DELETE", "jobs:8").Is(1)
	do(t, rdb, "ACQUIRE", "other", 1000).Token() // nobody listens to this one

	for _, want := range []string{
		fmt.Sprintf("acquired %d w 1", tok),
		fmt.Sprintf("extended %d w 1", tok),
		fmt.Sprintf("expired %d w 1", tok),
	} {
		if got := nextMessage(t, one); !slices.Equal(got, []any{"message", "__lock__:k", want}) {
			t.Fatalf("got %#v, want message %q", got, want)
		}
	}
	for _, want := range []string{
		fmt.Sprintf("acquired %d", job),
		fmt.Sprintf("released %d", job),
		"deleted 0",
	} {
		got := nextMessage(t, many)
		if len(got) != 4 || got[0] != "pmessage" || got[1] != "__lock__:jobs:*" || got[3] != want {
			t.Fatalf("got %#v, want pmessage %q", got, want)
		}
	}

	// While listening, only pub/sub commands, PING and QUIT run.
	one.send("ACQUIRE x 1000\r\nPING\r\nUNSUBSCRIBE\r\nACQUIRE x 1000\r\n")
	if got, ok := one.reply().(respError); !ok || !strings.HasPrefix(string(got), "ERR Can't execute 'acquire'") {
		t.Fatalf("ACQUIRE while subscribed: %#v", got)
	}
	if got := nextMessage(t, one); !slices.Equal(got, []any{"pong", ""}) {
		t.Fatalf("PING while subscribed: %#v", got)
	}
	if got := nextMessage(t, one); !slices.Equal(got, []any{"unsubscribe", "__lock__:k", int64(0)}) {
		t.Fatalf("UNSUBSCRIBE: %#v", got)
	}
	token(t, one) // a normal connection again
	if got := infoField(t, rdb, "stats", "pubsub_patterns"); got != "1" {
		t.Fatalf("pubsub_patterns = %s, want 1", got)
	}
	many.Close()
}

// TestRedisCliSubscribeSeesEvents watches a lock with the real redis-cli.
func TestRedisCliSubscribeSeesEvents(t *testing.T) {
	bin := redisTool(t, "redis-cli")
	ts := startServer(t)
	rdb := ts.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, port := ts.hostPort()
	cmd := exec.CommandContext(ctx, bin, "-h", "127.0.0.1", "-p", port, "SUBSCRIBE", "__lock__:watched")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	expect := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("redis-cli ended before printing %q", want)
				}
				if l == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("redis-cli never printed %q", want)
			}
		}
	}
	expect("__lock__:watched") // the subscribe confirmation names the channel
	waitSubscribed(t, ts, "__lock__:watched")
	tok := do(t, rdb, "ACQUIRE", "watched", 30000, "OWNER", "cli-test").Token()
	expect(fmt.Sprintf("acquired %d cli-test", tok))
	do(t, rdb, "RELEASE", "watched", tok).Is(1)
	expect(fmt.Sprintf("released %d cli-test", tok))
}

// waitSubscribed polls until channel has a subscriber, bounded in time.
func waitSubscribed(t *testing.T, ts *testServer, channel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ts.hub.mu.RLock()
		n := len(ts.hub.channels[channel])
		ts.hub.mu.RUnlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody subscribed to %s", channel)
		}
		ts.Table().ExpireDue()
	}
}

// TestPatternLengthBound checks that LOCKS ... MATCH and PSUBSCRIBE refuse a
// pattern longer than protocol.MaxPatternLen: the report's 503-byte pattern
// over 20k long names held the server for 19.6 s. A refused PSUBSCRIBE
// subscribes to none of its patterns.
func TestPatternLengthBound(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	tooLong := strings.Repeat("*[a-z]", 83) + "?????" // 503 bytes
	want := fmt.Sprintf("ERR pattern is longer than %d bytes", protocol.MaxPatternLen)
	do(t, rdb, "LOCKS", 0, "MATCH", tooLong, "COUNT", 100000).Err(want)
	do(t, rdb, "LOCKS", 0, "MATCH", strings.Repeat("?", protocol.MaxPatternLen)).Slice()

	rc := ts.dial()
	rc.send("PSUBSCRIBE __lock__:a* " + tooLong + "\r\n")
	if got, ok := rc.reply().(respError); !ok || string(got) != want {
		t.Fatalf("PSUBSCRIBE of a long pattern: %#v, want %q", got, want)
	}
	// Not listening: an ordinary command runs.
	rc.send("ACQUIRE x 1000\r\n")
	token(t, rc)
	if got := infoField(t, rdb, "stats", "pubsub_patterns"); got != "0" {
		t.Fatalf("pubsub_patterns = %s after a refused PSUBSCRIBE, want 0", got)
	}
}
