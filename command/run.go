package command

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
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"

	"github.com/urfave/cli/v2"
)

// runCommand holds a lock while a command runs.
func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "hold a lock while a command runs, like flock(1) across machines",
		ArgsUsage: "KEY [--] COMMAND [ARG...]  |  -c 'SHELL COMMAND' KEY",
		Description: "Waits for the lock KEY (up to --wait), runs COMMAND (with -c, the shell\n" +
			"command through sh -c) with LEASEHOLD_KEY, LEASEHOLD_TOKEN and LEASEHOLD_ADDR\n" +
			"in its environment, keeps the lease alive while it runs, passes SIGINT and\n" +
			"SIGTERM on to it, and releases the lock when it exits. COMMAND runs in a\n" +
			"process group of its own.\n\n" +
			"If the lease is lost, COMMAND's process group gets SIGTERM, then SIGKILL\n" +
			"after --kill-grace, and the --on-lost command runs.\n\n" +
			"Exit status: COMMAND's; 128+n if it was killed by signal n; 1 (or\n" +
			"--conflict-exit-code) if the lock was not granted within --wait; 2 on an\n" +
			"error (bad arguments, no server); 75 if the lease was lost; 126/127 if\n" +
			"COMMAND cannot be run / is not found.",
		Flags: append([]cli.Flag{
			clientFlagAddr(),
			clientFlagTTL("lease ttl; the lease is renewed every third of it while COMMAND runs"),
			durationFlag("kill-grace", defaultKillGrace, "after a lost lease, time between SIGTERM and SIGKILL"),
			&cli.StringFlag{Name: "command", Aliases: []string{"c"}, Usage: "run this shell command (sh -c) instead of COMMAND [ARG...], as flock -c"},
			&cli.IntFlag{Name: "conflict-exit-code", Aliases: []string{"E"}, Value: exitNo, Usage: "exit status when the lock is not granted, as flock -E (0 to 255)"},
			&cli.StringFlag{Name: "on-lost", Usage: "shell command (sh -c) to run when the lease is lost, besides stopping COMMAND; it gets LEASEHOLD_KEY, LEASEHOLD_TOKEN, LEASEHOLD_ADDR"},
		}, acquireFlags()...),
		Action: runCmd,
	}
}

// runArgs splits run's arguments into the key and the command.
func runArgs(c *cli.Context) (string, []string, error) {
	args := c.Args().Slice()
	if c.IsSet("command") {
		switch {
		case c.String("command") == "":
			return "", nil, usageError("-c needs a shell command")
		case len(args) != 1:
			return "", nil, usageError("with -c, run takes KEY and no COMMAND")
		}
		return args[0], []string{"sh", "-c", c.String("command")}, nil
	}
	if len(args) == 0 {
		return "", nil, usageError("run takes KEY [--] COMMAND [ARG...]")
	}
	key, argv := args[0], args[1:]
	// rewriteArgs puts a -- between KEY and COMMAND.
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
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
	conflict := c.Int("conflict-exit-code")
	if conflict < 0 || conflict > 255 {
		return usageError("--conflict-exit-code must be between 0 and 255")
	}
	limit, err := limitOption(c)
	if err != nil {
		return err
	}
	onLost := c.String("on-lost")
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
	lease, err := acquireLease(c, cl, key, ttl, limit, opts...)
	var exit *exitCodeError
	switch {
	case errors.Is(err, leasehold.ErrNotAcquired):
		return exitWith(conflict, fmt.Errorf("lock %q not acquired", key))
	case errors.As(err, &exit):
		return err
	case err != nil:
		return failure(c, err)
	}
	// release ends the lease once the command is done: main's context may
	// be cancelled by then (a signal passed on), so it has its own.
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := lease.Release(ctx); err != nil && !errors.Is(err, leasehold.ErrNotHeld) {
			fmt.Fprintf(c.App.ErrWriter, "leasehold: releasing %q: %s (the lease runs out at its ttl)\n", key, strings.TrimPrefix(err.Error(), "leasehold: "))
		}
	}
	select {
	case s := <-sigs: // arrived while the lock was being granted
		release()
		return exitWith(signalStatus(s), nil)
	default:
	}

	env := append(os.Environ(),
		"LEASEHOLD_KEY="+key,
		"LEASEHOLD_TOKEN="+strconv.FormatUint(lease.Token(), 10),
		"LEASEHOLD_ADDR="+addr,
	)
	// How to reach the server, for a client command inside; the password is
	// in the environment already (it is read from nowhere else).
	if user := c.String("user"); user != "" {
		env = append(env, "LEASEHOLD_USER="+user)
	}
	env = append(env, tlsEnviron(c)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
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
	var hook *onLostHook
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
			if onLost != "" {
				hook = startOnLost(c.App.ErrWriter, onLost, env)
			}
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
			if !wasLost {
				return commandStatus(status)
			}
			hook.wait(sigs)
			return exitWith(exitLost, nil)
		}
	}
}

// waitOption turns --wait into the client's option: none for 0 (try
// once), WaitForever, or a bounded wait.
func waitOption(w *waitValue) (leasehold.AcquireOption, error) {
	switch {
	case w.forever:
		return leasehold.WaitForever(), nil
	case w.d < 0:
		return nil, usageError("--wait must not be negative")
	case w.d == 0:
		return nil, nil
	}
	return leasehold.Wait(w.d), nil
}

// onLostHook is the --on-lost command, started when the lease was lost.
type onLostHook struct {
	cmd  *exec.Cmd
	done chan error // Wait's result
}

// startOnLost runs script through sh -c with env, its output on w (stdout
// carries only COMMAND's); nil, with the reason on w, if it cannot start.
func startOnLost(w io.Writer, script string, env []string) *onLostHook {
	cmd := exec.Command("sh", "-c", script)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, w, w
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(w, "leasehold: --on-lost: %v\n", err)
		return nil
	}
	h := &onLostHook{cmd: cmd, done: make(chan error, 1)}
	go func() { h.done <- cmd.Wait() }()
	return h
}

// wait waits for the hook to end, passing on the signals run receives
// meanwhile, and reports a failure of it on stderr.
func (h *onLostHook) wait(sigs <-chan os.Signal) {
	if h == nil {
		return
	}
	for {
		select {
		case s := <-sigs:
			h.cmd.Process.Signal(s)
		case err := <-h.done:
			if err != nil {
				fmt.Fprintf(h.cmd.Stderr, "leasehold: --on-lost: %v\n", err)
			}
			return
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
