package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/redis/go-redis/v9"

	"github.com/urfave/cli/v2"
)

// The admin commands manage locks for scripts: create, delete, locks, info;
// and force-release, the operator's override.

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print the answer as JSON"}
}

// createCommand makes a lock.
func createCommand() *cli.Command {
	return &cli.Command{
		Name:      "create",
		Usage:     "create a lock (or a semaphore) that stays when free",
		ArgsUsage: "KEY",
		Description: "Creates the lock KEY with CREATE: it stays when free, until `leasehold delete`.\n" +
			"Prints true, or false when a created lock of that name exists already (it is\n" +
			"left as it is).\n\n" +
			"Exit status: 0 created; 1 it exists already, or --limit was asked of a lock\n" +
			"made on the fly that a lease holds; 2 on an error.",
		Flags: []cli.Flag{
			clientFlagAddr(),
			durationFlag("ttl", 0, "the lock's default lease ttl, for an ACQUIRE that names none (default: none)"),
			durationFlag("lock-delay", 0, "the lock's own lock-delay, in place of the server's --lock-delay (0: none)"),
			&cli.IntFlag{Name: "limit", Usage: "make it a semaphore of N permits (1 to 65536)"},
		},
		Action: createCmd,
	}
}

func createCmd(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("create takes one KEY, got %d arguments", c.NArg())
	}
	key := c.Args().First()
	var opts []leasehold.CreateOption
	if c.IsSet("ttl") {
		if c.Duration("ttl") <= 0 {
			return usageError("--ttl must be positive")
		}
		opts = append(opts, leasehold.DefaultTTL(c.Duration("ttl")))
	}
	if c.IsSet("lock-delay") {
		if c.Duration("lock-delay") < 0 {
			return usageError("--lock-delay must not be negative")
		}
		opts = append(opts, leasehold.LockDelay(c.Duration("lock-delay")))
	}
	if c.IsSet("limit") {
		if c.Int("limit") <= 0 {
			return usageError("--limit must be a positive number of permits")
		}
		opts = append(opts, leasehold.Limit(c.Int("limit")))
	}
	cl, _, err := newCLIClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	made, err := cl.Create(c.Context, key, opts...)
	switch {
	case errors.Is(err, leasehold.ErrInUse):
		fmt.Fprintln(c.App.Writer, false)
		return exitWith(exitNo, fmt.Errorf("lock %q is held, made on the fly: it cannot become a semaphore while held", key))
	case err != nil:
		return failure(c, err)
	case !made:
		fmt.Fprintln(c.App.Writer, false)
		return exitWith(exitNo, fmt.Errorf("lock %q exists already; nothing changed", key))
	}
	fmt.Fprintln(c.App.Writer, true)
	return nil
}

// deleteCommand removes a lock.
func deleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a free lock",
		ArgsUsage: "KEY",
		Description: "Deletes the lock KEY with DELETE. Prints true, or false when it was not deleted.\n\n" +
			"Exit status: 0 deleted; 1 no such lock, or it is in use (a lease holds it,\n" +
			"requests wait for it, or it is in its lock-delay); 2 on an error.",
		Flags:  []cli.Flag{clientFlagAddr()},
		Action: deleteCmd,
	}
}

func deleteCmd(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("delete takes one KEY, got %d arguments", c.NArg())
	}
	key := c.Args().First()
	cl, _, err := newCLIClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	ok, err := cl.Delete(c.Context, key)
	switch {
	case errors.Is(err, leasehold.ErrInUse):
		fmt.Fprintln(c.App.Writer, false)
		// The server's reply says which: held, waited for, in its lock-delay.
		var reply redis.Error
		if errors.As(err, &reply) {
			return exitWith(exitNo, fmt.Errorf("not deleted: %s", reply.Error()))
		}
		return exitWith(exitNo, fmt.Errorf("lock %q not deleted: in use", key))
	case err != nil:
		return failure(c, err)
	case !ok:
		fmt.Fprintln(c.App.Writer, false)
		return exitWith(exitNo, fmt.Errorf("no lock %q", key))
	}
	fmt.Fprintln(c.App.Writer, true)
	return nil
}

// locksCommand lists lock names.
func locksCommand() *cli.Command {
	return &cli.Command{
		Name:      "locks",
		Usage:     "list the names of the server's locks",
		ArgsUsage: "[PATTERN]",
		Description: "Prints the name of every lock that matches PATTERN (Redis's glob rules: *, ?,\n" +
			"[abc], \\ escapes; default *), one per line, in no particular order, from\n" +
			"LOCKS's cursor run to its end. With --json, a JSON array of the names.\n\n" +
			"Exit status: 0 some lock matched; 1 none did; 2 on an error.",
		Flags:  []cli.Flag{clientFlagAddr(), jsonFlag()},
		Action: locksCmd,
	}
}

func locksCmd(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageError("locks takes at most one PATTERN, got %d arguments", c.NArg())
	}
	cl, _, err := newCLIClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	asJSON := c.Bool("json")
	names := []string{} // kept for --json only: there may be millions
	found := 0
	for name, err := range cl.Locks(c.Context, c.Args().First()) {
		if err != nil {
			return failure(c, err)
		}
		found++
		if asJSON {
			names = append(names, name)
		} else {
			fmt.Fprintln(c.App.Writer, name) // as they come
		}
	}
	if asJSON {
		if err := writeJSON(c.App.Writer, names); err != nil {
			return exitWith(exitFailure, err)
		}
	}
	if found == 0 {
		return exitWith(exitNo, nil)
	}
	return nil
}

// infoCommand prints the server's INFO.
func infoCommand() *cli.Command {
	return &cli.Command{
		Name:      "info",
		Usage:     "show the server's INFO",
		ArgsUsage: "[SECTION...]",
		Description: "Prints the server's INFO as it sends it (# Section lines, then field:value\n" +
			"lines), or with --json an object of sections (lower case), each an object of\n" +
			"its fields, every value a string. SECTIONs as INFO takes them: server,\n" +
			"clients, memory, stats, locks, persistence, all.\n\n" +
			"Exit status: 0; 2 on an error.",
		Flags:  []cli.Flag{clientFlagAddr(), jsonFlag()},
		Action: infoCmd,
	}
}

func infoCmd(c *cli.Context) error {
	cl, _, err := newCLIClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	if c.Bool("json") {
		info, err := cl.Info(c.Context, c.Args().Slice()...)
		if err != nil {
			return failure(c, err)
		}
		if err := writeJSON(c.App.Writer, info); err != nil {
			return exitWith(exitFailure, err)
		}
		return nil
	}
	text, err := cl.Redis().Info(c.Context, c.Args().Slice()...).Result()
	if err != nil {
		return failure(c, err)
	}
	fmt.Fprint(c.App.Writer, strings.ReplaceAll(text, "\r\n", "\n"))
	return nil
}

// forceReleaseCommand ends a lease whoever holds it.
func forceReleaseCommand() *cli.Command {
	return &cli.Command{
		Name:      "force-release",
		Usage:     "end a stuck lease whoever holds it (the operator's override)",
		ArgsUsage: "KEY [TOKEN]",
		Description: "Ends, with FORCE-RELEASE, the lease TOKEN holds on KEY, or without TOKEN every\n" +
			"lease of KEY and a lock-delay in progress, whoever holds them. Prints how many\n" +
			"it ended. The holder is not told: its next renewal fails, as after an expiry,\n" +
			"and the next grant's token is higher, so a fenced resource turns it away.\n\n" +
			"Exit status: 0 some lease (or lock-delay) ended; 1 none did (no such lease or\n" +
			"lock); 2 on an error.",
		Flags:  []cli.Flag{clientFlagAddr()},
		Action: forceReleaseCmd,
	}
}

func forceReleaseCmd(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return usageError("force-release takes KEY [TOKEN], got %d arguments", c.NArg())
	}
	key := c.Args().Get(0)
	var token uint64
	if c.NArg() == 2 {
		var err error
		token, err = strconv.ParseUint(c.Args().Get(1), 10, 64)
		if err != nil || token == 0 {
			return usageError("token %q is not a fencing token (a positive integer)", c.Args().Get(1))
		}
	}
	cl, _, err := newCLIClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	n, err := cl.ForceRelease(c.Context, key, token)
	if err != nil {
		return failure(c, err)
	}
	fmt.Fprintln(c.App.Writer, n)
	if n == 0 {
		if token != 0 {
			return exitWith(exitNo, fmt.Errorf("token %d holds no lease of %q", token, key))
		}
		return exitWith(exitNo, fmt.Errorf("no lease of %q to end", key))
	}
	return nil
}

// statusJSON is `status --json`: STATUS's fields under names jq reads
// without quoting, times in milliseconds.
type statusJSON struct {
	Key        string `json:"key"`
	State      string `json:"state"` // also "unknown"
	Mode       string `json:"mode"`
	Token      uint64 `json:"token"`
	Owner      string `json:"owner"`
	TTLms      int64  `json:"ttl_ms"`
	LastToken  uint64 `json:"last_token"`
	Created    bool   `json:"created"`
	DefaultTTL int64  `json:"default_ttl_ms"`
	LockDelay  int64  `json:"lock_delay_ms"`
	DelayLeft  int64  `json:"delay_left_ms"`
	Waiters    int    `json:"waiters"`
	Limit      int    `json:"limit"`
	// HoldersTotal counts every live lease; Holders lists the oldest 100.
	HoldersTotal int          `json:"holders_total"`
	Holders      []holderJSON `json:"holders"`
	// Hidden: the lease is another user's; token, owner and last_token
	// are not shown (0 and "").
	Hidden bool `json:"hidden,omitempty"`
}

type holderJSON struct {
	Token  uint64 `json:"token"`
	Owner  string `json:"owner"`
	TTLms  int64  `json:"ttl_ms"`
	Hidden bool   `json:"hidden,omitempty"` // another user's lease, as statusJSON's
}

// printStatusJSON writes st (nil: a lock the server does not know) as JSON,
// as printStatus writes it as text.
func printStatusJSON(w io.Writer, key string, st *leasehold.Status) {
	if st == nil {
		writeJSON(w, struct {
			Key   string `json:"key"`
			State string `json:"state"`
		}{key, "unknown"})
		return
	}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	out := statusJSON{
		Key: key, State: st.State, Mode: st.Mode, Token: st.Token, Owner: st.Owner, TTLms: ms(st.TTL),
		LastToken: st.LastToken, Created: st.Created, DefaultTTL: ms(st.DefaultTTL), LockDelay: ms(st.LockDelay),
		DelayLeft: ms(st.DelayLeft), Waiters: st.Waiters, Limit: st.Limit, HoldersTotal: st.HoldersTotal, Holders: []holderJSON{},
		Hidden: st.Hidden,
	}
	for _, h := range st.Holders {
		out.Holders = append(out.Holders, holderJSON{Token: h.Token, Owner: h.Owner, TTLms: ms(h.TTL), Hidden: h.Hidden})
	}
	writeJSON(w, out)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
