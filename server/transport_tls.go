package server

import (
	"context"
	"crypto/tls"
	"github.com/leasehold/leasehold/internal/cmdstats"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/tlsconf"
)

// TLS, as Redis's: a listener of its own beside the plain one (or instead
// of it, with Config.Addr ""), certificates from PEM files that ReloadTLS
// reads again without a restart, and client certificates verified as
// tls-auth-clients says. A connection's handshake runs on a goroutine the
// Server owns, bounded by tlsconf.Config.HandshakeTimeout; then the connection
// goes to its transport like a plain one. The goroutine transport reads
// through the tls.Conn from the socket and seals its replies in memory;
// the event loop feeds the tls.Conn the socket's bytes from memory and
// sends what it seals (see tlsTransport and tls_eventloop_linux.go).

// tlsState is the server's TLS: the configuration new handshakes use,
// which ReloadTLS swaps, and a count of failed handshakes.
type tlsState struct {
	cfg      tlsconf.Config
	current  atomic.Pointer[tls.Config]
	listener *tls.Config // hands each handshake current's value
	failures atomic.Uint64
	// handshaking counts handshakes in progress, under Server.mu.
	handshaking int
}

// newTLSState reads cfg's files; nil without a TLS listener.
func newTLSState(cfg tlsconf.Config) (*tlsState, error) {
	if cfg.Addr == "" {
		return nil, nil
	}
	t := &tlsState{cfg: cfg}
	current, err := tlsconf.Load(cfg)
	if err != nil {
		return nil, err
	}
	t.current.Store(current)
	t.listener = &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return t.current.Load(), nil },
	}
	return t, nil
}

// ReloadTLS reads the certificate, key and CA files again, for the
// handshakes from now on; connections already established keep the
// session they have. If a file cannot be read or the certificate does not
// match its key, it returns the error and the server keeps what it had.
// Without a TLS listener it does nothing. It is safe to call from any
// goroutine (the serve command calls it on SIGHUP).
func (s *Server) ReloadTLS() error {
	if s.replica != nil {
		switch file, err := s.replica.ReloadTLS(); {
		case err != nil:
			s.log.Error().Err(err).Msg("cluster TLS reload failed; keeping the certificate loaded before")
			return err
		case file != "":
			s.log.Info().Str("cluster_tls_cert_file", file).Msg("cluster TLS certificate reloaded")
		}
	}
	if s.tls == nil {
		return nil
	}
	next, err := tlsconf.Load(s.tls.cfg)
	if err != nil {
		s.log.Error().Err(err).Msg("TLS reload failed; keeping the certificates loaded before")
		return err
	}
	s.tls.current.Store(next)
	s.log.Info().Str("tls_cert_file", s.tls.cfg.CertFile).Msg("TLS certificates reloaded")
	return nil
}

// TLSAddr is the address the TLS listener listens on, or nil before
// Listen or without one.
func (s *Server) TLSAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tlsLn == nil {
		return nil
	}
	return s.tlsLn.Addr()
}

// startTLS runs nc's handshake on a goroutine the server owns and hands
// the connection to startConn once it has succeeded. Handshakes in
// progress are bounded by the maximum number of clients: past it a new
// connection is closed at once, since no reply can reach a client before
// its handshake.
func (s *Server) startTLS(nc net.Conn) {
	s.mu.Lock()
	if s.closed || s.tls.handshaking >= s.maxConns {
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			s.stats.connectionsRejected.Add(1)
		}
		nc.Close()
		return
	}
	s.tls.handshaking++
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		tc, err := s.handshake(nc)
		s.mu.Lock()
		s.tls.handshaking--
		s.mu.Unlock()
		if err != nil {
			s.tls.failures.Add(1)
			s.log.Debug().Err(err).Stringer("remote", nc.RemoteAddr()).Msg("TLS handshake failed")
			nc.Close()
			return
		}
		s.startConn(tc)
	}()
}

// handshake runs the server side of a TLS handshake on nc, within the
// handshake timeout, and ends it early if the server closes.
func (s *Server) handshake(nc net.Conn) (*tlsConn, error) {
	tr := &tlsTransport{Conn: nc}
	tc := tls.Server(tr, s.tls.listener)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel() // HandshakeContext closes the socket
		case <-ctx.Done():
		}
	}()
	nc.SetDeadline(time.Now().Add(s.tls.cfg.HandshakeTimeout))
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return &tlsConn{Conn: tc, tr: tr}, nil
}

// tlsConn is a connection whose handshake is done, on its way to a
// transport.
type tlsConn struct {
	*tls.Conn
	tr *tlsTransport
}

// Close closes the socket without a close_notify alert: a client that
// does not read would hold up the close otherwise (crypto/tls gives the
// alert up to 5 s, under the lock a blocked write holds), and the alert
// adds nothing a lock client needs after a QUIT or a refusal.
func (c *tlsConn) Close() error { return c.tr.Conn.Close() }

// lingerRefused bounds how long closeRefused waits for a refused TLS
// client to read its refusal and go.
const lingerRefused = 500 * time.Millisecond

// closeRefused closes a connection startConn refused, after writing why. A
// TLS client has likely sent its first command by then (its side of the
// handshake ends before ours), and closing a socket with input unread
// resets the connection, which can discard the refusal before the client
// reads it. So for TLS the socket's sending side is shut first, and its
// input read and dropped until the client closes, or lingerRefused. It
// runs on the handshake's goroutine (startTLS), never the accept loop.
func closeRefused(nc net.Conn) {
	tc, ok := nc.(*tlsConn)
	if !ok {
		nc.Close()
		return
	}
	sock := tc.tr.Conn
	if tcp, ok := sock.(*net.TCPConn); ok {
		tcp.CloseWrite()
		tcp.SetReadDeadline(time.Now().Add(lingerRefused))
		io.Copy(io.Discard, io.LimitReader(tcp, 1<<20))
	}
	sock.Close()
}

// peerCN is the common name of nc's client certificate, verified in the
// handshake; "" for a plain connection or a client that presented none.
func peerCN(nc net.Conn) string {
	tc, ok := nc.(*tlsConn)
	if !ok {
		return ""
	}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		return certs[0].Subject.CommonName
	}
	return ""
}

// socketOf is nc's TCP connection, under TLS if nc has it: for the checks
// that look at the socket itself (watchHangup, peerClosed).
func socketOf(nc net.Conn) net.Conn {
	if tc, ok := nc.(*tlsConn); ok {
		return tc.tr.Conn
	}
	return nc
}

// errTLSWouldBlock is what tlsTransport's Read says, on the event loop,
// when it has no bytes of the socket's in hand: a temporary net.Error,
// which crypto/tls hands back without making it the connection's lasting
// error (see readRecordOrCCS), so that the Read can be made again once
// the socket has more.
var errTLSWouldBlock error = tlsWouldBlock{}

type tlsWouldBlock struct{}

func (tlsWouldBlock) Error() string   { return "server: tls: would block" }
func (tlsWouldBlock) Timeout() bool   { return false }
func (tlsWouldBlock) Temporary() bool { return true }

// tlsTransport is what a tls.Conn reads and writes. During the handshake
// it is the socket. Once an event loop adopts the connection (adoptTLS)
// the socket belongs to the loop, and the transport is memory: Read hands
// out the bytes the loop read from the socket into in, and says
// errTLSWouldBlock when they are spent; Write collects records in out for
// the loop to send. On the goroutine transport (sealWithTLS) reads go to
// the socket, and writes to out, which the connection sends as it sends a
// plain connection's replies (writeSocketTLS).
type tlsTransport struct {
	net.Conn
	memory      bool   // event loop: reads and writes are memory
	writeMemory bool   // goroutine transport: writes are
	in          []byte // event loop: socket bytes crypto/tls has yet to take
	inBuf       []byte // in's storage
	readErr     error  // event loop: the socket's end (io.EOF) or failure, once met

	// mu guards out: on the goroutine transport, crypto/tls may write an
	// alert or a KeyUpdate's answer from the reading goroutine while the
	// connection's replies are sealed under its wmu.
	mu  sync.Mutex
	out []byte // records crypto/tls wrote, for the socket

	readCount *cmdstats.Block // goroutine transport: counts the socket bytes read
}

func (t *tlsTransport) Read(p []byte) (int, error) {
	if !t.memory {
		n, err := t.Conn.Read(p)
		if t.readCount != nil {
			t.readCount.NetIn.Add(uint64(n))
		}
		return n, err
	}
	if len(t.in) == 0 {
		if t.readErr != nil {
			return 0, t.readErr
		}
		return 0, errTLSWouldBlock
	}
	n := copy(p, t.in)
	t.in = t.in[n:]
	return n, nil
}

func (t *tlsTransport) Write(p []byte) (int, error) {
	if !t.memory && !t.writeMemory {
		return t.Conn.Write(p)
	}
	t.mu.Lock()
	t.out = append(t.out, p...)
	t.mu.Unlock()
	return len(p), nil
}

// takeOut hands the records written so far to send, which must not keep
// them, and keeps out's storage unless a large reply grew it.
func (t *tlsTransport) takeOut(send func([]byte) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := send(t.out)
	t.out = t.out[:0]
	if cap(t.out) > 4*tlsRecordRoom {
		t.out = nil
	}
	return err
}

// tlsRecordRoom is a record of the largest size with room to spare.
const tlsRecordRoom = 32 << 10

// sealWithTLS has the goroutine transport's conn c write through tc: its
// replies are sealed into records in memory and sent on the socket, without
// blocking, as a plain connection's are (writeSocket), rather than by a
// blocking tls.Conn.Write.
func (c *conn) sealWithTLS(tc *tlsConn) {
	c.tlsConn = tc
	c.tlsCN = peerCN(tc)
	c.authenticateByCertificate()
	tc.tr.writeMemory = true
	tc.tr.readCount = c.counters
	if sc, ok := tc.tr.Conn.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
}

// writeSocketTLS is writeSocket for a TLS connection on the goroutine
// transport; the caller holds wmu.
func (c *conn) writeSocketTLS(p []byte, pubsub bool) error {
	if _, err := c.tlsConn.Write(p); err != nil {
		return err
	}
	return c.tlsConn.tr.takeOut(func(records []byte) error { return c.writeSocketRaw(records, pubsub) })
}

// socket is where the goroutine transport's writer sends the bytes
// writeSocket queued: the socket itself, under TLS as well, since they are
// sealed already.
func (c *conn) socket() net.Conn {
	if c.tlsConn != nil {
		return c.tlsConn.tr.Conn
	}
	return c.nc
}
