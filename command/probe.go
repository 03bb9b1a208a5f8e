package command

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// defaultProbeURL is the admin listener's readiness endpoint at the
// address docs/operations.md uses for --http-addr.
const defaultProbeURL = "http://127.0.0.1:9379/readyz"

// probeCommand is a health check for where there is no curl (the
// distroless image's HEALTHCHECK): it GETs one URL of the admin listener.
func probeCommand() *cli.Command {
	return &cli.Command{
		Name:      "probe",
		Usage:     "check a server's health endpoint (for a container's HEALTHCHECK)",
		ArgsUsage: " ",
		Description: "GETs --url, by default the readiness endpoint of an admin listener on\n" +
			"127.0.0.1:9379 (serve --http-addr), and prints its body. /readyz answers 200\n" +
			"once the server serves commands, 503 with the reason while it starts, shuts\n" +
			"down or (in a cluster) knows no leader; /healthz answers 200 while the\n" +
			"process runs.\n\n" +
			"Exit status: 0 on 200; 1 on any other status, no answer within --timeout,\n" +
			"or no listener, with the reason on stderr (a container engine's\n" +
			"\"unhealthy\"); 2 on bad arguments.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Value: defaultProbeURL, EnvVars: env("PROBE_URL"), Usage: "the endpoint to GET, http:// or https://"},
			&cli.DurationFlag{Name: "timeout", Value: 2 * time.Second, EnvVars: env("PROBE_TIMEOUT"), Usage: "longest wait for the answer, connecting included"},
		},
		Action: probe,
	}
}

func probe(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("unexpected argument %q: probe takes none", c.Args().First())
	}
	target, timeout := c.String("url"), c.Duration("timeout")
	if u, err := url.Parse(target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError("--url %q: want an http:// or https:// URL, such as %s", target, defaultProbeURL)
	}
	if timeout <= 0 {
		return usageError("--timeout %s: want a positive duration", timeout)
	}
	unhealthy := func(format string, args ...any) error {
		return exitWith(exitNo, fmt.Errorf("probe: "+format, args...))
	}
	cl := &http.Client{Timeout: timeout}
	resp, err := cl.Get(target)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return unhealthy("%s: no answer within %s", target, timeout)
		}
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return unhealthy("%s: %v", target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil {
		return unhealthy("%s: %s, reading the body: %v", target, resp.Status, err)
	}
	text := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return unhealthy("%s: %s: %s", target, resp.Status, text)
	}
	fmt.Fprintln(c.App.Writer, text)
	return nil
}
