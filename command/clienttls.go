package command

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// The TLS flags of the client commands carry redis-cli's names. Their
// environment variables start LEASEHOLD_TLS_: LEASEHOLD_KEY is already the
// lock's name in the environment of run's COMMAND.
func clientFlagsTLS() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "tls", EnvVars: env("TLS"), Usage: "connect with TLS (1.2 or later), verifying the server's certificate"},
		&cli.StringFlag{Name: "cacert", EnvVars: env("TLS_CACERT"), Usage: "with --tls, verify the server against the CA certificates of `FILE` (PEM) (default: the system's)"},
		&cli.StringFlag{Name: "cert", EnvVars: env("TLS_CERT"), Usage: "with --tls, present the client certificate of `FILE` (PEM), with --key"},
		&cli.StringFlag{Name: "key", EnvVars: env("TLS_KEY"), Usage: "with --tls, the private key of --cert, `FILE` (PEM)"},
		&cli.StringFlag{Name: "sni", EnvVars: env("TLS_SNI"), Usage: "with --tls, the server `NAME` to ask for and to verify (default: the host of each address of --addr)"},
		&cli.BoolFlag{Name: "insecure", EnvVars: env("TLS_INSECURE"), Usage: "with --tls, do not verify the server's certificate (for tests: anyone between can read and change the traffic)"},
	}
}

// tlsValueFlags are the client TLS flags that take a value, in the order the
// environment of run's COMMAND gets them.
var tlsValueFlags = []string{"cacert", "cert", "key", "sni"}

// clientTLS builds the TLS settings of --tls and its options for a
// connection to addrs; nil without --tls. The server name to verify is
// --sni, else the host of a single address; with several and no --sni it is
// left empty, for the client to verify each against its own host. The
// options without --tls are a usage error, as a connection the user
// believes encrypted must not go out in plain text (redis-cli ignores them).
func clientTLS(c *cli.Context, addrs []string) (*tls.Config, error) {
	if !c.Bool("tls") {
		for _, name := range tlsValueFlags {
			if c.String(name) != "" {
				return nil, usageError("--%s (or LEASEHOLD_TLS_%s) is an option of TLS: add --tls (or set LEASEHOLD_TLS=1)", name, strings.ToUpper(name))
			}
		}
		if c.Bool("insecure") {
			return nil, usageError("--insecure (or LEASEHOLD_TLS_INSECURE) is an option of TLS: add --tls (or set LEASEHOLD_TLS=1)")
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.String("sni"), InsecureSkipVerify: c.Bool("insecure")}
	if cfg.ServerName == "" && len(addrs) == 1 {
		cfg.ServerName, _, _ = net.SplitHostPort(addrs[0])
	}
	if file := c.String("cacert"); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, exitWith(exitFailure, fmt.Errorf("--cacert: %w", err))
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, exitWith(exitFailure, fmt.Errorf("--cacert %s: no PEM certificate in it", file))
		}
	}
	cert, key := c.String("cert"), c.String("key")
	switch {
	case cert == "" && key == "":
	case cert == "" || key == "":
		return nil, usageError("--cert and --key go together: the client certificate and its private key")
	default:
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, exitWith(exitFailure, fmt.Errorf("--cert %s, --key %s: %w", cert, key, err))
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// tlsEnviron is the environment that gives a client command started by
// COMMAND the TLS settings of c: run passes them on, as it does
// LEASEHOLD_ADDR, so that `leasehold verify` works from inside. Each is
// set, empty when not given, in place of what run itself inherited.
func tlsEnviron(c *cli.Context) []string {
	if !c.Bool("tls") {
		return nil
	}
	out := []string{"LEASEHOLD_TLS=1"}
	for _, name := range tlsValueFlags {
		out = append(out, "LEASEHOLD_TLS_"+strings.ToUpper(name)+"="+c.String(name))
	}
	insecure := ""
	if c.Bool("insecure") {
		insecure = "1"
	}
	return append(out, "LEASEHOLD_TLS_INSECURE="+insecure)
}
