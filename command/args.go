package command

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// completionFlag ends the command line the shell completion scripts run.
const completionFlag = "--generate-bash-completion"

// rewriteArgs lets a command's flags come after its positional arguments,
// as git's, kubectl's and docker's do: cli (like Go's flag package) stops at
// the first word that is not a flag, so rewriteArgs moves the command's
// flags, with their values, in front of its arguments and puts -- between
// the two. Flags before the command's name (the top level's, serve's
// copies) stay where they are. It returns the new command line and help,
// the command line that shows the help a usage error should point to.
//
// For run, flags may come after KEY up to -- or the first word that is not
// a flag (COMMAND); COMMAND and everything after it are left as they are.
// A bare --wait, not followed by a duration, a number or "forever", becomes
// --wait=forever.
//
// A word that looks like a flag the command does not have stays among the
// flags, for the flag package to report. With --help, the arguments are
// dropped: help is all the command does then. `help NAME` of an unknown
// NAME is an error here, since cli's help command would only say it has no
// topic.
func rewriteArgs(app *cli.App, args []string) ([]string, string, error) {
	help := app.Name + " --help"
	if len(args) < 2 {
		return args, help, nil
	}
	if app.EnableBashCompletion && args[len(args)-1] == completionFlag {
		// cli does not complete a line that holds a -- (urfave/cli#1993):
		// it runs the command instead, so a TAB after `run KEY -- CMD`
		// would run CMD. Without them the line is completed, never run;
		// cli reads the word being completed from os.Args, -- included
		// (so a copy: args may be os.Args).
		return slices.DeleteFunc(slices.Clone(args), func(s string) bool { return s == "--" }), help, nil
	}
	global := flagArity(app.Flags, []cli.Flag{cli.HelpFlag, cli.VersionFlag})
	for i := 1; i < len(args); i++ {
		tok := args[i]
		if tok == "--" {
			return args, help, nil
		}
		if name, inline, ok := splitFlag(tok); ok {
			takes, known := global[name]
			if !known {
				return args, help, nil // cli reports it
			}
			if takes && !inline {
				i++
			}
			continue
		}
		if tok == "help" || tok == "h" {
			if i+1 < len(args) && app.Command(args[i+1]) == nil && !strings.HasPrefix(args[i+1], "-") &&
				args[i+1] != "help" && args[i+1] != "h" {
				return args, help, unknownCommand(app, args[i+1])
			}
			return args, help, nil
		}
		cmd := app.Command(tok)
		if cmd == nil {
			return args, help, nil // the top level's action reports it
		}
		help = app.Name + " " + cmd.Name + " --help"
		tail, err := reorder(args[i+1:], flagArity(cmd.Flags, []cli.Flag{cli.HelpFlag}), cmd.Name == "run")
		return append(args[:i+1:i+1], tail...), help, err
	}
	return args, help, nil
}

// reorder puts the flags of a command's arguments first; arity is the
// command's flags (see flagArity). withCommand is for run's KEY [--]
// COMMAND [ARG...]. A flag that takes a value and has none (last, or before
// a --) is an error: the flag package would take the -- for its value.
func reorder(args []string, arity map[string]bool, withCommand bool) ([]string, error) {
	var flags, positional, rest []string
	dashes := false    // rest follows a --
	helpAsked := false // --help, whatever else there is
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if tok == "--" {
			rest, dashes = args[i+1:], true
			break
		}
		name, inline, ok := splitFlag(tok)
		if !ok {
			if withCommand && len(positional) == 1 {
				rest = args[i:] // COMMAND
				break
			}
			positional = append(positional, tok)
			continue
		}
		takes, known := arity[name]
		if name == "help" || name == "h" {
			// cli would read the arguments as the help topic.
			helpAsked = true
		}
		switch {
		case !known || !takes || inline:
			flags = append(flags, tok)
		case name == "wait" && (i+1 == len(args) || !isWaitValue(args[i+1])):
			flags = append(flags, "--wait=forever")
		case i+1 < len(args) && args[i+1] != "--":
			flags = append(flags, tok, args[i+1])
			i++
		default:
			return nil, usageError("flag needs an argument: --%s", name)
		}
	}
	if helpAsked {
		return flags, nil
	}
	if !withCommand {
		positional = append(positional, rest...)
		if len(positional) == 0 {
			return flags, nil
		}
		return append(append(flags, "--"), positional...), nil
	}
	// run: KEY, then an optional -- and COMMAND, as runArgs reads them.
	if len(positional) == 0 && len(rest) == 0 {
		return flags, nil
	}
	if len(positional) == 0 { // -- before KEY
		positional, rest = rest[:1], rest[1:]
		dashes = len(rest) > 0 && rest[0] == "--"
		if dashes {
			rest = rest[1:]
		}
	}
	out := append(append(flags, "--"), positional...)
	if dashes || len(rest) > 0 {
		out = append(append(out, "--"), rest...)
	}
	return out, nil
}

// isWaitValue reports whether s is a value of --wait, not the word after a
// bare --wait. A word that starts as a number does (5x, 2min, 1.5): it is a
// mistyped duration for the flag to refuse, not a KEY to lock. A KEY that
// starts with a digit follows --wait=forever, not a bare --wait.
func isWaitValue(s string) bool {
	if s == "forever" {
		return true
	}
	// Every duration, valid or not, starts so after its sign.
	num := strings.TrimLeft(s, "+-")
	return num != "" && (num[0] == '.' || '0' <= num[0] && num[0] <= '9')
}

// splitFlag returns the name of the flag tok is (-name or --name, with
// =value or without), and ok false for a word that is not a flag: "-",
// "--" or one that does not start with -.
func splitFlag(tok string) (name string, inline, ok bool) {
	if len(tok) < 2 || tok[0] != '-' || tok == "--" {
		return "", false, false
	}
	name = strings.TrimPrefix(tok[1:], "-")
	name, _, inline = strings.Cut(name, "=")
	return name, inline, true
}

// flagArity maps each name of each flag (its aliases too) to whether the
// flag takes a value: every flag but a bool.
func flagArity(groups ...[]cli.Flag) map[string]bool {
	arity := map[string]bool{}
	for _, flags := range groups {
		for _, f := range flags {
			takes := true
			if v, ok := f.(interface{ TakesValue() bool }); ok {
				takes = v.TakesValue()
			}
			for _, name := range f.Names() {
				arity[name] = takes
			}
		}
	}
	return arity
}
