package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/glob"
	"github.com/leasehold/leasehold/protocol"
)

// TestLocksMatchWorkIsBounded drives the report's attack within the pattern
// bound: a costly MATCH over long names with the largest COUNT. One call must
// stop once its matching reaches locksMatchSteps and hand back a cursor,
// instead of matching every name while the other clients wait, and the walk
// must still return each matching name once.
func TestLocksMatchWorkIsBounded(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	pattern := "*" + strings.Repeat("[a-z]", 50) + "b" // 252 bytes
	const n = 60
	var names, want []string
	pipe := rdb.Pipeline()
	for i := range n {
		last := "bc"[i%2 : i%2+1]
		name := fmt.Sprintf("%03d", i) + strings.Repeat("a", 1000) + last
		names = append(names, name)
		if last == "b" {
			want = append(want, name)
		}
		pipe.Do(ctx(t), "CREATE", name)
	}
	if _, err := pipe.Exec(ctx(t)); err != nil {
		t.Fatal(err)
	}
	cost := 0
	for _, name := range names {
		_, steps := glob.MatchCost([]byte(pattern), []byte(name))
		cost = max(cost, steps)
	}
	// A call stops after the name that reaches the budget.
	perCall := locksMatchSteps/cost + 1
	if perCall >= n/2 {
		t.Fatalf("a name costs %d steps: too cheap to test the budget of %d", cost, locksMatchSteps)
	}

	var got []string
	cursor := "0"
	calls := 0
	for {
		r := do(t, rdb, "LOCKS", cursor, "MATCH", pattern, "COUNT", 100000).Slice()
		calls++
		cursor = r[0].(string)
		for _, name := range r[1].([]any) {
			got = append(got, name.(string))
		}
		if cursor == "0" {
			break
		}
		if calls > 10*n {
			t.Fatal("LOCKS does not finish")
		}
	}
	wantOnce(t, got, want)
	if min := n / (perCall + 1); calls < min {
		t.Fatalf("%d names of %d steps each in %d calls: a call matched more than the budget of %d steps allows (want at least %d calls)",
			n, cost, calls, locksMatchSteps, min)
	}
}

// TestMReleaseBounded checks that MRELEASE refuses more than
// protocol.MaxMultiKeys pairs as a whole, before releasing any: the report's
// 500k pairs ran for 367 ms while the other clients waited.
func TestMReleaseBounded(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	tok := do(t, rdb, "ACQUIRE", "held", 60000).Token()
	args := []any{"MRELEASE", "held", tok}
	for i := range protocol.MaxMultiKeys {
		args = append(args, fmt.Sprintf("k%d", i), 1)
	}
	do(t, rdb, args...).Err(fmt.Sprintf("ERR MRELEASE takes at most %d key/token pairs", protocol.MaxMultiKeys))
	do(t, rdb, "VERIFY", "held", tok).Is(1)
	do(t, rdb, args[:len(args)-2]...).Int()
	do(t, rdb, "VERIFY", "held", tok).Is(0)
}

// subscribeMany sends one SUBSCRIBE or PSUBSCRIBE of names on rc and reads
// its replies: a confirmation per name, or one error, which it returns.
func subscribeMany(t *testing.T, rc *rawConn, cmd string, names []string) respError {
	t.Helper()
	rc.send(cmd + " " + strings.Join(names, " ") + "\r\n")
	for range names {
		switch got := rc.reply().(type) {
		case respError:
			return got
		case []any:
			if len(got) != 3 || got[0] != strings.ToLower(cmd) {
				t.Fatalf("%s reply %#v", cmd, got)
			}
		default:
			t.Fatalf("%s reply %#v", cmd, got)
		}
	}
	return ""
}

// TestSubscribeBounds checks the bounds on SUBSCRIBE and PSUBSCRIBE: names
// per call and channels and patterns per connection. The report subscribed
// one connection to 1M channels in 4.1 s, and 100k patterns on one
// connection made every ACQUIRE and RELEASE 32 times slower for everyone. A
// refused call subscribes to none of its names.
func TestSubscribeBounds(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	names := func(prefix string, from, n int) []string {
		var s []string
		for i := from; i < from+n; i++ {
			s = append(s, fmt.Sprintf("__lock__:%s%d", prefix, i))
		}
		return s
	}
	tooManyArgs := respError(fmt.Sprintf("ERR at most %d channels or patterns in one call", protocol.MaxSubscribeArgs))

	t.Run("per call", func(t *testing.T) {
		rc := ts.dial()
		defer rc.Close()
		for _, cmd := range []string{"SUBSCRIBE", "PSUBSCRIBE"} {
			if got := subscribeMany(t, rc, cmd, names("c", 0, protocol.MaxSubscribeArgs+1)); got != tooManyArgs {
				t.Fatalf("%s of %d names: %q, want %q", cmd, protocol.MaxSubscribeArgs+1, got, tooManyArgs)
			}
		}
		rc.send("ACQUIRE x 1000\r\n")
		token(t, rc) // not listening
	})

	t.Run("channels per connection", func(t *testing.T) {
		rc := ts.dial()
		defer rc.Close()
		per := protocol.MaxSubscribeArgs
		for i := 0; i < protocol.MaxChannelsPerConn; i += per {
			if got := subscribeMany(t, rc, "SUBSCRIBE", names("c", i, min(per, protocol.MaxChannelsPerConn-i))); got != "" {
				t.Fatalf("SUBSCRIBE from %d: %q", i, got)
			}
		}
		want := respError(fmt.Sprintf("ERR a connection may listen to at most %d channels", protocol.MaxChannelsPerConn))
		if got := subscribeMany(t, rc, "SUBSCRIBE", []string{"__lock__:c0", "__lock__:one-more"}); got != want {
			t.Fatalf("SUBSCRIBE past the bound: %q, want %q", got, want)
		}
		// Channels it already has add nothing.
		if got := subscribeMany(t, rc, "SUBSCRIBE", []string{"__lock__:c0", "__lock__:c1", "__lock__:c1"}); got != "" {
			t.Fatalf("SUBSCRIBE of channels it has: %q", got)
		}
		if got := infoField(t, rdb, "stats", "pubsub_channels"); got != fmt.Sprint(protocol.MaxChannelsPerConn) {
			t.Fatalf("pubsub_channels = %s, want %d", got, protocol.MaxChannelsPerConn)
		}
		// Leaving one makes room for one.
		rc.send("UNSUBSCRIBE __lock__:c5\r\n")
		rc.reply()
		if got := subscribeMany(t, rc, "SUBSCRIBE", []string{"__lock__:one-more"}); got != "" {
			t.Fatalf("SUBSCRIBE after UNSUBSCRIBE: %q", got)
		}
	})

	t.Run("patterns per connection", func(t *testing.T) {
		rc := ts.dial()
		defer rc.Close()
		per := protocol.MaxSubscribeArgs
		for i := 0; i < protocol.MaxPatternsPerConn; i += per {
			if got := subscribeMany(t, rc, "PSUBSCRIBE", names("p*", i, min(per, protocol.MaxPatternsPerConn-i))); got != "" {
				t.Fatalf("PSUBSCRIBE from %d: %q", i, got)
			}
		}
		want := respError(fmt.Sprintf("ERR a connection may listen to at most %d patterns", protocol.MaxPatternsPerConn))
		if got := subscribeMany(t, rc, "PSUBSCRIBE", []string{"__lock__:q*"}); got != want {
			t.Fatalf("PSUBSCRIBE past the bound: %q, want %q", got, want)
		}
		// Patterns count apart from channels.
		if got := subscribeMany(t, rc, "SUBSCRIBE", []string{"__lock__:k"}); got != "" {
			t.Fatalf("SUBSCRIBE beside the patterns: %q", got)
		}
	})
}
