package command

import (
	"context"
	"errors"
	"fmt"
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
			durationFlag("kill-grace", defaultKillGrace, "after a lost lease, time between SIGTERM and SIGKILL"),
		}, acquireFlags()...),
		OnUsageError: onUsage,
		Action:       runCmd,
	}
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
