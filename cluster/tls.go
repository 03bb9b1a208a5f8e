package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// validateTLS reports the first thing wrong with a Config.TLS for mutual
// TLS between nodes, nil if nothing is.
func validateTLS(c *tls.Config) error {
	switch {
	case len(c.Certificates) == 0 && (c.GetCertificate == nil || c.GetClientCertificate == nil):
		return errors.New("cluster: TLS has no certificate (Certificates, or both GetCertificate and GetClientCertificate)")
	case c.RootCAs == nil:
		return errors.New("cluster: TLS.RootCAs is nil; a node would trust any publicly signed peer")
	case c.ClientCAs == nil:
		return errors.New("cluster: TLS.ClientCAs is nil; a node would trust any publicly signed peer")
	case c.InsecureSkipVerify:
		return errors.New("cluster: TLS.InsecureSkipVerify is set; peers must be verified")
	case c.GetConfigForClient != nil:
		return errors.New("cluster: TLS.GetConfigForClient is not supported (it would replace the client-certificate requirement); use GetCertificate to reload")
	case c.MaxVersion != 0 && c.MaxVersion < tls.VersionTLS12:
		return errors.New("cluster: TLS.MaxVersion is below TLS 1.2")
	}
	return nil
}

// peerConfigs derives from the caller's config the two ends of a node's
// mutual TLS: server (accepting a peer: its certificate required and
// verified against ClientCAs) and client (dialling a peer: presenting
// ours, verifying the peer's against RootCAs). Both refuse below TLS 1.2
// and, with allowed set, a peer whose certificate's common name it
// refuses. The caller's config is not changed.
func peerConfigs(c *tls.Config, allowed func(cn string) bool) (server, client *tls.Config) {
	server, client = c.Clone(), c.Clone()
	server.ClientAuth = tls.RequireAndVerifyClientCert
	for _, cfg := range []*tls.Config{server, client} {
		cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
		if allowed != nil {
			cfg.VerifyConnection = allowPeer(cfg.VerifyConnection, allowed)
		}
	}
	return server, client
}

// allowPeer runs the caller's VerifyConnection, if any, then allowed on the
// peer's common name. crypto/tls calls it after the chain is verified,
// on resumed sessions too.
func allowPeer(next func(tls.ConnectionState) error, allowed func(cn string) bool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if next != nil {
			if err := next(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 {
			return errors.New("cluster: peer presented no certificate")
		}
		if cn := cs.PeerCertificates[0].Subject.CommonName; !allowed(cn) {
			return fmt.Errorf("cluster: peer %q is not allowed (Config.AllowedPeer)", cn)
		}
		return nil
	}
}

// tlsStreamLayer is a raft.StreamLayer speaking mutual TLS over TCP.
//
// Accept does not handshake: raft's transport accepts on one goroutine,
// and a peer that connects and stays silent would hold every other peer
// out for as long as the handshake waited. Instead Accept sets a deadline
// of handshakeTimeout on the new connection and returns it; the handshake
// runs on the first Read or Write, which raft does on the connection's
// own goroutine, and a peer that has not completed it by the deadline is
// cut off. A failed handshake fails that Read, so raft closes the
// connection and logs the error; no RPC from an unverified peer ever
// reaches raft.
type tlsStreamLayer struct {
	ln               net.Listener
	server, client   *tls.Config
	handshakeTimeout time.Duration
}

func listenTLS(addr string, cfg *tls.Config, allowed func(cn string) bool, handshakeTimeout time.Duration) (*tlsStreamLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	server, client := peerConfigs(cfg, allowed)
	return &tlsStreamLayer{ln: ln, server: server, client: client, handshakeTimeout: handshakeTimeout}, nil
}

// Dial connects to a peer and completes the TLS handshake within timeout
// (raft's transport timeout). With TLS 1.3 a client learns that the peer
// refused its certificate only on its first read, so a refused node's
// Dial may succeed and its first RPC fail.
func (s *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// An empty ServerName is filled in from address's host by the dialer.
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: s.client}
	return d.DialContext(ctx, "tcp", string(address))
}

// Accept returns the next connection, its handshake still to come (see the
// type comment).
func (s *tlsStreamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	if err := c.SetDeadline(time.Now().Add(s.handshakeTimeout)); err != nil {
		_ = c.Close()
		return nil, err
	}
	return &acceptedConn{Conn: tls.Server(c, s.server)}, nil
}

func (s *tlsStreamLayer) Close() error   { return s.ln.Close() }
func (s *tlsStreamLayer) Addr() net.Addr { return s.ln.Addr() }

// acceptedConn completes the server side of the handshake on first use,
// under the deadline Accept set, and then lifts the deadline: raft's
// server side sets none of its own, as an idle pooled connection from a
// peer may stay open as long as the peer keeps it.
type acceptedConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *acceptedConn) handshake() error {
	c.once.Do(func() {
		if err := c.Conn.Handshake(); err != nil {
			c.err = fmt.Errorf("cluster: TLS handshake with %s: %w", c.RemoteAddr(), err)
			_ = c.Conn.Close()
			return
		}
		c.err = c.Conn.SetDeadline(time.Time{})
	})
	return c.err
}

func (c *acceptedConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *acceptedConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
