package command

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"

	"github.com/urfave/cli/v2"
)

// acquireCommand takes a lease and prints its token.
func acquireCommand() *cli.Command {
	return &cli.Command{
		Name:      "acquire",
		Usage:     "take a lease and print its fencing token",
		ArgsUsage: "KEY",
		Description: "Takes a lease on the lock KEY for --ttl and prints its token. Nothing renews\n" +
			"it: extend it with `leasehold extend`, release it with `leasehold release`.\n\n" +
			"Exit status: 0 granted; 1 not granted (within --wait); 2 on an error.",
		Flags:  append([]cli.Flag{clientFlagAddr(), clientFlagTTL("lease ttl")}, acquireFlags()...),
		Action: acquireCmd,
	}
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
	limit, err := limitOption(c)
	if err != nil {
		return err
	}
	cl, _, err := newCLIClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	// An owner of the command's own, when none is given, so that an
	// outcome left unknown by a cluster can be settled by running the
	// command again with it.
	owner := c.String("owner")
	if !c.IsSet("owner") {
		owner = randomOwner()
		opts = append(opts, leasehold.Owner(owner))
	}
	// The lease outlives this process: no keep-alive.
	l, err := acquireLease(c, cl, key, ttl, limit, append(opts, leasehold.NoKeepAlive())...)
	var exit *exitCodeError
	switch {
	case errors.Is(err, leasehold.ErrNotAcquired):
		return exitWith(exitNo, fmt.Errorf("lock %q not acquired", key))
	case errors.As(err, &exit):
		return err
	case errors.Is(err, leasehold.ErrUncertain) && interruptedBy(c.Context) == nil:
		return exitWith(exitFailure, fmt.Errorf("%w\nthe lease may have been granted: `leasehold acquire --owner %q %q` again returns it (the same token) if it was", err, owner, key))
	case err != nil:
		return failure(c, err)
	}
	fmt.Fprintln(c.App.Writer, l.Token())
	return nil
}

// verifyCommand checks a token.
func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:        "verify",
		Usage:       "check that a token holds a lock",
		ArgsUsage:   "KEY TOKEN",
		Description: "Prints true or false. Exit status: 0 when TOKEN is a live lease of KEY; 1 when not; 2 on an error.",
		Flags:       []cli.Flag{clientFlagAddr()},
		Action:      tokenCmd("verify"),
	}
}

// releaseCommand ends a lease.
func releaseCommand() *cli.Command {
	return &cli.Command{
		Name:        "release",
		Usage:       "end a lease",
		ArgsUsage:   "KEY TOKEN",
		Description: "Prints true or false. Exit status: 0 released; 1 when TOKEN did not hold KEY; 2 on an error.",
		Flags:       []cli.Flag{clientFlagAddr()},
		Action:      tokenCmd("release"),
	}
}

// extendCommand renews a lease.
func extendCommand() *cli.Command {
	return &cli.Command{
		Name:        "extend",
		Usage:       "move a lease's deadline to --ttl from now",
		ArgsUsage:   "KEY TOKEN",
		Description: "Prints true or false. Exit status: 0 extended; 1 when TOKEN no longer holds KEY; 2 on an error.",
		Flags:       []cli.Flag{clientFlagAddr(), clientFlagTTL("the lease's new ttl, from now")},
		Action:      tokenCmd("extend"),
	}
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

// statusCommand shows a lock.
func statusCommand() *cli.Command {
	return &cli.Command{
		Name:        "status",
		Usage:       "show a lock's state and holders",
		ArgsUsage:   "KEY",
		Description: "Exit status: 0 when a lease holds KEY; 1 when none does (free, in its lock-delay, or unknown); 2 on an error.",
		Flags:       []cli.Flag{clientFlagAddr(), jsonFlag()},
		Action:      statusCmd,
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
		if c.Bool("json") {
			printStatusJSON(c.App.Writer, key, nil)
			return exitWith(exitNo, nil)
		}
		fmt.Fprintln(c.App.Writer, "state  unknown (no such lock: never made, or made on the fly and free again)")
		return exitWith(exitNo, nil)
	case err != nil:
		return failure(c, err)
	}
	if c.Bool("json") {
		printStatusJSON(c.App.Writer, key, st)
	} else {
		printStatus(c.App.Writer, st)
	}
	if st.State != "held" {
		return exitWith(exitNo, nil)
	}
	return nil
}

// hiddenLease stands for the token of another user's lease, which the
// server does not show (docs/security.md).
const hiddenLease = "hidden (another user's lease)"

// printStatus writes the lock's fields, one per line, then one line per
// holder STATUS listed (the oldest 100).
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
	if st.Hidden {
		fmt.Fprintf(tw, "token\t%s\n", hiddenLease)
		fmt.Fprintf(tw, "ttl\t%s\n", st.TTL)
	}
	if st.Token != 0 {
		fmt.Fprintf(tw, "token\t%d\n", st.Token)
		fmt.Fprintf(tw, "owner\t%s\n", none(st.Owner))
		fmt.Fprintf(tw, "ttl\t%s\n", st.TTL)
	}
	if st.LastToken != 0 || !st.Hidden {
		fmt.Fprintf(tw, "last-token\t%d\n", st.LastToken)
	}
	fmt.Fprintf(tw, "created\t%t\n", st.Created)
	fmt.Fprintf(tw, "default-ttl\t%s\n", st.DefaultTTL)
	fmt.Fprintf(tw, "lock-delay\t%s\n", st.LockDelay)
	fmt.Fprintf(tw, "delay-left\t%s\n", st.DelayLeft)
	fmt.Fprintf(tw, "waiters\t%d\n", st.Waiters)
	fmt.Fprintf(tw, "limit\t%d\n", st.Limit)
	if len(st.Holders) < st.HoldersTotal {
		fmt.Fprintf(tw, "holders\t%d (the oldest %d listed)\n", st.HoldersTotal, len(st.Holders))
	} else {
		fmt.Fprintf(tw, "holders\t%d\n", st.HoldersTotal)
	}
	tw.Flush()
	if len(st.Holders) == 0 {
		return
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TOKEN\tOWNER\tTTL")
	for _, h := range st.Holders {
		token := strconv.FormatUint(h.Token, 10)
		if h.Hidden {
			token = hiddenLease
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", token, none(h.Owner), h.TTL)
	}
	tw.Flush()
}

// randomOwner is an OWNER id for a command that names none: 16 random bytes
// in hex, as the Go client's.
func randomOwner() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b[:])
}
