package server

import (
	"slices"
	"strings"
	"testing"
)

// TestLocksWithoutCursor: LOCKS with no cursor is the first page, as
// LOCKS 0, for a person typing it and for `leasehold locks`; MATCH and
// COUNT may follow it without a cursor too.
func TestLocksWithoutCursor(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	for _, k := range []string{"jobs:a", "jobs:b", "reports:daily"} {
		do(t, rdb, "ACQUIRE", k, 30000).Int()
	}
	names := func(args ...any) (cursor string, keys []string) {
		t.Helper()
		r := do(t, rdb, append([]any{"LOCKS"}, args...)...).Slice()
		keys = stringsOf(r[1])
		slices.Sort(keys)
		return r[0].(string), keys
	}
	all := []string{"jobs:a", "jobs:b", "reports:daily"}
	for _, tc := range []struct {
		args []any
		want []string
	}{
		{nil, all},
		{[]any{0}, all},
		{[]any{"MATCH", "jobs:*"}, all[:2]},
		{[]any{"match", "jobs:*", "COUNT", 100}, all[:2]},
		{[]any{0, "MATCH", "jobs:*", "COUNT", 100}, all[:2]},
	} {
		if cur, keys := names(tc.args...); cur != "0" || !slices.Equal(keys, tc.want) {
			t.Errorf("LOCKS %v = %s %v, want 0 %v", tc.args, cur, keys, tc.want)
		}
	}
	do(t, rdb, "LOCKS", "MATCH").Err("ERR syntax error")
	do(t, rdb, "LOCKS", "x").Err("ERR invalid cursor")

	// redis-cli, as a person would type it.
	host, port := ts.hostPort()
	res := runTool(t, "", redisTool(t, "redis-cli"), "-h", host, "-p", port, "LOCKS")
	if got := strings.Fields(res.stdout); res.exit != 0 || len(got) != 4 || got[0] != "0" {
		t.Errorf("redis-cli LOCKS: exit %d, %q %s", res.exit, res.stdout, res.stderr)
	}
}
