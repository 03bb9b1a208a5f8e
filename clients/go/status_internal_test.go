package leasehold

import "testing"

// TestParseStatusWithoutHoldersTotal: a server from before holders-total
// listed every holder, so the list's length is the total.
func TestParseStatusWithoutHoldersTotal(t *testing.T) {
	holder := []any{"token", "7", "owner", "a", "ttl", "1000"}
	for _, tc := range []struct {
		name  string
		reply []any
		total int
	}{
		{"old server", []any{"state", "held", "mode", "shared", "holders", []any{holder, holder}}, 2},
		{"list cut", []any{"state", "held", "holders-total", "300", "holders", []any{holder, holder}}, 300},
		{"free", []any{"state", "free", "holders-total", "0", "holders", []any{}}, 0},
	} {
		st, err := parseStatus(tc.reply)
		if err != nil || st.HoldersTotal != tc.total || len(st.Holders) != len(tc.reply[len(tc.reply)-1].([]any)) {
			t.Errorf("%s: %+v, %v; want HoldersTotal %d", tc.name, st, err, tc.total)
		}
	}
}
