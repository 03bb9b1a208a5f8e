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

// TestParseStatusHidden: the server writes another user's token and owner,
// and the last token with them, as empty strings: Hidden, not an error.
func TestParseStatusHidden(t *testing.T) {
	reply := []any{"state", "held", "token", "", "owner", "", "ttl", "900", "last-token", "", "mode", "exclusive",
		"holders-total", "1", "holders", []any{[]any{"token", "", "owner", "", "ttl", "900"}}}
	st, err := parseStatus(reply)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Hidden || st.Token != 0 || st.LastToken != 0 || len(st.Holders) != 1 || !st.Holders[0].Hidden {
		t.Fatalf("parseStatus of a hidden lease = %+v", st)
	}
	st, err = parseStatus([]any{"state", "held", "token", "7", "owner", "me", "last-token", "7", "holders", []any{}})
	if err != nil || st.Hidden || st.Token != 7 {
		t.Fatalf("parseStatus of an own lease = %+v, %v", st, err)
	}
}
