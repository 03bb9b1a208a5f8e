package command

import (
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

func TestParseClientDuration(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		err  string // in the error; "" for none
	}{
		{"5000", 5 * time.Second, ""},
		{"5", 5 * time.Millisecond, ""},
		{"0", 0, ""},
		{"-1000", -time.Second, ""}, // the command refuses it, with its own message
		{"5s", 5 * time.Second, ""},
		{"1m", time.Minute, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"1.5s", 1500 * time.Millisecond, ""},
		{"5x", 0, "want milliseconds (5000) or a duration with a unit (5s, 1m, 500ms)"},
		{"5.5", 0, "want milliseconds (5000)"},
		{"", 0, "want milliseconds (5000)"},
		{"forever", 0, "want milliseconds (5000)"},
		{"9223372036854776", 0, "out of range"},
		{"99999999999999999999", 0, "out of range"},
	}
	for _, tc := range cases {
		got, err := parseClientDuration(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("parseClientDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseClientDuration(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
		}
	}
}

// TestClientDurationFlags: every duration flag of the client commands reads
// a bare number as milliseconds.
func TestClientDurationFlags(t *testing.T) {
	for _, cmd := range clientCommands() {
		for _, f := range cmd.Flags {
			if _, ok := f.(*cli.DurationFlag); ok {
				t.Errorf("%s --%s is a cli.DurationFlag; make it a durationFlag", cmd.Name, f.Names()[0])
			}
		}
	}
}

// TestSmallBareTTLWarns checks that --ttl 5, milliseconds by the rule but
// most likely meant as seconds, is taken with a warning that says so. A
// 5 ms lease may also end before acquire can prove it (a grant later than
// its ttl, on a loaded machine): then it is not acquired, exit 1.
func TestSmallBareTTLWarns(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	env := []string{"LEASEHOLD_ADDR=" + addr}
	cases := []struct {
		ttl  string
		warn bool
	}{{"5", true}, {"999", true}, {"1000", false}, {"5s", false}, {"500ms", false}}
	for _, tc := range cases {
		_, stderr, exit := run(t, env, "acquire", "k"+tc.ttl, "--ttl", tc.ttl)
		warned := strings.Contains(stderr, "a bare number is milliseconds")
		lateOK := tc.ttl == "5" && exit == exitNo
		if (exit != 0 && !lateOK) || warned != tc.warn {
			t.Errorf("acquire --ttl %s: exit %d, stderr %q; want 0, warning %t", tc.ttl, exit, stderr, tc.warn)
		}
	}
}
