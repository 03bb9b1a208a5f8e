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

// Every stream on the Raft port begins with one of these bytes, sent by the
// dialling side (after the TLS handshake, with TLS), saying who reads the
// rest: raft's transport, or the node's own RPC server (rpc.go). Neither is
// a valid first byte of a raft message (raft's RPC types are 0 to 5), so a
// peer that speaks raft without the marker is refused rather than
// misread.
const (
	streamRaft byte = 'R'
	streamRPC  byte = 'N'
)

// errMuxClosed is what Accept returns once the layer is closed.
var errMuxClosed = errors.New("cluster: raft listener closed")

// muxLayer owns the Raft port. It is the raft.StreamLayer a Node's
// NetworkTransport uses, plain TCP or mutual TLS, and it also hands the
// node's RPC streams to the RPC server.
//
// One goroutine accepts; each accepted connection then gets a goroutine of
// its own that completes the TLS handshake (with TLS) and reads the marker
// byte, both within handshakeTimeout, and passes the connection on:
// marked streamRaft to Accept (raft's transport), streamRPC to rpcConns.
// A connection that fails the handshake, is silent past the deadline or
// starts with any other byte is closed. So a silent or hostile peer holds
// one socket and one goroutine for at most handshakeTimeout, and raft's
// single accepting goroutine never waits on one.
//
// Close closes the listener and every connection the layer accepted,
// including those already handed to raft or to the RPC server, and waits
// for its goroutines.
type muxLayer struct {
	ln               net.Listener
	server, client   *tls.Config // nil: plain TCP
	handshakeTimeout time.Duration

	raftConns chan net.Conn // to Accept
	rpcConns  chan net.Conn // to the RPC server
	closeC    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // the accept loop and the classifying goroutines

	mu    sync.Mutex // guards conns
	conns map[net.Conn]struct{}
}

// listenMux listens on addr: mutual TLS with tlsCfg (and allowed, see
// peerConfigs), plain TCP if tlsCfg is nil.
func listenMux(addr string, tlsCfg *tls.Config, allowed func(cn string) bool, handshakeTimeout time.Duration) (*muxLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &muxLayer{
		ln:               ln,
		handshakeTimeout: handshakeTimeout,
		raftConns:        make(chan net.Conn),
		rpcConns:         make(chan net.Conn),
		closeC:           make(chan struct{}),
		conns:            make(map[net.Conn]struct{}),
	}
	if tlsCfg != nil {
		m.server, m.client = peerConfigs(tlsCfg, allowed)
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

func (m *muxLayer) acceptLoop() {
	defer m.wg.Done()
	var delay time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closeC:
				return
			default:
			}
			// A transient failure (too many open files): back off as
			// net/http does, at most a second.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
				continue
			case <-m.closeC:
				return
			}
		}
		delay = 0
		tc := &trackedConn{Conn: c, m: m}
		if !m.track(tc) {
			_ = c.Close()
			return
		}
		m.wg.Add(1)
		go m.classify(tc)
	}
}

// classify completes the handshake, reads the marker and hands c on, or
// closes it.
func (m *muxLayer) classify(c *trackedConn) {
	defer m.wg.Done()
	marker, err := m.open(c)
	if err != nil {
		_ = c.Close()
		return
	}
	var to chan net.Conn
	switch marker {
	case streamRaft:
		to = m.raftConns
	case streamRPC:
		to = m.rpcConns
	default:
		_ = c.Close()
		return
	}
	select {
	case to <- c.stream():
	case <-m.closeC:
		_ = c.Close()
	}
}

// open runs the server side of the handshake (with TLS) and reads the
// marker, within handshakeTimeout, then lifts the deadline: raft's server
// side sets none of its own, as a pooled connection from a peer may stay
// idle as long as the peer keeps it.
func (m *muxLayer) open(c *trackedConn) (byte, error) {
	if err := c.SetDeadline(time.Now().Add(m.handshakeTimeout)); err != nil {
		return 0, err
	}
	if m.server != nil {
		tc := tls.Server(c.Conn, m.server)
		if err := tc.Handshake(); err != nil {
			return 0, fmt.Errorf("cluster: TLS handshake with %s: %w", c.RemoteAddr(), err)
		}
		c.tls = tc
	}
	var b [1]byte
	if _, err := c.stream().Read(b[:]); err != nil {
		return 0, err
	}
	return b[0], c.SetDeadline(time.Time{})
}

func (m *muxLayer) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns == nil {
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *muxLayer) untrack(c net.Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conns, c)
}

// Accept returns the next stream marked for raft.
func (m *muxLayer) Accept() (net.Conn, error) {
	select {
	case c := <-m.raftConns:
		return c, nil
	case <-m.closeC:
		return nil, errMuxClosed
	}
}

// acceptRPC returns the next stream marked for the RPC server.
func (m *muxLayer) acceptRPC() (net.Conn, error) {
	select {
	case c := <-m.rpcConns:
		return c, nil
	case <-m.closeC:
		return nil, errMuxClosed
	}
}

// Dial opens a raft stream to a peer (raft.StreamLayer).
func (m *muxLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return m.dial(string(address), streamRaft, timeout)
}

// dial connects to address, completes the TLS handshake (with TLS) and
// sends marker, all within timeout. With TLS 1.3 a client learns that the
// peer refused its certificate only on its first read, so a refused
// node's dial may succeed and its first exchange fail.
func (m *muxLayer) dial(address string, marker byte, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var c net.Conn
	var err error
	if m.client == nil {
		d := &net.Dialer{}
		c, err = d.DialContext(ctx, "tcp", address)
	} else {
		// An empty ServerName is filled in from address's host.
		d := &tls.Dialer{Config: m.client}
		c, err = d.DialContext(ctx, "tcp", address)
	}
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	if err := c.SetWriteDeadline(deadline); err != nil {
		_ = c.Close()
		return nil, err
	}
	if _, err := c.Write([]byte{marker}); err != nil {
		_ = c.Close()
		return nil, err
	}
	if err := c.SetWriteDeadline(time.Time{}); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the listener and every accepted connection, and waits for
// the layer's goroutines. It is safe to call twice.
func (m *muxLayer) Close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.closeC)
		err = m.ln.Close()
		m.mu.Lock()
		conns := m.conns
		m.conns = nil
		m.mu.Unlock()
		for c := range conns {
			_ = c.Close()
		}
		m.wg.Wait()
	})
	return err
}

func (m *muxLayer) Addr() net.Addr { return m.ln.Addr() }

// trackedConn is an accepted connection: the TCP connection (and, with TLS,
// the TLS connection over it once the handshake is done) that leaves the
// layer's set when closed.
type trackedConn struct {
	net.Conn // TCP
	m        *muxLayer
	tls      *tls.Conn // nil: plain TCP
	once     sync.Once
}

// stream is the connection to read and write: TLS if any, else TCP.
func (c *trackedConn) stream() net.Conn {
	if c.tls != nil {
		return &tlsTracked{Conn: c.tls, owner: c}
	}
	return c
}

// Close closes the TCP connection, without TLS's close_notify: Close may
// run on any goroutine while another is still in the handshake, and the
// peer learns of the end from the TCP close either way.
func (c *trackedConn) Close() error {
	c.once.Do(func() { c.m.untrack(c) })
	return c.Conn.Close()
}

// tlsTracked is the TLS stream of a trackedConn; closing it closes both.
type tlsTracked struct {
	*tls.Conn
	owner *trackedConn
}

func (c *tlsTracked) Close() error { return c.owner.Close() }
