package cluster

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The node-to-node RPC rides the Raft port (muxLayer, marker streamRPC).
// A connection carries many requests at once: each frame has a request id,
// the client writes requests as callers make them and the server answers
// each as soon as its handler returns, in any order. So one slow request
// holds up nobody (BenchmarkForward measures this against one request in
// flight per connection).
//
// A frame, both ways: a 4-byte big-endian length of what follows, then
// one byte (the request's kind, or the reply's status), an 8-byte request
// id and the body. A frame announcing more than maxFrame bytes closes the
// connection.
const (
	maxFrame    = 64 << 20
	frameHeader = 4 + 1 + 8

	// rpcConnsPerPeer is how many connections a node keeps to each peer it
	// calls; requests are spread over them round-robin, so that one
	// connection's TCP window or a large frame on it does not stall the
	// rest.
	rpcConnsPerPeer = 2
	// rpcIdleTimeout closes a client connection that has had no request in
	// flight and nothing to read for this long; the server waits twice as
	// long, so that the client, which knows when it is about to send, is
	// the one to close an idle connection and never writes into one the
	// server is closing.
	rpcIdleTimeout = 60 * time.Second
	// rpcMaxInFlight bounds the requests a server runs at once per
	// connection; past it the server stops reading that connection.
	rpcMaxInFlight = 1024
)

// Request kinds.
const (
	kindForward   byte = 1 // body: the request for Config.Handler; reply: its answer
	kindReadIndex byte = 2 // body: the caller's timeout; reply: the read index
	kindJoin      byte = 3 // body: id, addr, hops; reply: empty
	kindAdd       byte = 4 // body: id, addr; reply: empty
	kindRemove    byte = 5 // body: id; reply: empty
	// kindProbe is no request: every member, of any version, answers a
	// kind it does not know with an error (errBadRequest). Its byte is a
	// newline, so a RESP server, which reads commands by the line, answers
	// the frame at once too, with a RESP error; askJoin sends one first to
	// tell a member's Raft port from its RESP port (ErrNotRaftPort).
	kindProbe byte = '\n'
)

// Reply statuses.
const (
	statusOK  byte = 0 // body: the answer
	statusErr byte = 1 // body: an error code byte, then the message
)

// Error codes of a statusErr reply: which of the package's errors the
// remote one was, so that the caller can tell them apart with errors.Is.
const (
	codeOther byte = iota
	codeNoHandler
	codeNotLeader
	codeNoLeader
	codeConflict
	codeCatchUp
	codeClosed
	codeTooLarge
	codeBadRequest
)

var codeErrors = map[byte]error{
	codeNoHandler: ErrNoHandler,
	codeNotLeader: ErrNotLeader,
	codeNoLeader:  ErrNoLeader,
	codeConflict:  ErrServerConflict,
	codeCatchUp:   ErrCatchUpTimeout,
	codeClosed:    ErrClosed,
	codeTooLarge:  ErrFrameTooLarge,
}

// encodeError is the body of a statusErr reply for err.
func encodeError(err error) []byte {
	code := codeOther
	for c, e := range codeErrors {
		if errors.Is(err, e) {
			code = c
			break
		}
	}
	return append([]byte{code}, err.Error()...)
}

// remoteError is an error another node answered with.
type remoteError struct {
	code byte
	msg  string
}

func decodeError(body []byte) error {
	if len(body) == 0 {
		return &remoteError{code: codeOther, msg: "empty error reply"}
	}
	return &remoteError{code: body[0], msg: string(body[1:])}
}

func (e *remoteError) Error() string { return "remote: " + e.msg }

func (e *remoteError) Unwrap() error { return codeErrors[e.code] }

// frame is one decoded frame.
type frame struct {
	kind byte // request kind or reply status
	id   uint64
	body []byte
}

var errFrameTooLarge = fmt.Errorf("%w (limit %d bytes)", ErrFrameTooLarge, maxFrame)

// readFrame reads one frame. A length over maxFrame (or too short to hold
// a kind and an id) is an error, after which the connection must be
// closed: the rest of the stream can no longer be parsed.
func readFrame(r io.Reader) (frame, error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return frame{}, err
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	if size > maxFrame {
		if respReply(hdr[:4]) {
			// No frame starts so: its length would be over 700 MB.
			return frame{}, &respAnswerError{answer: string(hdr[:4])}
		}
		return frame{}, fmt.Errorf("%w: announced %d bytes (%q)", errFrameTooLarge, size, hdr[:4])
	}
	if size < frameHeader-4 {
		return frame{}, fmt.Errorf("cluster: malformed frame of %d bytes", size)
	}
	if _, err := io.ReadFull(r, hdr[4:]); err != nil {
		return frame{}, unexpected(err)
	}
	f := frame{kind: hdr[4], id: binary.BigEndian.Uint64(hdr[5:])}
	f.body = make([]byte, size-(frameHeader-4))
	if _, err := io.ReadFull(r, f.body); err != nil {
		return frame{}, unexpected(err)
	}
	return f, nil
}

// respAnswerError is what a peer that answered in RESP fails a connection
// with; it is ErrNotRaftPort.
type respAnswerError struct{ answer string }

func (e *respAnswerError) Error() string {
	return fmt.Sprintf("%v: it answered %q, as a RESP server does", ErrNotRaftPort, e.answer)
}

func (e *respAnswerError) Is(target error) bool { return target == ErrNotRaftPort }

// respReply reports whether b, the first bytes a peer sent, begin a RESP
// simple string or error ("+OK", "-ERR", "-NOAUTH"): the answer of a RESP
// server to a line it could not run.
func respReply(b []byte) bool {
	if len(b) < 2 || (b[0] != '-' && b[0] != '+') {
		return false
	}
	for _, c := range b[1:] {
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && c != ' ' && c != '\r' {
			return false
		}
	}
	return true
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// appendFrame appends the encoding of a frame to b.
func appendFrame(b []byte, kind byte, id uint64, body []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(frameHeader-4+len(body)))
	b = append(b, kind)
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, body...)
}

// reply is what a caller waiting on a request gets: a frame, or the error
// that ended the connection before the answer came.
type reply struct {
	f   frame
	err error
}

// rpcClient holds a node's connections to the peers it calls, up to
// rpcConnsPerPeer per address, made on first use and replaced when they
// fail. Each connection has one reader goroutine; close closes them all
// and waits for the readers.
type rpcClient struct {
	mux    *muxLayer
	nextID atomic.Uint64

	perPeer int // connections per peer: rpcConnsPerPeer, or a benchmark's

	mu     sync.Mutex // guards peers, conns, closed
	peers  map[string][]*rpcSlot
	conns  map[*rpcConn]struct{} // every connection whose reader runs
	closed bool
	rr     atomic.Uint32 // round-robin over a peer's slots
	wg     sync.WaitGroup
}

// rpcSlot is one place in a peer's pool. One caller at a time dials for
// it; the others wait for that dial (each no longer than its own
// deadline) rather than each making a connection of its own.
type rpcSlot struct {
	mu      sync.Mutex // guards conn, dialing
	conn    *rpcConn
	dialing chan struct{} // closed when the dial in progress ends; nil if none
}

func newRPCClient(mux *muxLayer) *rpcClient {
	return &rpcClient{mux: mux, perPeer: rpcConnsPerPeer, peers: make(map[string][]*rpcSlot), conns: make(map[*rpcConn]struct{})}
}

// conn returns a live connection to addr, dialling one if its slot holds
// none, within deadline. An error means nothing was sent.
func (c *rpcClient) conn(addr string, deadline time.Time) (*rpcConn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	slots := c.peers[addr]
	if slots == nil {
		slots = make([]*rpcSlot, c.perPeer)
		for i := range slots {
			slots[i] = &rpcSlot{}
		}
		c.peers[addr] = slots
	}
	c.mu.Unlock()

	slot := slots[int(c.rr.Add(1)%uint32(len(slots)))]
	slot.mu.Lock()
	for slot.dialing != nil && (slot.conn == nil || !slot.conn.alive()) {
		wait := slot.dialing
		slot.mu.Unlock()
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-wait:
			timer.Stop()
		case <-timer.C:
			return nil, fmt.Errorf("cluster: no connection to %s in time", addr)
		}
		slot.mu.Lock()
	}
	if slot.conn != nil && slot.conn.alive() {
		defer slot.mu.Unlock()
		return slot.conn, nil
	}
	done := make(chan struct{})
	slot.dialing = done
	slot.mu.Unlock()
	rc, err := c.dial(addr, deadline)
	slot.mu.Lock()
	slot.dialing = nil
	if err == nil {
		slot.conn = rc
	}
	slot.mu.Unlock()
	close(done)
	return rc, err
}

// dial makes a connection to addr and starts its reader, within deadline
// and at most the transport timeout.
func (c *rpcClient) dial(addr string, deadline time.Time) (*rpcConn, error) {
	timeout := min(time.Until(deadline), transportTimeout)
	if timeout <= 0 {
		return nil, fmt.Errorf("cluster: no time left to connect to %s", addr)
	}
	nc, err := c.mux.dial(addr, streamRPC, timeout)
	if err != nil {
		return nil, err
	}
	rc := &rpcConn{c: nc, pending: make(map[uint64]chan reply)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = nc.Close()
		return nil, ErrClosed
	}
	c.conns[rc] = struct{}{}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		rc.readLoop()
		c.mu.Lock()
		delete(c.conns, rc)
		c.mu.Unlock()
	}()
	return rc, nil
}

// call sends one request of kind to addr and waits for its reply until
// deadline (or until stop is closed). Its error wraps ErrNotDelivered if
// the request certainly did not reach the peer's handler, else
// ErrOutcomeUnknown; a statusErr reply is returned as a remoteError, not
// as a failure of call.
func (c *rpcClient) call(addr string, kind byte, body []byte, deadline time.Time, stop <-chan struct{}) (frame, error) {
	if frameHeader-4+len(body) > maxFrame {
		return frame{}, notDelivered(fmt.Errorf("request of %d bytes: %w", len(body), errFrameTooLarge))
	}
	rc, err := c.conn(addr, deadline)
	if err != nil {
		return frame{}, notDelivered(fmt.Errorf("connecting to %s: %w", addr, err))
	}
	return c.roundTrip(rc, addr, kind, body, deadline, stop)
}

// roundTrip sends one request on rc and waits for its reply; see call.
func (c *rpcClient) roundTrip(rc *rpcConn, addr string, kind byte, body []byte, deadline time.Time, stop <-chan struct{}) (frame, error) {
	id := c.nextID.Add(1)
	ch, err := rc.register(id)
	if err != nil {
		return frame{}, notDelivered(err)
	}
	if err := rc.write(appendFrame(nil, kind, id, body), deadline); err != nil {
		rc.forget(id)
		return frame{}, notDelivered(fmt.Errorf("sending to %s: %w", addr, err))
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			return frame{}, outcomeUnknown(fmt.Errorf("connection to %s lost before the reply: %w", addr, r.err))
		}
		return r.f, nil
	case <-timer.C:
		rc.forget(id)
		return frame{}, outcomeUnknown(fmt.Errorf("no reply from %s in time", addr))
	case <-stop:
		rc.forget(id)
		return frame{}, outcomeUnknown(fmt.Errorf("waiting for %s: %w", addr, ErrClosed))
	}
}

// close closes every connection and waits for their readers.
func (c *rpcClient) close() {
	c.mu.Lock()
	c.closed = true
	conns := make([]*rpcConn, 0, len(c.conns))
	for rc := range c.conns {
		conns = append(conns, rc)
	}
	c.mu.Unlock()
	for _, rc := range conns {
		rc.fail(ErrClosed)
	}
	c.wg.Wait()
}

// rpcConn is one client connection: requests go out under wmu, replies
// come in on readLoop, which hands each to the caller waiting for its id.
type rpcConn struct {
	c   net.Conn
	wmu sync.Mutex // serialises frame writes

	mu      sync.Mutex // guards pending, err
	pending map[uint64]chan reply
	err     error // why the connection ended; nil while alive
}

func (rc *rpcConn) alive() bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.err == nil
}

func (rc *rpcConn) register(id uint64) (chan reply, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.err != nil {
		return nil, rc.err
	}
	ch := make(chan reply, 1)
	rc.pending[id] = ch
	return ch, nil
}

func (rc *rpcConn) forget(id uint64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	delete(rc.pending, id)
}

// write sends one whole frame by deadline. If it fails the connection is
// closed at once, so a partial frame is never completed and the server,
// which acts only on whole frames, cannot have run the request.
func (rc *rpcConn) write(b []byte, deadline time.Time) error {
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	if !time.Now().Before(deadline) {
		// Out of time waiting for another caller's write: nothing of b is
		// sent, and the connection, fine, stays up for the others.
		return errors.New("cluster: no time left to send")
	}
	err := rc.c.SetWriteDeadline(deadline)
	if err == nil {
		_, err = rc.c.Write(b)
	}
	if err != nil {
		rc.fail(err)
	}
	return err
}

// fail ends the connection: closes it and answers every pending request
// with err (the caller of a request whose write failed ignores it).
func (rc *rpcConn) fail(err error) {
	rc.mu.Lock()
	if rc.err == nil {
		rc.err = err
	}
	pending := rc.pending
	rc.pending = nil
	rc.mu.Unlock()
	_ = rc.c.Close()
	for _, ch := range pending {
		ch <- reply{err: err}
	}
}

func (rc *rpcConn) readLoop() {
	br := bufio.NewReader(rc.c)
	for {
		if err := rc.c.SetReadDeadline(time.Now().Add(rpcIdleTimeout)); err != nil {
			rc.fail(err)
			return
		}
		f, err := readFrame(br)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && rc.idle() {
				return
			}
			if errors.As(err, &ne) && ne.Timeout() {
				continue // waiting on a slow handler
			}
			rc.fail(err)
			return
		}
		rc.mu.Lock()
		ch := rc.pending[f.id]
		delete(rc.pending, f.id)
		rc.mu.Unlock()
		if ch != nil {
			ch <- reply{f: f}
		}
	}
}

// idle ends the connection if no request is pending on it.
func (rc *rpcConn) idle() bool {
	rc.mu.Lock()
	if len(rc.pending) > 0 || rc.err != nil {
		done := rc.err != nil
		rc.mu.Unlock()
		return done
	}
	rc.err = errors.New("cluster: idle connection closed")
	rc.mu.Unlock()
	_ = rc.c.Close()
	return true
}

// rpcServer answers the RPC streams the muxLayer hands it, on behalf of a
// Node. Every goroutine it starts (the accept loop, one reader per
// connection, one per request) is counted in wg; the muxLayer's Close
// ends the connections, and Node.Close waits for wg.
type rpcServer struct {
	n  *Node
	wg sync.WaitGroup
}

func (s *rpcServer) start() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.n.mux.acceptRPC()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go s.serveConn(c)
		}
	}()
}

// serveConn reads requests off c and runs each on its own goroutine, at
// most rpcMaxInFlight at once. A connection with nothing in flight and
// nothing read for 2*rpcIdleTimeout is closed; so is one that sends a bad
// frame or does not take a reply within the transport timeout.
func (s *rpcServer) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	var wmu sync.Mutex // serialises reply writes
	sem := make(chan struct{}, rpcMaxInFlight)
	var inFlight atomic.Int64
	br := bufio.NewReader(c)
	for {
		if err := c.SetReadDeadline(time.Now().Add(2 * rpcIdleTimeout)); err != nil {
			return
		}
		f, err := readFrame(br)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && inFlight.Load() > 0 {
				continue
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.n.cfg.Logger.Debug().Err(err).Str("peer", c.RemoteAddr().String()).Msg("closing an RPC connection")
			}
			return
		}
		sem <- struct{}{}
		inFlight.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-sem; inFlight.Add(-1) }()
			status, body := s.n.handleRPC(f)
			out := appendFrame(nil, status, f.id, body)
			if len(out)-4 > maxFrame {
				out = appendFrame(nil, statusErr, f.id, encodeError(fmt.Errorf("reply of %d bytes: %w", len(body), errFrameTooLarge)))
			}
			wmu.Lock()
			defer wmu.Unlock()
			err := c.SetWriteDeadline(time.Now().Add(transportTimeout))
			if err == nil {
				_, err = c.Write(out)
			}
			if err != nil {
				_ = c.Close()
			}
		}()
	}
}
