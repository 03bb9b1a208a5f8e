package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/glob"
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
