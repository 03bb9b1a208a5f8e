package tlstest

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"
)

// TestHandshake checks the files make a working mutual-TLS pair: a server
// loading ServerCert/ServerKey and trusting CACert for client certificates
// accepts a client from ClientConfig, sees its common name, and after
// Rotate presents the new certificate.
func TestHandshake(t *testing.T) {
	f := New(t, t.TempDir())
	for _, round := range []string{"first", "rotated"} {
		t.Run(round, func(t *testing.T) {
			var want int64
			if round == "rotated" {
				want = f.Rotate(t).Int64()
			}
			pair, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
			if err != nil {
				t.Fatal(err)
			}
			clientCfg := f.ClientConfig(t, "alice")
			serverCfg := &tls.Config{
				Certificates: []tls.Certificate{pair},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    clientCfg.RootCAs,
			}
			ln, err := tls.Listen("tcp", "127.0.0.1:0", serverCfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			gotCN := make(chan string, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					gotCN <- "accept: " + err.Error()
					return
				}
				defer c.Close()
				tc := c.(*tls.Conn)
				if err := tc.Handshake(); err != nil {
					gotCN <- "handshake: " + err.Error()
					return
				}
				gotCN <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
				io.Copy(io.Discard, tc)
			}()
			c, err := tls.Dial("tcp", ln.Addr().String(), clientCfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if cn := <-gotCN; cn != "alice" {
				t.Fatalf("server saw client CN %q, want alice", cn)
			}
			serial := c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
			if round == "rotated" && serial != want {
				t.Fatalf("server presented serial %d, want the rotated %d", serial, want)
			}
		})
	}
}

// TestUntrustedClientRefused checks a client certificate from another CA
// is refused by a server trusting only this one.
func TestUntrustedClientRefused(t *testing.T) {
	f, other := New(t, t.TempDir()), New(t, t.TempDir())
	pair, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	serverCfg := &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    f.ClientConfig(t, "").RootCAs,
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		serverErr <- c.(*tls.Conn).Handshake()
	}()
	clientCfg := f.ClientConfig(t, "")
	clientCfg.Certificates = other.ClientConfig(t, "mallory").Certificates
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := tls.Client(c, clientCfg)
	tc.Handshake() // TLS 1.3: the client may learn of the refusal only on its next read
	if err := <-serverErr; err == nil {
		t.Fatal("server accepted a client certificate from another CA")
	}
}

// TestNodeConfigsTalkBothWays checks two NodeConfigs make a mutual-TLS
// pair in either role: the dialler verifies the listener against the
// dialled IP, the listener requires and verifies the dialler's
// certificate, and each sees the other's common name.
func TestNodeConfigsTalkBothWays(t *testing.T) {
	f := New(t, t.TempDir())
	a, b := f.NodeConfig(t, "n1"), f.NodeConfig(t, "n2")
	for _, tc := range []struct{ server, client *tls.Config }{{a, b}, {b, a}} {
		serverCfg := tc.server.Clone()
		serverCfg.ClientAuth = tls.RequireAndVerifyClientCert
		ln, err := tls.Listen("tcp", "127.0.0.1:0", serverCfg)
		if err != nil {
			t.Fatal(err)
		}
		gotCN := make(chan string, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				gotCN <- "accept: " + err.Error()
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if err := c.(*tls.Conn).Handshake(); err != nil {
				gotCN <- "handshake: " + err.Error()
				return
			}
			gotCN <- c.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName
			io.Copy(io.Discard, c)
		}()
		c, err := tls.Dial("tcp", ln.Addr().String(), tc.client)
		if err != nil {
			t.Fatal(err)
		}
		wantServer := tc.server.Certificates[0].Leaf.Subject.CommonName
		wantClient := tc.client.Certificates[0].Leaf.Subject.CommonName
		if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != wantServer {
			t.Errorf("client saw server CN %q, want %q", cn, wantServer)
		}
		if cn := <-gotCN; cn != wantClient {
			t.Errorf("server saw client CN %q, want %q", cn, wantClient)
		}
		c.Close()
		ln.Close()
	}
}
