package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Files are the PEM files of one test's certificate authority and the
// server certificate it signed. The paths stay the same when the server
// certificate is re-issued (Rotate), as a deployment's would.
type Files struct {
	// Dir is the directory the files are in.
	Dir string
	// CACert is the CA's certificate, for a client's --cacert or a
	// server's --tls-ca-cert-file.
	CACert string
	// ServerCert and ServerKey are the server's certificate (valid for
	// 127.0.0.1, ::1 and localhost) and its private key.
	ServerCert string
	ServerKey  string

	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey

	mu     sync.Mutex // guards serial
	serial int64
}

// New makes a CA and a server certificate signed by it, writes them into
// dir (usually t.TempDir()) and returns their paths. It fails t on error.
func New(t testing.TB, dir string) *Files {
	t.Helper()
	f := &Files{
		Dir:        dir,
		CACert:     filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
	}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(f.nextSerial()),
		Subject:               pkix.Name{CommonName: "leasehold test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlstest: making the CA: %v", err)
	}
	f.caCert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: parsing the CA: %v", err)
	}
	f.caKey = key
	writePEM(t, f.CACert, "CERTIFICATE", der)
	f.Rotate(t)
	return f
}

// Rotate re-issues the server certificate with a new key and serial
// number, overwriting ServerCert and ServerKey, and returns the new
// certificate's serial number, for a test to tell which certificate a
// handshake presented (tls.ConnectionState.PeerCertificates[0].SerialNumber).
// The key file is written before the certificate file, each by a rename,
// so a reader sees a whole file, though it may see a new key beside the
// old certificate for a moment; tls.LoadX509KeyPair then fails and the
// reader keeps what it had.
func (f *Files) Rotate(t testing.TB) *big.Int {
	t.Helper()
	serial := big.NewInt(f.nextSerial())
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.caCert, &key.PublicKey, f.caKey)
	if err != nil {
		t.Fatalf("tlstest: making the server certificate: %v", err)
	}
	writePEM(t, f.ServerKey, "PRIVATE KEY", marshalKey(t, key))
	writePEM(t, f.ServerCert, "CERTIFICATE", der)
	return serial
}

// ClientCert makes a client certificate with common name cn, signed by
// the CA, writes it and its key into Dir (named after cn and a serial
// number, so two calls with one cn do not collide) and returns the paths.
func (f *Files) ClientCert(t testing.TB, cn string) (cert, key string) {
	t.Helper()
	serial := f.nextSerial()
	k := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.caCert, &k.PublicKey, f.caKey)
	if err != nil {
		t.Fatalf("tlstest: making a client certificate for %q: %v", cn, err)
	}
	base := fmt.Sprintf("client-%d", serial)
	cert = filepath.Join(f.Dir, base+".crt")
	key = filepath.Join(f.Dir, base+".key")
	writePEM(t, key, "PRIVATE KEY", marshalKey(t, k))
	writePEM(t, cert, "CERTIFICATE", der)
	return cert, key
}

// NodeCert makes a certificate for a cluster node with common name cn,
// signed by the CA and good both for serving and for client
// authentication (a node accepts its peers' connections and dials them
// with one certificate), valid for 127.0.0.1, ::1 and localhost. It writes
// it and its key into Dir and returns the paths.
func (f *Files) NodeCert(t testing.TB, cn string) (cert, key string) {
	t.Helper()
	serial := f.nextSerial()
	k := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.caCert, &k.PublicKey, f.caKey)
	if err != nil {
		t.Fatalf("tlstest: making a node certificate for %q: %v", cn, err)
	}
	base := fmt.Sprintf("node-%d", serial)
	cert = filepath.Join(f.Dir, base+".crt")
	key = filepath.Join(f.Dir, base+".key")
	writePEM(t, key, "PRIVATE KEY", marshalKey(t, k))
	writePEM(t, cert, "CERTIFICATE", der)
	return cert, key
}

// NodeConfig returns the tls.Config of a cluster node: a new NodeCert
// with common name cn, and the CA as both RootCAs (to verify the peers it
// dials) and ClientCAs (to verify the peers that dial it). ServerName is
// empty, so a dialler verifies the peer against the host it dialled.
func (f *Files) NodeConfig(t testing.TB, cn string) *tls.Config {
	t.Helper()
	certFile, keyFile := f.NodeCert(t, cn)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatalf("tlstest: loading the node certificate: %v", err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		RootCAs:      f.pool(),
		ClientCAs:    f.pool(),
		MinVersion:   tls.VersionTLS12,
	}
}

func (f *Files) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(f.caCert)
	return pool
}

// ClientConfig returns a client tls.Config that trusts the CA and, when
// cn is not empty, presents a new client certificate with that common
// name. ServerName is "localhost", which the server certificate names, so
// the config verifies the server whichever loopback address is dialled,
// also through tls.Client, which (unlike tls.Dial) needs one.
func (f *Files) ClientConfig(t testing.TB, cn string) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: f.pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if cn != "" {
		certFile, keyFile := f.ClientCert(t, cn)
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatalf("tlstest: loading the client certificate: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

func (f *Files) nextSerial() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.serial++
	return f.serial
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: making a key: %v", err)
	}
	return key
}

func marshalKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: encoding a key: %v", err)
	}
	return der
}

// writePEM writes one PEM block to path through a temporary file and a
// rename, so a server reloading the file never reads half of it.
func writePEM(t testing.TB, path, blockType string, der []byte) {
	t.Helper()
	tmp := path + ".tmp"
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
}
