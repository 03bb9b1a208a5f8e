package command

import (
	"fmt"
	"net"
	"strconv"

	"github.com/leasehold/leasehold/internal/tlsconf"
	"github.com/urfave/cli/v2"
)

// tlsFlags are serve's TLS flags, Redis's names (docs/security.md).
func tlsFlags() []cli.Flag {
	def := tlsconf.Default()
	return []cli.Flag{
		&cli.IntFlag{Name: "tls-port", EnvVars: env("TLS_PORT"), Usage: "also listen for TLS on this port, on --addr's host, as Redis's tls-port (0: no TLS listener); --addr \"\" turns the plain listener off"},
		&cli.StringFlag{Name: "tls-addr", EnvVars: env("TLS_ADDR"), Usage: "listen for TLS on this address, HOST:PORT, in place of --tls-port's"},
		&cli.StringFlag{Name: "tls-cert-file", EnvVars: env("TLS_CERT_FILE"), Usage: "the server's certificate (chain), PEM; read again on SIGHUP"},
		&cli.StringFlag{Name: "tls-key-file", EnvVars: env("TLS_KEY_FILE"), Usage: "the server certificate's private key, PEM; read again on SIGHUP"},
		&cli.StringFlag{Name: "tls-ca-cert-file", EnvVars: env("TLS_CA_CERT_FILE"), Usage: "CA certificates, PEM, that client certificates are verified against; read again on SIGHUP"},
		&cli.StringFlag{Name: "tls-auth-clients", Value: def.AuthClients, EnvVars: env("TLS_AUTH_CLIENTS"), Usage: "yes (a client needs a certificate signed by the CA), optional (verified if given) or no"},
		&cli.StringFlag{Name: "tls-auth-clients-user", Value: "off", EnvVars: env("TLS_AUTH_CLIENTS_USER"), Usage: "CN: a client whose verified certificate's common name is an ACL user's name is that user, with no AUTH (Redis 8.6's setting); off: certificates grant no user"},
		&cli.StringFlag{Name: "tls-protocols", EnvVars: env("TLS_PROTOCOLS"), Usage: "TLS versions allowed, \"TLSv1.2\", \"TLSv1.3\" or both (default: both; never older)"},
	}
}

// tlsFileFlags mean nothing without a TLS listener.
var tlsFileFlags = []string{"tls-cert-file", "tls-key-file", "tls-ca-cert-file", "tls-auth-clients", "tls-auth-clients-user", "tls-protocols"}

// tlsConfig reads serve's TLS flags. plainAddr is --addr, whose host
// --tls-port listens on (127.0.0.1's if --addr is "").
func tlsConfig(c *cli.Context, plainAddr string) (tlsconf.Config, error) {
	cfg := tlsconf.Default()
	str := func(name string) string { return flag(c, name).String(name) }
	port := flag(c, "tls-port").Int("tls-port")
	cfg.Addr = str("tls-addr")
	switch {
	case cfg.Addr != "" && port != 0:
		return cfg, fmt.Errorf("give the TLS address one way: --tls-port or --tls-addr, not both")
	case port < 0 || port > 65535:
		return cfg, fmt.Errorf("--tls-port %d: want a port, 1 to 65535", port)
	case port != 0:
		host := "127.0.0.1"
		if plainAddr != "" {
			h, _, err := net.SplitHostPort(plainAddr)
			if err != nil {
				return cfg, fmt.Errorf("--addr %q: %w", plainAddr, err)
			}
			host = h
		}
		cfg.Addr = net.JoinHostPort(host, strconv.Itoa(port))
	}
	if cfg.Addr == "" {
		if flag(c, "cluster-tls").Bool("cluster-tls") {
			return cfg, nil // the files are the cluster's (clusterTLSConfig)
		}
		for _, name := range tlsFileFlags {
			if flag(c, name).IsSet(name) {
				return cfg, fmt.Errorf("--%s needs a TLS listener: add --tls-port PORT or --tls-addr HOST:PORT", name)
			}
		}
		return cfg, nil
	}
	cfg.CertFile = str("tls-cert-file")
	cfg.KeyFile = str("tls-key-file")
	cfg.CACertFile = str("tls-ca-cert-file")
	cfg.AuthClients = str("tls-auth-clients")
	cfg.Protocols = str("tls-protocols")
	cfg.AuthClientsUser = str("tls-auth-clients-user")
	return cfg, nil
}
