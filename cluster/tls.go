package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
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
