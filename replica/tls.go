package replica

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
)

// TLSConfig is the mutual TLS between cluster nodes: Raft traffic,
// forwarded commands and joins. Every node of a group has it, or none.
type TLSConfig struct {
	// CertFile and KeyFile are the node's certificate, whose extended key
	// usage must allow both server and client authentication (it accepts
	// its peers' connections and dials them), and its key. Read again by
	// Replica.ReloadTLS (SIGHUP).
	CertFile, KeyFile string
	// CACertFile holds the CA(s) every peer's certificate must chain to.
	CACertFile string
	// ServerName, when set, is the name every node's certificate carries;
	// empty verifies a dialled peer against the host of its Raft address.
	ServerName string
	// AllowedCNs, when set, are the common names a peer's certificate may
	// have: a certificate the CA signed for anything else (a RESP client)
	// cannot talk to the node.
	AllowedCNs []string
}

// nodeTLS is a node's certificate, swapped by Replica.ReloadTLS.
type nodeTLS struct {
	cfg  TLSConfig
	pair atomic.Pointer[tls.Certificate]
}

// newNodeTLS reads cfg's files into the tls.Config the cluster package
// takes, with the certificate read through nodeTLS so that a reload
// reaches new connections.
func newNodeTLS(cfg TLSConfig) (*nodeTLS, *tls.Config, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" || cfg.CACertFile == "" {
		return nil, nil, errors.New("replica: cluster TLS needs a certificate, its key and a CA file")
	}
	n := &nodeTLS{cfg: cfg}
	if err := n.reload(); err != nil {
		return nil, nil, err
	}
	pem, err := os.ReadFile(cfg.CACertFile)
	if err != nil {
		return nil, nil, fmt.Errorf("replica: cluster TLS CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("replica: cluster TLS CA file %s: no PEM certificate in it", cfg.CACertFile)
	}
	tc := &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return n.pair.Load(), nil },
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return n.pair.Load(), nil
		},
		RootCAs:    pool,
		ClientCAs:  pool,
		ServerName: cfg.ServerName,
		MinVersion: tls.VersionTLS12,
	}
	return n, tc, nil
}

// reload reads the certificate and key again; on failure the node keeps
// the ones it had.
func (n *nodeTLS) reload() error {
	pair, err := tls.LoadX509KeyPair(n.cfg.CertFile, n.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("replica: cluster TLS certificate %s with key %s: %w", n.cfg.CertFile, n.cfg.KeyFile, err)
	}
	n.pair.Store(&pair)
	return nil
}

// allowedPeer is the cluster's AllowedPeer of cfg, nil when any
// certificate of the CA will do.
func (cfg TLSConfig) allowedPeer() func(cn string) bool {
	if len(cfg.AllowedCNs) == 0 {
		return nil
	}
	allowed := slices.Clone(cfg.AllowedCNs)
	return func(cn string) bool { return slices.Contains(allowed, cn) }
}

// ReloadTLS reads the certificate between nodes and its key again (the
// server's ReloadTLS, on SIGHUP), and returns the certificate file read, ""
// when the node has no TLS between nodes. On failure the node keeps the
// certificate it had.
func (r *Replica) ReloadTLS() (certFile string, err error) {
	if r.tls == nil {
		return "", nil
	}
	return r.tls.cfg.CertFile, r.tls.reload()
}
