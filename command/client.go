package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

func clientFlagAddr() cli.Flag {
	return &cli.StringFlag{Name: "addr", Value: leasehold.DefaultAddr, EnvVars: env("ADDR"), Usage: "server address, `HOST:PORT`, or the nodes of one cluster, HOST:PORT,HOST:PORT,... (tried in turn until one connects)"}
}

func clientFlagTTL(usage string) cli.Flag {
	return durationFlag("ttl", defaultTTL, usage)
}

// acquireFlags are the ACQUIRE options run and acquire share.
func acquireFlags() []cli.Flag {
	return []cli.Flag{
		waitFlag(),
		&cli.BoolFlag{Name: "shared", Usage: "take a read lease: any number of readers, or one writer"},
		&cli.StringFlag{Name: "owner", Usage: "OWNER id: an ACQUIRE repeated with the same owner gets the same lease back, renewed (default: a random id)"},
		&cli.IntFlag{Name: "priority", Usage: "place in the queue: higher waits go first"},
		&cli.IntFlag{Name: "limit", DefaultText: "none", Usage: "take a permit of the semaphore KEY of N permits, creating it if it does not exist, as consul lock -n (without it, a semaphore is refused)"},
	}
}

// clientCommands are the commands that talk to a server; each takes
// --user (clientFlagUser) and the TLS flags (clientFlagsTLS).
func clientCommands() []*cli.Command {
	cmds := []*cli.Command{
		runCommand(), acquireCommand(), verifyCommand(), releaseCommand(), extendCommand(), statusCommand(),
		createCommand(), deleteCommand(), locksCommand(), infoCommand(), forceReleaseCommand(),
	}
	for _, cmd := range cmds {
		cmd.Flags = append(append(cmd.Flags, clientFlagUser()), clientFlagsTLS()...)
	}
	return cmds
}

// The environment variables a client command reads its password from, in
// this order: there is no --password flag, since a command line is
// visible to every user of the machine. REDISCLI_AUTH is redis-cli's.
var passwordEnv = []string{"LEASEHOLD_PASSWORD", "REDISCLI_AUTH"}

func clientFlagUser() cli.Flag {
	return &cli.StringFlag{Name: "user", EnvVars: env("USER"), Usage: "user to AUTH as, with the password from $LEASEHOLD_PASSWORD or $REDISCLI_AUTH (default: the default user, when a password is set)", DefaultText: "default"}
}

// clientAuth returns the user and password to AUTH with: --user, and the
// first of passwordEnv that is set and not empty; "" and "" for none.
func clientAuth(c *cli.Context) (user, password string, err error) {
	for _, name := range passwordEnv {
		if password = os.Getenv(name); password != "" {
			break
		}
	}
	user = c.String("user")
	if user != "" && password == "" {
		return "", "", usageError("--user %s needs a password: set LEASEHOLD_PASSWORD (or REDISCLI_AUTH)", user)
	}
	return user, password, nil
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

// parseAddrs splits --addr (or LEASEHOLD_ADDR) into its addresses: one
// HOST:PORT, or a comma-separated list of them (an IPv6 host in brackets),
// each once.
func parseAddrs(s string) ([]string, error) {
	parts := strings.Split(s, ",")
	for i, a := range parts {
		a = strings.TrimSpace(a)
		if host, port, err := net.SplitHostPort(a); err != nil || port == "" || host == "" && strings.HasPrefix(a, "[") {
			if len(parts) == 1 {
				return nil, usageError("server address %q (--addr or LEASEHOLD_ADDR) is not HOST:PORT (an IPv6 host in brackets: [::1]:7379)", a)
			}
			return nil, usageError("server address %q in %q (--addr or LEASEHOLD_ADDR) is not HOST:PORT (an IPv6 host in brackets: [::1]:7379)", a, s)
		}
		if slices.Contains(parts[:i], a) {
			return nil, usageError("server address %q is twice in %q (--addr or LEASEHOLD_ADDR)", a, s)
		}
		parts[i] = a
	}
	return parts, nil
}

// newCLIClient connects to the server clientAddr names, or with a list to
// the first of them that takes a connection, and returns the addresses as
// run passes them on, comma-separated.
func newCLIClient(c *cli.Context) (*leasehold.Client, string, error) {
	addrs, err := parseAddrs(clientAddr(c))
	if err != nil {
		return nil, "", err
	}
	addr := strings.Join(addrs, ",")
	user, password, err := clientAuth(c)
	if err != nil {
		return nil, "", err
	}
	tlsConfig, err := clientTLS(c, addrs)
	if err != nil {
		return nil, "", err
	}
	// The command reports its errors itself; go-redis would log each
	// failed dial too.
	redis.SetLogger(quietLogger{})
	cfg := leasehold.DefaultConfig()
	if len(addrs) == 1 {
		cfg.Redis.Addr = addr
	} else {
		cfg.Addrs = addrs
	}
	cfg.Redis.Username, cfg.Redis.Password = user, password
	cfg.Redis.TLSConfig = tlsConfig
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
	if w, err := waitOption(c.Generic("wait").(*waitValue)); err != nil {
		return nil, err
	} else if w != nil {
		opts = append(opts, w)
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

// limitOption reads --limit: 0 when not given.
func limitOption(c *cli.Context) (int, error) {
	limit := c.Int("limit")
	switch {
	case limit < 0 || (c.IsSet("limit") && limit == 0):
		return 0, usageError("--limit must be a positive number of permits")
	case limit > 0 && c.Bool("shared"):
		return 0, usageError("--limit and --shared do not go together: a semaphore's permits are not shared leases")
	}
	return limit, nil
}

// acquireLease takes KEY: a permit of a semaphore of limit permits (made if
// there is none), or with limit 0 the lock itself. A permit taken without
// --limit is handed back and refused: it would keep nobody else out, and
// whoever runs `leasehold run KEY` expects to hold KEY alone (consul lock
// refuses a lock on a semaphore's key likewise). The check follows the
// grant, so no CREATE can slip in between.
func acquireLease(c *cli.Context, cl *leasehold.Client, key string, ttl time.Duration, limit int, opts ...leasehold.AcquireOption) (*leasehold.Lease, error) {
	if limit > 0 {
		if err := ensureSemaphore(c, cl, key, limit); err != nil {
			return nil, err
		}
		return cl.Acquire(c.Context, key, ttl, opts...)
	}
	lease, err := cl.Acquire(c.Context, key, ttl, opts...)
	if err != nil {
		return nil, err
	}
	st, err := cl.Status(c.Context, key)
	switch {
	case err == nil && st.Limit == 0:
		return lease, nil
	case errors.Is(err, leasehold.ErrUnknownLock):
		// The lease has already ended (a ttl of a few ms) and its lock
		// went with it. A semaphore, made by CREATE, stays when its
		// leases end, so this was a lock, and the grant stands.
		return lease, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease.Release(ctx)
	if err != nil {
		return nil, err
	}
	return nil, exitWith(exitFailure, fmt.Errorf("%q is a semaphore of %d permits, not a lock: pass --limit %d to take one of its permits", key, st.Limit, st.Limit))
}

// ensureSemaphore makes sure KEY is a semaphore of limit permits: it creates
// one, or finds one with that limit; any other lock of that name is an
// error.
func ensureSemaphore(c *cli.Context, cl *leasehold.Client, key string, limit int) error {
	made, err := cl.Create(c.Context, key, leasehold.Limit(limit))
	switch {
	case errors.Is(err, leasehold.ErrInUse):
		return exitWith(exitFailure, fmt.Errorf("--limit %d: lock %q is held as a lock, not a semaphore, and cannot become one while held", limit, key))
	case err != nil:
		return failure(c, err)
	case made:
		return nil
	}
	st, err := cl.Status(c.Context, key)
	if err != nil {
		return failure(c, err)
	}
	switch st.Limit {
	case limit:
		return nil
	case 0:
		return exitWith(exitFailure, fmt.Errorf("--limit %d: lock %q exists as a lock, not a semaphore (delete it first to make it one)", limit, key))
	}
	return exitWith(exitFailure, fmt.Errorf("--limit %d: semaphore %q exists with %d permits", limit, key, st.Limit))
}

// checkTTL reads --ttl. A bare number is milliseconds; one under a second
// is most likely seconds meant, and a lease that short is gone before the
// job starts (run would stop it at once), so it is taken, with a warning.
func checkTTL(c *cli.Context) (time.Duration, error) {
	ttl := c.Duration("ttl")
	if ttl <= 0 {
		return 0, usageError("--ttl must be positive")
	}
	if v, ok := c.Generic("ttl").(*clientDuration); ok && v.bare && ttl < time.Second {
		fmt.Fprintf(c.App.ErrWriter, "leasehold: warning: --ttl %d is %s: a bare number is milliseconds; write %ds for seconds\n", ttl.Milliseconds(), ttl, ttl.Milliseconds())
	}
	return ttl, nil
}

// failure turns a client error into exit status 2, or 128+n when a signal
// ended the call.
func failure(c *cli.Context, err error) error {
	if sig := interruptedBy(c.Context); sig != nil {
		return exitWith(signalStatus(sig), nil)
	}
	if errors.Is(err, io.EOF) && !c.Bool("tls") {
		// A TLS port closes a connection that does not open with a
		// handshake: go-redis says only EOF.
		err = fmt.Errorf("%w (the server closed the connection: if it is a TLS port, add --tls)", err)
	}
	return exitWith(exitFailure, err)
}
