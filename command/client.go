package command

import (
	"context"
	"os"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
)

func clientFlagAddr() cli.Flag {
	return &cli.StringFlag{Name: "addr", Value: leasehold.DefaultAddr, EnvVars: env("ADDR"), Usage: "server address, `HOST:PORT`"}
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
	}
}

// clientCommands are the commands that talk to a server.
func clientCommands() []*cli.Command {
	return []*cli.Command{
		runCommand(), acquireCommand(), verifyCommand(), releaseCommand(), extendCommand(), statusCommand(),
		createCommand(), deleteCommand(), locksCommand(), infoCommand(),
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
