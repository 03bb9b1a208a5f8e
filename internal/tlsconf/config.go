package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// Config is the TLS listener's settings, server.Config's TLS part.
type Config struct {
	// Addr is the TLS listener's address, HOST:PORT (port 0 picks a free
	// one); "" for none.
	Addr string
	// CertFile and KeyFile are the server's certificate (chain) and its
	// private key, PEM, as Redis's tls-cert-file and tls-key-file.
	CertFile, KeyFile string
	// CACertFile holds the CA certificates (PEM) that client certificates
	// are verified against, as Redis's tls-ca-cert-file.
	CACertFile string
	// AuthClients is Redis's tls-auth-clients: "yes" refuses a client
	// without a certificate signed by a CA of CACertFile in the handshake,
	// "optional" verifies one if the client presents it, "no" asks for none.
	AuthClients string
	// Protocols are the TLS versions allowed, as Redis's tls-protocols:
	// "TLSv1.2", "TLSv1.3" or both, space-separated; "" for both. Older
	// versions are never allowed.
	Protocols string
	// AuthClientsUser is Redis 8.6's tls-auth-clients-user: "CN" has a
	// client whose verified certificate's common name is a user's name
	// start as that user, with no AUTH; "off" (or "") has certificates
	// grant no user (the server's certuser.go).
	AuthClientsUser string
	// HandshakeTimeout bounds a handshake, so that a client that connects
	// and says nothing holds a goroutine and a descriptor only that long.
	HandshakeTimeout time.Duration
}

// Default is Config's defaults: no TLS listener, and Redis's
// tls-auth-clients yes for when there is one.
func Default() Config {
	return Config{AuthClients: "yes", HandshakeTimeout: 10 * time.Second}
}

// Validate reports the first setting out of range; the files are read by
// Load.
func (c Config) Validate() error {
	if c.Addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("tlsconf: tls addr %q: %w", c.Addr, err)
	}
	if c.CertFile == "" || c.KeyFile == "" {
		return errors.New("tlsconf: a TLS listener needs tls-cert-file and tls-key-file")
	}
	switch c.AuthClients {
	case "yes", "optional":
		if c.CACertFile == "" {
			return fmt.Errorf("tlsconf: tls-auth-clients %s needs tls-ca-cert-file, the CA that client certificates are verified against (or tls-auth-clients no)", c.AuthClients)
		}
	case "no":
	default:
		return fmt.Errorf("tlsconf: tls-auth-clients %q: want yes, no or optional", c.AuthClients)
	}
	if _, _, err := parseProtocols(c.Protocols); err != nil {
		return err
	}
	switch strings.ToLower(c.AuthClientsUser) {
	case "", "off":
	case "cn":
		if c.AuthClients == "no" {
			return errors.New("tlsconf: tls-auth-clients-user CN needs client certificates: tls-auth-clients yes or optional")
		}
	default:
		return fmt.Errorf("tlsconf: tls-auth-clients-user %q: want CN or off", c.AuthClientsUser)
	}
	if c.HandshakeTimeout <= 0 {
		return fmt.Errorf("tlsconf: tls handshake timeout must be positive, got %s", c.HandshakeTimeout)
	}
	return nil
}

// parseProtocols reads Redis's tls-protocols.
func parseProtocols(s string) (lowest, highest uint16, err error) {
	if strings.TrimSpace(s) == "" {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	for _, p := range strings.Fields(s) {
		var v uint16
		switch strings.ToLower(p) {
		case "tlsv1.2":
			v = tls.VersionTLS12
		case "tlsv1.3":
			v = tls.VersionTLS13
		case "tlsv1", "tlsv1.1":
			return 0, 0, fmt.Errorf("tlsconf: tls-protocols %q: %s is not allowed; leasehold speaks TLSv1.2 and TLSv1.3", s, p)
		default:
			return 0, 0, fmt.Errorf("tlsconf: tls-protocols %q: unknown protocol %q; want TLSv1.2 and/or TLSv1.3", s, p)
		}
		if lowest == 0 || v < lowest {
			lowest = v
		}
		highest = max(highest, v)
	}
	return lowest, highest, nil
}

// Load reads the certificate, key and CA files of c into a tls.Config,
// for a listener's handshakes.
func Load(c Config) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: tls-cert-file %s with tls-key-file %s: %w", c.CertFile, c.KeyFile, err)
	}
	lowest, highest, err := parseProtocols(c.Protocols)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   lowest,
		MaxVersion:   highest,
		// Full records from the start: replies are small, pipelines large.
		DynamicRecordSizingDisabled: true,
	}
	if c.CACertFile != "" {
		pem, err := os.ReadFile(c.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: tls-ca-cert-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tlsconf: tls-ca-cert-file %s: no PEM certificate in it", c.CACertFile)
		}
		cfg.ClientCAs = pool
	}
	switch c.AuthClients {
	case "yes":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case "optional":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}
