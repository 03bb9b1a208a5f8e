package command

import (
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/server"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

// adminFlags are serve's flags for the HTTP admin listener
// (docs/operations.md).
func adminFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "http-addr", Value: admin.DefaultConfig().Addr, EnvVars: env("HTTP_ADDR"), Usage: "HOST:PORT of the HTTP admin listener: a live status page at /, /healthz, /readyz, /metrics (Prometheus) and, with --pprof, /debug/pprof/; with a password on the server, all but /healthz and /readyz ask for a user's (HTTP Basic); it speaks plain HTTP, so a host that is not loopback needs --http-allow-remote (default: none, no listener)"},
		&cli.BoolFlag{Name: "http-allow-remote", EnvVars: env("HTTP_ALLOW_REMOTE"), Usage: "with --http-addr: allow a host that is not loopback (0.0.0.0, an empty host, a public address): passwords cross the network in clear text, and without a password on the server whoever reaches it reads the metrics and, with --pprof, profiles"},
		&cli.BoolFlag{Name: "pprof", EnvVars: env("PPROF"), Usage: "with --http-addr: serve Go's profiler under /debug/pprof/ on the admin listener"},
	}
}

// needHTTPAddr are the admin flags that mean nothing without --http-addr.
var needHTTPAddr = []string{"http-allow-remote", "pprof"}

// adminConfig reads the admin flags: nil without --http-addr. It checks
// them before the server opens anything, as a usage error would be.
func adminConfig(c *cli.Context) (*admin.Config, error) {
	addr := flag(c, "http-addr").String("http-addr")
	if addr == "" {
		if given := givenFlags(c, needHTTPAddr); len(given) > 0 {
			verb := "needs"
			if len(given) > 1 {
				verb = "need"
			}
			return nil, fmt.Errorf("%s %s --http-addr: without it there is no admin listener", strings.Join(given, " and "), verb)
		}
		return nil, nil
	}
	cfg := admin.DefaultConfig()
	cfg.Addr = addr
	cfg.AllowRemote = flag(c, "http-allow-remote").Bool("http-allow-remote")
	cfg.Pprof = flag(c, "pprof").Bool("pprof")
	if err := cfg.Validate(); err != nil {
		if errors.Is(err, admin.ErrRemote) {
			return nil, fmt.Errorf("--http-addr: %w: give a loopback address (127.0.0.1:PORT), or add --http-allow-remote", err)
		}
		return nil, fmt.Errorf("--http-addr: %w", err)
	}
	return &cfg, nil
}

// startAdmin starts the admin listener of cfg for srv, if cfg is not nil,
// and returns the function that stops it; serve calls that once the server
// has shut down, so that /readyz answers 503 through the drain.
func startAdmin(cfg *admin.Config, srv *server.Server, log zerolog.Logger) (stop func(), err error) {
	if cfg == nil {
		return func() {}, nil
	}
	a, err := admin.Start(*cfg, srv, log)
	if err != nil {
		return nil, err
	}
	return func() { a.Close() }, nil
}
