package command

import (
	"slices"
	"strings"
	"testing"
)

func TestRewriteArgs(t *testing.T) {
	cases := []struct {
		args string // split at spaces; "leasehold" goes in front
		want string // likewise; "" for args unchanged
		help string // the help command line a usage error points to
	}{
		// Flags after the positional arguments move in front of them.
		{"acquire k --ttl 5s", "acquire --ttl 5s -- k", "leasehold acquire --help"},
		{"acquire k --ttl=5s --shared", "acquire --ttl=5s --shared -- k", "leasehold acquire --help"},
		{"extend k 12 --ttl 40s", "extend --ttl 40s -- k 12", "leasehold extend --help"},
		{"verify k --addr h:1 12", "verify --addr h:1 -- k 12", "leasehold verify --help"},
		{"status k -h", "status -h", "leasehold status --help"},
		{"run k --help ls -l", "run --help", "leasehold run --help"},
		// Flags before KEY still work.
		{"acquire --ttl 5s k", "acquire --ttl 5s -- k", "leasehold acquire --help"},
		{"acquire --ttl 5s", "acquire --ttl 5s", "leasehold acquire --help"},
		// The value of a flag is taken whatever it looks like.
		{"acquire k --owner -x", "acquire --owner -x -- k", "leasehold acquire --help"},
		// -- ends the flags: what follows is an argument.
		{"acquire -- -k --ttl", "acquire -- -k --ttl", "leasehold acquire --help"},
		{"acquire k --ttl 5s -- --x", "acquire --ttl 5s -- k --x", "leasehold acquire --help"},
		// An unknown flag stays a flag, for the flag package to report.
		{"acquire k --tll 5s", "acquire --tll -- k 5s", "leasehold acquire --help"},
		// A bare --wait waits without bound.
		{"acquire k --wait", "acquire --wait=forever -- k", "leasehold acquire --help"},
		{"acquire --wait k", "acquire --wait=forever -- k", "leasehold acquire --help"},
		{"acquire k --wait --shared", "acquire --wait=forever --shared -- k", "leasehold acquire --help"},
		{"acquire k --wait 5s", "acquire --wait 5s -- k", "leasehold acquire --help"},
		{"acquire k --wait 500", "acquire --wait 500 -- k", "leasehold acquire --help"},
		{"acquire k --wait forever", "acquire --wait forever -- k", "leasehold acquire --help"},
		{"acquire k --wait=1m", "acquire --wait=1m -- k", "leasehold acquire --help"},
		// A word after a bare --wait that tries to be a duration is its value,
		// for the flag to refuse, not a KEY: a typo must not name the lock.
		{"acquire --wait 2min k", "acquire --wait 2min -- k", "leasehold acquire --help"},
		{"run --wait 1.5 k ls", "run --wait 1.5 -- k -- ls", "leasehold run --help"},
		{"run k --wait 2min -- ls", "run --wait 2min -- k -- ls", "leasehold run --help"},
		// run: flags up to -- or COMMAND; COMMAND's own are left alone.
		{"run k --ttl 5s -- ls -l", "run --ttl 5s -- k -- ls -l", "leasehold run --help"},
		{"run k --ttl 5s ls -l", "run --ttl 5s -- k -- ls -l", "leasehold run --help"},
		{"run k ls --ttl 5s", "run -- k -- ls --ttl 5s", "leasehold run --help"},
		{"run --ttl 5s k -- ls", "run --ttl 5s -- k -- ls", "leasehold run --help"},
		{"run --ttl 5s k ls", "run --ttl 5s -- k -- ls", "leasehold run --help"},
		{"run k --wait ls", "run --wait=forever -- k -- ls", "leasehold run --help"},
		{"run k --wait 10 ls", "run --wait 10 -- k -- ls", "leasehold run --help"},
		{"run k --bogus ls", "run --bogus -- k -- ls", "leasehold run --help"},
		{"run -- k ls", "run -- k -- ls", "leasehold run --help"},
		{"run -- k -- ls", "run -- k -- ls", "leasehold run --help"},
		{"run k -- -- ls", "run -- k -- -- ls", "leasehold run --help"},
		{"run k --", "run -- k --", "leasehold run --help"},
		{"run k", "run -- k", "leasehold run --help"},
		{"run --ttl 5s", "run --ttl 5s", "leasehold run --help"},
		// Flags before the command stay; the command's own are moved.
		{"--addr h:1 status k --addr h:2", "--addr h:1 status --addr h:2 -- k", "leasehold status --help"},
		{"--require-create serve --shards 4", "--require-create serve --shards 4", "leasehold serve --help"},
		// No command: serve, or cli's own errors.
		{"--addr h:1", "", "leasehold --help"},
		{"--bogus status k --ttl 5s", "", "leasehold --help"},
		{"-- status k", "", "leasehold --help"},
		{"runn k --ttl 5s", "", "leasehold --help"},
		{"help acquire", "", "leasehold --help"},
		// Shell completion passes the words as typed, but for --: cli would
		// not complete a line that holds one, and would run the command.
		{"acquire k --tt " + completionFlag, "", "leasehold --help"},
		{"acquire -- " + completionFlag, "acquire " + completionFlag, "leasehold --help"},
		{"run k -- ./deploy.sh " + completionFlag, "run k ./deploy.sh " + completionFlag, "leasehold --help"},
	}
	for _, tc := range cases {
		t.Run(tc.args, func(t *testing.T) {
			args := append([]string{"leasehold"}, strings.Fields(tc.args)...)
			want := args
			if tc.want != "" {
				want = append([]string{"leasehold"}, strings.Fields(tc.want)...)
			}
			got, help, err := rewriteArgs(newApp(), slices.Clone(args))
			if err != nil || !slices.Equal(got, want) || help != tc.help {
				t.Errorf("rewriteArgs(%q) = %q, %q, %v; want %q, %q", args, got, help, err, want, tc.help)
			}
		})
	}
}

func TestRewriteArgsHelpOfUnknownCommand(t *testing.T) {
	_, _, err := rewriteArgs(newApp(), []string{"leasehold", "help", "runn"})
	if err == nil || err.Error() != `unknown command "runn"; did you mean "run"?` {
		t.Fatalf("help runn: %v", err)
	}
}

// TestRewriteArgsFlagWithoutValue checks that a flag that takes a value and
// is left without one is an error here: the -- that rewriteArgs puts after
// the flags (or one the user wrote) would otherwise become its value, an
// owner of "--" shared by every host that ran the same line.
func TestRewriteArgsFlagWithoutValue(t *testing.T) {
	for _, args := range []string{
		"acquire k --ttl",
		"acquire k --owner",
		"acquire k --owner -- x",
		"acquire --owner -- k",
		"run k --owner -- ls",
		"run --owner -- k ls",
		"status k --addr",
		"create k --limit",
	} {
		t.Run(args, func(t *testing.T) {
			_, _, err := rewriteArgs(newApp(), append([]string{"leasehold"}, strings.Fields(args)...))
			if err == nil || !strings.HasPrefix(err.Error(), "flag needs an argument: --") {
				t.Errorf("rewriteArgs(%q): %v; want flag needs an argument", args, err)
			}
		})
	}
}
