package main

// The client side of the command line: run, acquire, verify, release, extend
// and status, on the Go client (clients/go). See docs/cli.md.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

// Exit statuses of the client commands, as docs/cli.md lists them.
const (
	exitYes     = 0  // granted, true, done
	exitNo      = 1  // not granted (within --wait), false, not held
	exitFailure = 2  // bad arguments, no server, an error reply
	exitLost    = 75 // run: the lease was lost and the command stopped (EX_TEMPFAIL)
	// run exits 126 when the command cannot be started, 127 when it is not
	// found, as a shell does, and 128+n when it (or leasehold, while
	// waiting for the lock) is killed by signal n.
	exitCannotExec = 126
	exitNotFound   = 127
)

// Defaults of the client commands' flags.
const (
	defaultTTL       = 30 * time.Second
	defaultKillGrace = 10 * time.Second
)

// exitCodeError is an error with the exit status it calls for; it is a
// cli.ExitCoder. main prints its message, if any, and exits with the code.
type exitCodeError struct {
	code int
	err  error // nil: exit silently
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitCodeError) ExitCode() int { return e.code }
func (e *exitCodeError) Unwrap() error { return e.err }

func exitWith(code int, err error) error { return &exitCodeError{code: code, err: err} }

func usageError(format string, args ...any) error {
	return exitWith(exitFailure, fmt.Errorf(format+" (see --help)", args...))
}

// exitStatus reports err on w and returns the process's exit status: an
// ExitCoder's code, 1 for any other error (the server's failures), 0 for
// none.
func exitStatus(err error, w io.Writer) int {
	if err == nil {
		return 0
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(w, "leasehold:", strings.TrimPrefix(msg, "leasehold: "))
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

// signalReceived is the cause of the main context's cancellation.
type signalReceived struct{ sig os.Signal }

func (s signalReceived) Error() string { return s.sig.String() + " signal received" }

// signalContext is signal.NotifyContext for SIGINT and SIGTERM, with the
// signal as the context's cause, so that a command can exit as a shell would
// (128+n).
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			cancel(signalReceived{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// interruptedBy returns the signal that ended ctx, or nil.
func interruptedBy(ctx context.Context) os.Signal {
	var s signalReceived
	if errors.As(context.Cause(ctx), &s) {
		return s.sig
	}
	return nil
}

// signalStatus is a shell's exit status for a process killed by sig.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFailure
}

func clientFlagAddr() cli.Flag {
	return &cli.StringFlag{Name: "addr", Value: leasehold.DefaultAddr, EnvVars: env("ADDR"), Usage: "the server's address, HOST:PORT"}
}

func clientFlagTTL(usage string) cli.Flag {
	return &cli.DurationFlag{Name: "ttl", Value: defaultTTL, Usage: usage}
}

// acquireFlags are the ACQUIRE options run and acquire share.
func acquireFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "wait", Usage: "wait up to this long for the lock, in the server's fair queue (0: try once, as flock -n)"},
		&cli.BoolFlag{Name: "shared", Usage: "take a read lease: any number of readers, or one writer"},
		&cli.StringFlag{Name: "owner", Usage: "OWNER id: an ACQUIRE repeated with the same owner gets the same lease back, renewed (default: a random id)"},
		&cli.IntFlag{Name: "priority", Usage: "place in the queue: higher waits go first"},
	}
}

// clientCommands are the commands that talk to a server.
func clientCommands() []*cli.Command {
	onUsage := func(_ *cli.Context, err error, _ bool) error { return exitWith(exitFailure, err) }
	return []*cli.Command{
		{
			Name:      "run",
			Usage:     "hold a lock while a command runs, like flock(1) across machines",
			ArgsUsage: "KEY [--] COMMAND [ARG...]",
			Description: "Waits for the lock KEY (up to --wait), runs COMMAND with LEASEHOLD_KEY,\n" +
				"LEASEHOLD_TOKEN and LEASEHOLD_ADDR in its environment, keeps the lease alive\n" +
				"while it runs, passes SIGINT and SIGTERM on to it, and releases the lock\n" +
				"when it exits. COMMAND runs in a process group of its own.\n\n" +
				"If the lease is lost, COMMAND's process group gets SIGTERM, then SIGKILL\n" +
				"after --kill-grace.\n\n" +
				"Exit status: COMMAND's; 128+n if it was killed by signal n; 1 if the lock\n" +
				"was not granted within --wait; 2 on an error (bad arguments, no server);\n" +
				"75 if the lease was lost; 126/127 if COMMAND cannot be run / is not found.",
			Flags: append([]cli.Flag{
				clientFlagAddr(),
				clientFlagTTL("lease ttl; the lease is renewed every third of it while COMMAND runs"),
				&cli.DurationFlag{Name: "kill-grace", Value: defaultKillGrace, Usage: "after a lost lease, time between SIGTERM and SIGKILL"},
			}, acquireFlags()...),
			OnUsageError: onUsage,
			Action:       runCmd,
		},
		{
			Name:      "acquire",
			Usage:     "take a lease and print its fencing token",
			ArgsUsage: "KEY",
			Description: "Takes a lease on the lock KEY for --ttl and prints its token. Nothing renews\n" +
				"it: extend it with `leasehold extend`, release it with `leasehold release`.\n\n" +
				"Exit status: 0 granted; 1 not granted (within --wait); 2 on an error.",
			Flags:        append([]cli.Flag{clientFlagAddr(), clientFlagTTL("lease ttl")}, acquireFlags()...),
			OnUsageError: onUsage,
			Action:       acquireCmd,
		},
		{
			Name:         "verify",
			Usage:        "check that a token holds a lock",
			ArgsUsage:    "KEY TOKEN",
			Description:  "Prints true or false. Exit status: 0 when TOKEN is a live lease of KEY; 1 when not; 2 on an error.",
			Flags:        []cli.Flag{clientFlagAddr()},
			OnUsageError: onUsage,
			Action:       tokenCmd("verify"),
		},
		{
			Name:         "release",
			Usage:        "end a lease",
			ArgsUsage:    "KEY TOKEN",
			Description:  "Prints true or false. Exit status: 0 released; 1 when TOKEN did not hold KEY; 2 on an error.",
			Flags:        []cli.Flag{clientFlagAddr()},
			OnUsageError: onUsage,
			Action:       tokenCmd("release"),
		},
		{
			Name:         "extend",
			Usage:        "move a lease's deadline to --ttl from now",
			ArgsUsage:    "KEY TOKEN",
			Description:  "Prints true or false. Exit status: 0 extended; 1 when TOKEN no longer holds KEY; 2 on an error.",
			Flags:        []cli.Flag{clientFlagAddr(), clientFlagTTL("the lease's new ttl, from now")},
			OnUsageError: onUsage,
			Action:       tokenCmd("extend"),
		},
		{
			Name:         "status",
			Usage:        "show a lock's state and holders",
			ArgsUsage:    "KEY",
			Description:  "Exit status: 0 when a lease holds KEY; 1 when none does (free, in its lock-delay, or unknown); 2 on an error.",
			Flags:        []cli.Flag{clientFlagAddr()},
			OnUsageError: onUsage,
			Action:       statusCmd,
		},
	}
}

// quietLogger drops go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// clientAddr is the server's address: --addr given on the command line,
// before or after the command's name, else LEASEHOLD_ADDR, else the default.
// (cli counts a flag set by its environment variable as set in every
// command that has it, so an inner command's --addr from LEASEHOLD_ADDR
// would hide `leasehold --addr X status KEY`.)
func clientAddr(c *cli.Context) string {
	envVal, envSet := os.LookupEnv(env("ADDR")[0])
	envSet = envSet && envVal != "" // set but empty: as if unset, the default
	for _, ctx := range c.Lineage() {
		if ctx.Command != nil && ctx.IsSet("addr") {
			if v := ctx.String("addr"); v != "" && (!envSet || v != envVal) {
				return v
			}
		}
	}
	if envSet {
		return envVal
	}
	if v := c.String("addr"); v != "" {
		return v
	}
	return leasehold.DefaultAddr
}

// newCLIClient connects to the server clientAddr names.
func newCLIClient(c *cli.Context) (*leasehold.Client, string, error) {
	addr := clientAddr(c)
	// The command reports its errors itself; go-redis would log each
	// failed dial too.
	redis.SetLogger(quietLogger{})
	cfg := leasehold.DefaultConfig()
	cfg.Redis.Addr = addr
	// One dial per attempt (go-redis's MaxRetries still retries): no server
	// is reported in well under a second, not after twenty dials.
	cfg.Redis.DialerRetries = 1
	cl, err := leasehold.New(cfg)
	if err != nil {
		return nil, "", exitWith(exitFailure, err)
	}
	return cl, addr, nil
}

// acquireOptions reads the ACQUIRE flags.
func acquireOptions(c *cli.Context) ([]leasehold.AcquireOption, error) {
	var opts []leasehold.AcquireOption
	if w := c.Duration("wait"); w < 0 {
		return nil, usageError("--wait must not be negative")
	} else if w > 0 {
		opts = append(opts, leasehold.Wait(w))
	}
	if c.Bool("shared") {
		opts = append(opts, leasehold.Shared())
	}
	if c.IsSet("owner") {
		if c.String("owner") == "" {
			return nil, usageError("--owner must not be empty")
		}
		opts = append(opts, leasehold.Owner(c.String("owner")))
	}
	if p := c.Int("priority"); p != 0 {
		if int(int32(p)) != p {
			return nil, usageError("--priority must be a 32-bit integer")
		}
		opts = append(opts, leasehold.Priority(int32(p)))
	}
	return opts, nil
}

func checkTTL(c *cli.Context) (time.Duration, error) {
	ttl := c.Duration("ttl")
	if ttl <= 0 {
		return 0, usageError("--ttl must be positive")
	}
	return ttl, nil
}

// failure turns a client error into exit status 2, or 128+n when a signal
// ended the call.
func failure(c *cli.Context, err error) error {
	if sig := interruptedBy(c.Context); sig != nil {
		return exitWith(signalStatus(sig), nil)
	}
	return exitWith(exitFailure, err)
}

func acquireCmd(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("acquire takes one KEY, got %d arguments", c.NArg())
	}
	key := c.Args().First()
	ttl, err := checkTTL(c)
	if err != nil {
		return err
	}
	opts, err := acquireOptions(c)
	if err != nil {
		return err
	}
	cl, _, err := newCLIClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	// The lease outlives this process: no keep-alive.
	l, err := cl.Acquire(c.Context, key, ttl, append(opts, leasehold.NoKeepAlive())...)
	switch {
	case errors.Is(err, leasehold.ErrNotAcquired):
		return exitWith(exitNo, fmt.Errorf("lock %q not acquired", key))
	case err != nil:
		return failure(c, err)
	}
	fmt.Fprintln(c.App.Writer, l.Token())
	return nil
}

// tokenCmd is verify, release or extend: KEY TOKEN, answered true or false.
func tokenCmd(name string) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() != 2 {
			return usageError("%s takes KEY TOKEN, got %d arguments", name, c.NArg())
		}
		key := c.Args().Get(0)
		token, err := strconv.ParseUint(c.Args().Get(1), 10, 64)
		if err != nil || token == 0 {
			return usageError("token %q is not a fencing token (a positive integer)", c.Args().Get(1))
		}
		var ttl time.Duration
		if name == "extend" {
			if ttl, err = checkTTL(c); err != nil {
				return err
			}
		}
		cl, _, err := newCLIClient(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		var ok bool
		switch name {
		case "verify":
			ok, err = cl.Verify(c.Context, key, token)
		case "release":
			ok, err = cl.Release(c.Context, key, token)
		case "extend":
			ok, err = cl.Extend(c.Context, key, token, ttl)
		}
		if err != nil {
			return failure(c, err)
		}
		fmt.Fprintln(c.App.Writer, ok)
		if !ok {
			return exitWith(exitNo, nil)
		}
		return nil
	}
}

func statusCmd(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("status takes one KEY, got %d arguments", c.NArg())
	}
	key := c.Args().First()
	cl, _, err := newCLIClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	st, err := cl.Status(c.Context, key)
	switch {
	case errors.Is(err, leasehold.ErrUnknownLock):
		fmt.Fprintln(c.App.Writer, "state  unknown (no such lock: never made, or made on the fly and free again)")
		return exitWith(exitNo, nil)
	case err != nil:
		return failure(c, err)
	}
	printStatus(c.App.Writer, st)
	if st.State != "held" {
		return exitWith(exitNo, nil)
	}
	return nil
}

// printStatus writes the lock's fields, one per line, then one line per
// holder.
func printStatus(w io.Writer, st *leasehold.Status) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	none := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	fmt.Fprintf(tw, "state\t%s\n", st.State)
	fmt.Fprintf(tw, "mode\t%s\n", none(st.Mode))
	if st.Token != 0 {
		fmt.Fprintf(tw, "token\t%d\n", st.Token)
		fmt.Fprintf(tw, "owner\t%s\n", none(st.Owner))
		fmt.Fprintf(tw, "ttl\t%s\n", st.TTL)
	}
	fmt.Fprintf(tw, "last-token\t%d\n", st.LastToken)
	fmt.Fprintf(tw, "created\t%t\n", st.Created)
	fmt.Fprintf(tw, "default-ttl\t%s\n", st.DefaultTTL)
	fmt.Fprintf(tw, "lock-delay\t%s\n", st.LockDelay)
	fmt.Fprintf(tw, "delay-left\t%s\n", st.DelayLeft)
	fmt.Fprintf(tw, "waiters\t%d\n", st.Waiters)
	fmt.Fprintf(tw, "limit\t%d\n", st.Limit)
	fmt.Fprintf(tw, "holders\t%d\n", len(st.Holders))
	tw.Flush()
	if len(st.Holders) == 0 {
		return
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TOKEN\tOWNER\tTTL")
	for _, h := range st.Holders {
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", h.Token, none(h.Owner), h.TTL)
	}
	tw.Flush()
}

// runArgs splits run's arguments into the key and the command.
func runArgs(c *cli.Context) (string, []string, error) {
	args := c.Args().Slice()
	if len(args) == 0 {
		return "", nil, usageError("run takes KEY [--] COMMAND [ARG...]")
	}
	key, argv := args[0], args[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	} else if len(argv) > 0 && strings.HasPrefix(argv[0], "-") {
		return "", nil, usageError("flags go before KEY; put -- between KEY and a COMMAND starting with -: %q", argv[0])
	}
	if len(argv) == 0 {
		return "", nil, usageError("run needs a COMMAND after KEY")
	}
	return key, argv, nil
}

func runCmd(c *cli.Context) error {
	key, argv, err := runArgs(c)
	if err != nil {
		return err
	}
	ttl, err := checkTTL(c)
	if err != nil {
		return err
	}
	grace := c.Duration("kill-grace")
	if grace < 0 {
		return usageError("--kill-grace must not be negative")
	}
	opts, err := acquireOptions(c)
	if err != nil {
		return err
	}
	// From here on every SIGINT and SIGTERM is seen here too: while waiting
	// for the lock it ends the wait (main's context is cancelled), and once
	// the command runs it is passed on.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	// Nothing may stop leasehold while the command runs on: a closed pipe
	// on stderr must not kill it, nor Ctrl-Z stop it (see ignoreStops).
	ignoreStops()

	cl, addr, err := newCLIClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	lease, err := cl.Acquire(c.Context, key, ttl, opts...)
	switch {
	case errors.Is(err, leasehold.ErrNotAcquired):
		return exitWith(exitNo, fmt.Errorf("lock %q not acquired", key))
	case err != nil:
		return failure(c, err)
	}
	// release ends the lease once the command is done: main's context may
	// be cancelled by then (a signal passed on), so it has its own.
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := lease.Release(ctx); err != nil && !errors.Is(err, leasehold.ErrNotHeld) {
			fmt.Fprintf(c.App.ErrWriter, "leasehold: releasing %q: %v (the lease runs out at its ttl)\n", key, err)
		}
	}
	select {
	case s := <-sigs: // arrived while the lock was being granted
		release()
		return exitWith(signalStatus(s), nil)
	default:
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"LEASEHOLD_KEY="+key,
		"LEASEHOLD_TOKEN="+strconv.FormatUint(lease.Token(), 10),
		"LEASEHOLD_ADDR="+addr,
	)
	if err := startGroup(cmd); err != nil {
		release()
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitWith(exitNotFound, err)
		}
		return exitWith(exitCannotExec, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	// The lease is held until every process of the command's group has
	// ended, not only the one started: what it left running in the
	// background still works under the lock. (A process that leaves the
	// group, with setsid say, is beyond reach.)
	lost := lease.Lost()
	var kill, poll <-chan time.Time
	var wasLost bool
	var status error
	for {
		select {
		case s := <-sigs:
			signalGroup(cmd, s)
		case <-lost:
			lost, wasLost = nil, true
			// Signal first: writing the message may fail, or take time.
			signalGroup(cmd, syscall.SIGTERM)
			kill = time.After(grace)
			fmt.Fprintf(c.App.ErrWriter, "leasehold: %v; stopping the command (SIGTERM, then SIGKILL after %s)\n", strings.TrimPrefix(lease.Err().Error(), "leasehold: "), grace)
		case <-kill:
			kill = nil
			signalGroup(cmd, syscall.SIGKILL)
		case status = <-waited:
			poll = time.After(0)
		case <-poll:
			if groupAlive(cmd) {
				poll = time.After(100 * time.Millisecond)
				continue
			}
			release()
			if wasLost {
				return exitWith(exitLost, nil)
			}
			return commandStatus(status)
		}
	}
}

// commandStatus is the exit status for how the command ended: its own, or
// 128+n after signal n.
func commandStatus(err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if err != nil {
			return exitWith(exitFailure, err)
		}
		return nil
	}
	if sig, ok := killedBy(ee); ok {
		return exitWith(128+sig, nil)
	}
	return exitWith(ee.ExitCode(), nil)
}
