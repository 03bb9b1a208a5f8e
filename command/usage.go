package command

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// onUsage makes a flag the command (or the top level) cannot parse a usage
// error, of exit status 2, in place of cli's help on stdout; a mistyped
// flag gets the nearest one suggested.
func onUsage(c *cli.Context, err error, _ bool) error {
	msg := flagMessage(c, err.Error())
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok && c.Command != nil {
		var names []string
		for _, f := range append(c.Command.Flags, cli.HelpFlag) {
			names = append(names, f.Names()...)
		}
		if s := nearest(strings.TrimPrefix(name, "-"), names); s != "" {
			dashes := "--"
			if len(s) == 1 {
				dashes = "-"
			}
			msg += fmt.Sprintf("; did you mean %s%s?", dashes, s)
		}
	}
	return usageError("%s", msg)
}

// flagErrorName finds the flag's name in the flag package's messages:
// "flag provided but not defined: -x", "flag needs an argument: -x",
// `invalid value "v" for flag -x: why`, `invalid boolean value "v" for -x: why`.
var flagErrorName = regexp.MustCompile(`(: | for | for flag )-([^\s:=]+)`)

// flagMessage rewrites the flag package's message as the user typed it: a
// long flag with two dashes (it writes -ttl), and for a value it could not
// parse ("parse error") the form the flag takes.
func flagMessage(c *cli.Context, msg string) string {
	loc := flagErrorName.FindStringSubmatchIndex(msg)
	if loc == nil {
		return msg
	}
	name := msg[loc[4]:loc[5]]
	if len(name) > 1 {
		msg = msg[:loc[4]] + "-" + msg[loc[4]:]
	}
	if !strings.HasSuffix(msg, ": parse error") || c.Command == nil {
		return msg
	}
	for _, f := range c.Command.Flags {
		if !slices.Contains(f.Names(), name) {
			continue
		}
		switch unwrapFlag(f).(type) {
		case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
			return strings.TrimSuffix(msg, "parse error") + "want an integer"
		case *cli.DurationFlag:
			return strings.TrimSuffix(msg, "parse error") + "want a duration with a unit (5s, 1m, 500ms)"
		}
	}
	return msg
}

// unknownCommand is the usage error for a command name app does not have,
// with the nearest one suggested.
func unknownCommand(app *cli.App, name string) error {
	names := []string{"help"}
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Names()...)
		}
	}
	if s := nearest(name, names); s != "" {
		return usageError("unknown command %q; did you mean %q?", name, s)
	}
	return usageError("unknown command %q", name)
}

// nearest returns the candidate closest to s in edit distance, or "" when
// none is close enough to be a typo of it: at most two edits, and at most
// half the longer word.
func nearest(s string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		d := levenshtein(s, c)
		if d < bestDist && 2*d <= max(len(s), len(c)) {
			best, bestDist = c, d
		}
	}
	return best
}

// levenshtein is the number of single-byte insertions, deletions and
// substitutions that turn a into b.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
