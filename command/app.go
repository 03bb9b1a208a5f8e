// Package command is the leasehold command line: serve (the lock server),
// the client commands that talk to one from shell scripts (run; acquire,
// verify, release, extend, status; the admin commands create, delete, locks,
// info, force-release), with their password and TLS settings, probe (a
// health check of the admin listener), and completion. It owns flags and
// their order on the command line, usage errors, exit statuses and the
// process group run puts its command in; the server itself is package
// server, the client package clients/go.
// See docs/cli.md.
package command

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is what --version prints and the server reports in INFO; Run
// sets it (buildVersion).
var version = "dev"

// Run runs the leasehold command line args (args[0] is the program's name)
// and returns the process's exit status: 0, 1 for a server's failure, or the
// code of a client command's outcome (docs/cli.md). ctx's cancellation
// (SignalContext: SIGINT, SIGTERM) shuts serve down and ends a client
// command's wait; ver is the version set at build time, or "" for the one
// Go embedded (buildVersion).
func Run(ctx context.Context, args []string, ver string) int {
	version = buildVersion(ver)
	app := newApp()
	args, help, err := rewriteArgs(app, args)
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	return exitStatus(err, os.Stderr, help)
}

func newApp() *cli.App {
	app := &cli.App{
		Name:  "leasehold",
		Usage: "a lock server with fencing tokens, spoken to over the Redis protocol",
		UsageText: "leasehold COMMAND [flags] [ARGUMENTS...]\n" +
			"leasehold [serve flags]   (no COMMAND: leasehold serve; see leasehold serve --help)",
		Version: version,
		// serve's flags, hidden: `leasehold --addr X serve` and `leasehold
		// --addr X` work, but they are not options of every command.
		Flags:  configurable(hidden(serveFlags())),
		Action: serveOrUnknown, // serve is the default when no subcommand is given
		// main turns errors into exit statuses; cli must not exit itself.
		ExitErrHandler:       func(*cli.Context, error) {},
		OnUsageError:         onUsage,
		EnableBashCompletion: true,
		Commands: append(append([]*cli.Command{{
			Name:   "serve",
			Usage:  "run the lock server",
			Flags:  configurable(withoutEnv(serveFlags())),
			Action: serveNoArgs,
		}}, clientCommands()...), probeCommand(), completionCommand()),
	}
	for _, cmd := range app.Commands {
		// A lone "help" is a KEY (`leasehold status help`), not a topic;
		// every command reports its usage errors as onUsage does.
		cmd.HideHelpCommand = true
		cmd.OnUsageError = onUsage
		var where string // see rewriteArgs
		switch {
		case strings.Contains(cmd.ArgsUsage, "COMMAND"):
			where = "Flags may come before or after KEY, up to COMMAND or --;\nwhat follows belongs to COMMAND."
		case strings.HasPrefix(cmd.ArgsUsage, "KEY"):
			where = "Flags may come before or after KEY; -- ends them."
		}
		if where != "" && cmd.Description != "" {
			cmd.Description += "\n\n"
		}
		cmd.Description += where
	}
	return app
}

// serveOrUnknown is the top level's action: serve, unless a word is left
// over, which can only be a mistyped command.
func serveOrUnknown(c *cli.Context) error {
	if c.NArg() > 0 {
		return unknownCommand(c.App, c.Args().First())
	}
	return serve(c)
}

// serveNoArgs is serve's action: it takes no arguments.
func serveNoArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("unexpected argument %q: serve takes none", c.Args().First())
	}
	return serve(c)
}

// hidden hides flags from the help. (cli's flag types share no setter; each
// has a Hidden field.)
func hidden(flags []cli.Flag) []cli.Flag {
	for _, f := range flags {
		reflect.ValueOf(f).Elem().FieldByName("Hidden").SetBool(true)
	}
	return flags
}

func env(name string) []string { return []string{"LEASEHOLD_" + name} }

// withoutEnv returns serve's own copies of the flags, which read no
// environment variable (their help still names it). The top-level copies
// read it, so that a flag on the command line, before or after "serve",
// wins over the environment: urfave/cli counts a flag set from the
// environment as set, and were serve's copies to read it, LEASEHOLD_ADDR
// would beat `leasehold --addr X serve`.
func withoutEnv(flags []cli.Flag) []cli.Flag {
	for _, f := range flags {
		var vars *[]string
		var usage *string
		switch f := f.(type) {
		case *cli.StringFlag:
			vars, usage = &f.EnvVars, &f.Usage
		case *cli.IntFlag:
			vars, usage = &f.EnvVars, &f.Usage
		case *cli.Int64Flag:
			vars, usage = &f.EnvVars, &f.Usage
		case *cli.DurationFlag:
			vars, usage = &f.EnvVars, &f.Usage
		case *cli.BoolFlag:
			vars, usage = &f.EnvVars, &f.Usage
		default:
			panic(fmt.Sprintf("withoutEnv: flag type %T", f))
		}
		for _, v := range *vars {
			*usage += " [$" + v + "]"
		}
		*vars = nil
	}
	return flags
}

// flag returns the context that holds flag name's value: the innermost
// command on whose command line it was given, so that `leasehold --addr X
// serve` and `leasehold serve --addr X` both work; else the top level, if
// the environment sets it (see withoutEnv); else c, for the default.
func flag(c *cli.Context, name string) *cli.Context {
	for _, ctx := range c.Lineage() {
		if ctx.Command != nil && ctx.IsSet(name) {
			return ctx
		}
	}
	return c
}
