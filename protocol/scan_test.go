package protocol

import (
	"strings"
	"testing"
)

// TestReplaceReplies: ReplaceReplies replaces each reply, however
// nested, by the error, and keeps lock event messages.
func TestReplaceReplies(t *testing.T) {
	e := MisconfUnknownError("no space left on device")
	E := string(e.Frame())
	msg := "*3\r\n$7\r\nmessage\r\n$8\r\n__lock__\r\n$3\r\nabc\r\n"
	pmsg := "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$8\r\n__lock__\r\n$3\r\nabc\r\n"
	cases := []struct {
		name, in, want string
		ok             bool
	}{
		{"none", "", "", true},
		{"one of each kind", ":12\r\n+OK\r\n-ERR x\r\n$3\r\nabc\r\n$-1\r\n*-1\r\n", strings.Repeat(E, 6), true},
		{"nested arrays", "*2\r\n*2\r\n:1\r\n$0\r\n\r\n$2\r\nhi\r\n:5\r\n", E + E, true},
		{"messages kept", ":1\r\n" + msg + pmsg + ":2\r\n", E + msg + pmsg + E, true},
		{"a subscribe confirmation is a reply", "*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n", E, true},
		{"cut short", ":1\r\n$5\r\nab", "", false},
		{"not RESP", "hello\r\n", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ReplaceReplies([]byte(c.in), e)
			if ok != c.ok || ok && string(got) != c.want {
				t.Fatalf("ReplaceReplies(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
			}
		})
	}
}
