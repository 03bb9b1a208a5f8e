package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/protocol"
)

// lines asserts an array of strings, HELP's shape, and returns it.
func (r reply) lines() []string {
	r.t.Helper()
	var out []string
	for i, v := range r.Slice() {
		s, ok := v.(string)
		if !ok {
			r.t.Fatalf("element %d is not a string: %s", i, r)
		}
		out = append(out, s)
	}
	return out
}

func TestHelp(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()

	index := do(t, rdb, "HELP").lines()
	if fmt.Sprint(index) != fmt.Sprint(protocol.HelpIndex()) {
		t.Fatalf("HELP = %q, want the index", index)
	}
	for _, cmd := range protocol.Commands {
		found := false
		for _, l := range index {
			found = found || strings.HasPrefix(l, strings.ToUpper(cmd.Name)+" ") && strings.HasSuffix(l, " "+cmd.Summary)
		}
		if !found {
			t.Errorf("HELP has no line for %s with its summary", cmd.Name)
		}
	}

	acquire := protocol.Lookup([]byte("acquire"))
	for _, name := range []string{"ACQUIRE", "acquire", "AcQuIrE"} {
		got := do(t, rdb, "HELP", name).lines()
		if len(got) < 2 || got[0] != acquire.Usage() || !strings.HasPrefix(got[1], "    Takes a lease") {
			t.Fatalf("HELP %s = %q, want the syntax, then the summary", name, got)
		}
	}
	// Each command's HELP subcommand, which Redis's error for an unknown
	// subcommand points to, answers as HELP command.
	for _, name := range []string{"CLIENT", "COMMAND", "CONFIG"} {
		want := fmt.Sprint(do(t, rdb, "HELP", name).lines())
		if got := fmt.Sprint(do(t, rdb, name, "help").lines()); got != want {
			t.Errorf("%s HELP = %s, want %s", name, got, want)
		}
		do(t, rdb, name, "HELP", "x").Err("ERR wrong number of arguments for '" + strings.ToLower(name) + "|help' command")
	}

	do(t, rdb, "HELP", "nope").Err("ERR no such command 'nope'. Try HELP.")
	do(t, rdb, "HELP", "no\r\npe").Err("ERR no such command 'no??pe'. Try HELP.")
	do(t, rdb, "HELP", "acquire", "x").Err("ERR wrong number of arguments for 'help' command")
	do(t, rdb, "PING").Str("PONG") // the connection is still usable
}

// TestHelpInline types HELP as a telnet user does: an inline command, read
// back as status lines.
func TestHelpInline(t *testing.T) {
	ts := startServer(t)
	rc := ts.dial()
	rc.send("help verify\r\n")
	want := protocol.Lookup([]byte("verify")).Help()
	if got := rc.line(); got != fmt.Sprintf("*%d", len(want)) {
		t.Fatalf("got %q, want an array of %d lines", got, len(want))
	}
	for _, w := range want {
		if got := rc.line(); got != "+"+w {
			t.Fatalf("got %q, want %q", got, "+"+w)
		}
	}
}
