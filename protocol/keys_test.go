package protocol

import (
	"slices"
	"strings"
	"testing"
)

// TestCommandKeys: the keys of a call, as the ACL checks them.
func TestCommandKeys(t *testing.T) {
	for _, tc := range []struct {
		call string
		want []string
	}{
		{"ACQUIRE k 1000", []string{"k"}},
		{"MRELEASE a 1 b 2", []string{"a", "b"}},
		{"MACQUIRE 1000 2 a b", []string{"a", "b"}},
		{"MACQUIRE 1000 x a b", nil}, // does not parse: none
		{"PING", nil},
	} {
		var args [][]byte
		for _, f := range strings.Fields(tc.call) {
			args = append(args, []byte(f))
		}
		var got []string
		for _, k := range Lookup(args[0]).Keys(args) {
			got = append(got, string(k))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: keys %q, want %q", tc.call, got, tc.want)
		}
	}
}
