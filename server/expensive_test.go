package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/glob"
	"github.com/leasehold/leasehold/locker"
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
// its replies: a confirmation per name, or one error, which it returns. The
// confirmations go out before the hub has the names; a PING after them, run
// once the call has finished, makes sure it has.
func subscribeMany(t *testing.T, rc *rawConn, cmd string, names []string) respError {
	t.Helper()
	rc.send(cmd + " " + strings.Join(names, " ") + "\r\nPING\r\n")
	defer rc.reply() // PING's
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
		for _, cmd := range []string{"SUBSCRIBE", "PSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE"} {
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

	t.Run("pattern backtrack", func(t *testing.T) {
		rc := ts.dial()
		defer rc.Close()
		part := func(i, n int) string { return fmt.Sprintf("__lock__:*%0*d", n, i) }
		want := respError(fmt.Sprintf("ERR a part of a pattern after a '*' may be at most %d bytes long", protocol.MaxPatternBacktrack))
		if got := subscribeMany(t, rc, "PSUBSCRIBE", []string{"__lock__:ok*", part(0, protocol.MaxPatternBacktrack+1)}); got != want {
			t.Fatalf("PSUBSCRIBE of a pattern with a long part after '*': %q, want %q", got, want)
		}
		var most []string
		for i := range protocol.MaxBacktrackPerConn / protocol.MaxPatternBacktrack {
			most = append(most, part(i, protocol.MaxPatternBacktrack))
		}
		if got := subscribeMany(t, rc, "PSUBSCRIBE", most); got != "" {
			t.Fatalf("PSUBSCRIBE of %d patterns of %d bytes after '*': %q", len(most), protocol.MaxPatternBacktrack, got)
		}
		want = respError(fmt.Sprintf("ERR the parts after a '*' of a connection's patterns may be at most %d bytes in all", protocol.MaxBacktrackPerConn))
		if got := subscribeMany(t, rc, "PSUBSCRIBE", []string{"__lock__:*x"}); got != want {
			t.Fatalf("PSUBSCRIBE past the connection's bound: %q, want %q", got, want)
		}
		// One with no part after its '*' costs nothing; leaving one makes room.
		if got := subscribeMany(t, rc, "PSUBSCRIBE", []string{"__lock__:x*", most[0]}); got != "" {
			t.Fatalf("PSUBSCRIBE of a trailing-star pattern: %q", got)
		}
		rc.send("PUNSUBSCRIBE " + most[1] + "\r\n")
		rc.reply()
		if got := subscribeMany(t, rc, "PSUBSCRIBE", []string{"__lock__:*x"}); got != "" {
			t.Fatalf("PSUBSCRIBE after PUNSUBSCRIBE: %q", got)
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

// TestEventsSkipPatternsThatCannotMatch checks that a lock event is matched
// only against the patterns whose literal prefix its channel starts with:
// the report's 100k patterns on one connection made every ACQUIRE and
// RELEASE pay for all of them. Those that can match still get the event.
func TestEventsSkipPatternsThatCannotMatch(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	crowd := ts.dial()
	defer crowd.Close()
	var many []string
	for i := range protocol.MaxPatternsPerConn {
		many = append(many, fmt.Sprintf("__lock__:p%d:*", i))
	}
	if got := subscribeMany(t, crowd, "PSUBSCRIBE", many); got != "" {
		t.Fatalf("PSUBSCRIBE: %q", got)
	}
	// Patterns anchored at the end only, as many as MaxBacktrackPerConn
	// allows.
	tails := ts.dial()
	defer tails.Close()
	var ends []string
	for i := range 500 {
		ends = append(ends, fmt.Sprintf("__lock__:*:s%d", i))
	}
	if got := subscribeMany(t, tails, "PSUBSCRIBE", ends); got != "" {
		t.Fatalf("PSUBSCRIBE: %q", got)
	}
	watcher := ts.dial()
	defer watcher.Close()
	watch := []string{"__lock__:*", "__lock__:p7:*", "__lock__:p7?x", "*x"}
	if got := subscribeMany(t, watcher, "PSUBSCRIBE", watch); got != "" {
		t.Fatalf("PSUBSCRIBE: %q", got)
	}

	before := ts.hub.patternTries.Load()
	tok := do(t, rdb, "ACQUIRE", "p7:x", 1000).Token()
	// Tried: the watcher's four (one of them the crowd's too); none of the
	// tails', which end in ":s<n>".
	if tries := ts.hub.patternTries.Load() - before; tries != 4 {
		t.Fatalf("one event tried %d patterns, want 4 of %d", tries, len(many)+len(ends)+len(watch)-1)
	}
	event := fmt.Sprintf("acquired %d", tok)
	gotPatterns := map[string]bool{}
	for range watch {
		got := nextMessage(t, watcher)
		if len(got) != 4 || got[0] != "pmessage" || got[2] != "__lock__:p7:x" || got[3] != event {
			t.Fatalf("watcher got %#v", got)
		}
		gotPatterns[got[1].(string)] = true
	}
	for _, p := range watch {
		if !gotPatterns[p] {
			t.Fatalf("no pmessage for %q: got %v", p, gotPatterns)
		}
	}
	if got := nextMessage(t, crowd); got[1] != "__lock__:p7:*" || got[3] != event {
		t.Fatalf("crowd got %#v", got)
	}
	before = ts.hub.patternTries.Load()
	do(t, rdb, "CREATE", "q:s17").Is(1) // no event
	do(t, rdb, "DELETE", "q:s17").Is(1)
	// Tried: __lock__:* and __lock__:*:s17.
	if tries := ts.hub.patternTries.Load() - before; tries != 2 {
		t.Fatalf("an event of q:s17 tried %d patterns, want 2", tries)
	}
	if got := nextMessage(t, tails); got[1] != "__lock__:*:s17" || got[2] != "__lock__:q:s17" {
		t.Fatalf("tails got %#v", got)
	}
	if got := nextMessage(t, watcher); got[1] != "__lock__:*" || got[2] != "__lock__:q:s17" {
		t.Fatalf("watcher got %#v", got)
	}

	// Once the patterns are gone, nothing is tried.
	crowd.send("PUNSUBSCRIBE\r\n")
	for range many {
		crowd.reply()
	}
	tails.send("PUNSUBSCRIBE\r\n")
	for range ends {
		tails.reply()
	}
	tails.send("PING\r\n")
	tails.reply()
	watcher.send("PUNSUBSCRIBE\r\n")
	for range watch {
		watcher.reply()
	}
	crowd.send("PING\r\n")
	crowd.reply()
	watcher.send("PING\r\n")
	watcher.reply()
	before = ts.hub.patternTries.Load()
	do(t, rdb, "RELEASE", "p7:x", tok).Is(1)
	if tries := ts.hub.patternTries.Load() - before; tries != 0 {
		t.Fatalf("with no patterns left, an event tried %d", tries)
	}
	ts.hub.mu.RLock()
	defer ts.hub.mu.RUnlock()
	if len(ts.hub.byAnchors) != 0 || len(ts.hub.anchorLens) != 0 || len(ts.hub.lenUses) != 0 {
		t.Fatalf("index not emptied: %d anchors, lengths %v", len(ts.hub.byAnchors), ts.hub.anchorLens)
	}
}

// BenchmarkPublishWithPatterns measures what one lock event costs its
// publisher (the ACQUIRE or RELEASE that caused it) while one connection
// listens to n patterns, none of which match it: through the index of
// anchors, and against the baseline of matching every pattern, as Publish
// did before. Patterns whose anchors the channel has ("__lock__:*p1*": it
// begins with "__lock__:") cannot be skipped and cost as the baseline.
func BenchmarkPublishWithPatterns(b *testing.B) {
	ev := locker.Event{Kind: locker.EventAcquired, Key: "jobs:42", Token: 7}
	channel := []byte(protocol.EventChannelPrefix + ev.Key)
	for _, n := range []int{1000, 100_000} {
		for _, shape := range []struct{ name, format string }{
			{"prefixed", "__lock__:p%d:*"},
			{"suffixed", "__lock__:*p%d"},
			{"unanchored", "__lock__:*p%d*"},
		} {
			h := newHub()
			c := &conn{}
			for i := range n {
				h.add(c, fmt.Sprintf(shape.format, i), true)
			}
			b.Run(fmt.Sprintf("patterns=%d/%s/indexed", n, shape.name), func(b *testing.B) {
				for b.Loop() {
					h.Publish(ev)
				}
			})
			b.Run(fmt.Sprintf("patterns=%d/%s/every-pattern", n, shape.name), func(b *testing.B) {
				for b.Loop() {
					for p := range h.patterns {
						glob.Match([]byte(p), channel)
					}
				}
			})
		}
	}
}
