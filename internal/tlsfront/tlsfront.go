// Package tlsfront puts a TLS listener in front of a plain leasehold
// server, for the tests of clients: it shows that a client speaks TLS to
// any TLS RESP server, whatever the server's own TLS does. It accepts only
// connections that complete a TLS handshake (and, as asked, present a
// client certificate signed by the test's CA), then relays their bytes.
// Only tests import it.
package tlsfront

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold/internal/tlstest"
)

// Front is a running TLS listener relaying to a target address. The test's
// cleanup closes it.
type Front struct {
	ln         net.Listener
	target     string
	handshakes atomic.Int64
	wg         sync.WaitGroup
	mu         sync.Mutex // guards conns
	conns      map[net.Conn]struct{}
}

// Start listens on a free loopback port with certs' server certificate and
// relays every connection that completes its handshake to target.
// clientAuth is tls.RequireAndVerifyClientCert to ask for a client
// certificate signed by certs' CA, tls.NoClientCert not to.
func Start(t testing.TB, certs *tlstest.Files, target string, clientAuth tls.ClientAuthType) *Front {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certs.ServerCert, certs.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   clientAuth,
		ClientCAs:    certs.ClientConfig(t, "").RootCAs,
		MinVersion:   tls.VersionTLS12,
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &Front{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.Close)
	return f
}

// Addr is the address the front listens on.
func (f *Front) Addr() string { return f.ln.Addr().String() }

// Handshakes counts the TLS connections relayed so far.
func (f *Front) Handshakes() int64 { return f.handshakes.Load() }

func (f *Front) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.relay(c.(*tls.Conn))
		}()
	}
}

// relay hands c, once its handshake is done, to a connection of its own to
// the target, until either side closes.
func (f *Front) relay(c *tls.Conn) {
	if !f.track(c) {
		return
	}
	defer f.untrack(c)
	if err := c.Handshake(); err != nil {
		return
	}
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	if !f.track(up) {
		return
	}
	defer f.untrack(up)
	f.handshakes.Add(1)
	done := make(chan struct{})
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, up)
	c.Close()
	<-done
}

// track records conn for Close; false, and conn closed, once Close ran.
func (f *Front) track(conn net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		conn.Close()
		return false
	}
	f.conns[conn] = struct{}{}
	return true
}

func (f *Front) untrack(conn net.Conn) {
	conn.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, conn)
}

// Close stops listening, closes every connection and waits for the
// goroutines. It is safe to call twice.
func (f *Front) Close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
