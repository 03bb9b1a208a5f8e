package leasehold

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// validateAddrs checks Config.Addrs: each HOST:PORT (an IPv6 host in
// brackets), none twice.
func validateAddrs(addrs []string, network string) error {
	for i, a := range addrs {
		if a == "" {
			return fmt.Errorf("leasehold: address %d of Config.Addrs is empty", i+1)
		}
		if network == "" || strings.HasPrefix(network, "tcp") {
			if err := checkAddr(a); err != nil {
				return err
			}
		}
		if slices.Index(addrs, a) != i {
			return fmt.Errorf("leasehold: address %s is in Config.Addrs twice", a)
		}
	}
	return nil
}

// checkAddr reports whether addr is HOST:PORT, with an IPv6 host in
// brackets ([::1]:7379). An empty HOST is the local machine, as in go-redis.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || host == "" && strings.HasPrefix(addr, "[") {
		return fmt.Errorf("leasehold: server address %q is not HOST:PORT (an IPv6 host in brackets: [::1]:7379)", addr)
	}
	return nil
}

// FailoverOptions makes opts connect to the first of addrs that accepts a
// connection, as Config.Addrs does (see there), for a go-redis client of
// one's own, given to NewFromRedis say. It reads opts's DialTimeout,
// TLSConfig and Dialer for each address's attempt, then sets Dialer (a
// failover over addrs), DialTimeout (one attempt at every address: go-redis
// bounds each call of the Dialer by it) and Addr (addrs[0], which go-redis
// shows; the Dialer ignores it). Every client made from the options shares
// the memory of the address that last connected.
func FailoverOptions(opts *redis.Options, addrs []string) error {
	if len(addrs) == 0 {
		return errors.New("leasehold: FailoverOptions without an address")
	}
	if err := validateAddrs(addrs, opts.Network); err != nil {
		return err
	}
	f := newFailover(addrs, opts)
	opts.Addr, opts.Dialer = addrs[0], f.Dial
	opts.DialTimeout = f.total()
	if opts.DialTimeout == 0 {
		opts.DialTimeout = -1 // none: 0 would be go-redis's default
	}
	return nil
}

// failover dials the first of a list of addresses that connects: the one
// that connected last, then the ones after it in the list, wrapping round.
// One failover serves every pool of a Client (the main one, the waiting
// one, the CLIENT UNBLOCK one), so all of them start where any of them last
// succeeded. It is go-redis's Options.Dialer: go-redis calls it for each new
// connection, retries it as its DialerRetries say, and bounds each call by
// its DialTimeout, which New sets to the per-address timeout times the
// number of addresses.
type failover struct {
	addrs []string
	// dialOne connects to one address: the Config's own Dialer, or
	// go-redis's default dial with TLS around it when TLSConfig is set.
	dialOne func(ctx context.Context, network, addr string) (net.Conn, error)
	// each bounds one address's attempt (connect and TLS handshake); 0 for
	// no bound but the caller's context.
	each time.Duration
	// start is the index where the next dial begins: the address that last
	// connected, or the one after an address that just failed there.
	start atomic.Int32
}

// newFailover returns the failover over addrs with opts's dial settings:
// its Dialer if set (which then does TLS, if any: go-redis wraps only its
// own default dial in TLS), else a TCP dial, in TLS when TLSConfig is set.
func newFailover(addrs []string, opts *redis.Options) *failover {
	each := opts.DialTimeout
	if each == 0 {
		each = 5 * time.Second // go-redis's default
	}
	f := &failover{addrs: slices.Clone(addrs), dialOne: opts.Dialer, each: max(each, 0)}
	if f.dialOne == nil {
		f.dialOne = tcpDialer(opts.TLSConfig)
	}
	return f
}

// total is the DialTimeout go-redis must allow one call of Dial: every
// address's attempt; 0 (no bound) when the attempts have none.
func (f *failover) total() time.Duration {
	return f.each * time.Duration(len(f.addrs))
}

// tcpDialer dials as go-redis's default dialer does (TCP keep-alive probes
// after 30s idle, every 5s, 3 of them), with TLS on top when cfg is set. The
// server name to verify is cfg.ServerName, or when empty the host of the
// address dialled, so each node of a list is checked against its own name.
func tcpDialer(cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}}
	if cfg == nil {
		return nd.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c := cfg
		if c.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			c = cfg.Clone()
			c.ServerName = host
		}
		d := &tls.Dialer{NetDialer: nd, Config: c}
		return d.DialContext(ctx, network, addr)
	}
}

// Dial connects to the first address that answers, starting at f.start; the
// address go-redis passes is ignored. It returns a DialError when none
// did, or when ctx ended first.
func (f *failover) Dial(ctx context.Context, network, _ string) (net.Conn, error) {
	n := len(f.addrs)
	first := int(f.start.Load()) % n
	var errs []error
	for i := range n {
		idx := (first + i) % n
		conn, err := f.dialAddr(ctx, network, f.addrs[idx])
		if err == nil {
			f.start.Store(int32(idx))
			return &nodeConn{Conn: conn, f: f, idx: idx}, nil
		}
		errs = append(errs, err)
		// Later dials start past an address that failed (unless another
		// dial has moved the start meanwhile): one that does not answer
		// at all would otherwise cost each of them its timeout.
		f.start.CompareAndSwap(int32(idx), int32((idx+1)%n))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, &DialError{Addrs: f.addrs, Errs: errs}
}

// dialAddr connects to addr within f.each.
func (f *failover) dialAddr(ctx context.Context, network, addr string) (net.Conn, error) {
	if f.each > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.each)
		defer cancel()
	}
	conn, err := f.dialOne(ctx, network, addr)
	if err != nil && !strings.Contains(err.Error(), addr) {
		err = fmt.Errorf("%s: %w", addr, err)
	}
	return conn, err
}

// DialError is the error of a connection that none of Config.Addrs took:
// each address's error, in the order they were tried (fewer than the
// addresses when the call's context ended first).
type DialError struct {
	Addrs []string
	Errs  []error
}

func (e *DialError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return fmt.Sprintf("leasehold: could not connect to any of %s: %s", strings.Join(e.Addrs, ", "), strings.Join(msgs, "; "))
}

// Unwrap returns each address's error, for errors.Is and errors.As: a
// *net.OpError of a dial among them is what go-redis retries.
func (e *DialError) Unwrap() []error { return e.Errs }

// tryAgainReply is how a TRYAGAIN error reply begins on the wire.
var tryAgainReply = []byte("-TRYAGAIN ")

// errPassedOver is what a nodeConn's health check reports once its node
// answered TRYAGAIN, so that the pool drops it rather than reuse it.
var errPassedOver = errors.New("leasehold: connection passed over: its node answered TRYAGAIN")

// nodeConn is a connection the failover made to f.addrs[idx]. It moves the
// Client off a node that answers TRYAGAIN (no leader ready for that node:
// an election, or the node is cut off from the majority): when a reply it reads
// is a TRYAGAIN, later dials start past its address, and the connection is
// passed over, so that the next command, go-redis's retry of this one
// included, goes on another connection, to the next address when the
// pool has no other. A connection in use finishes its command first.
//
// Passing over works through go-redis's health check of an idle
// connection before it hands it out: the check asks for the socket
// (syscall.Conn), which nodeConn refuses once passed over, and go-redis
// then closes the connection without spending a retry. A connection
// without a socket of its own (TLS) has no check in go-redis; nodeConn
// gives it one that finds nothing, as go-redis would have found without
// it, until it is passed over.
//
// The reply is recognised as the first bytes of a read: a command's reply
// begins a read of its own unless it was pipelined behind others, whose
// TRYAGAIN then goes unnoticed here (go-redis still retries it).
type nodeConn struct {
	net.Conn
	f          *failover
	idx        int
	passedOver atomic.Bool
}

func (c *nodeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n >= len(tryAgainReply) && bytes.Equal(p[:len(tryAgainReply)], tryAgainReply) && !c.passedOver.Swap(true) {
		// Later dials start past this address, unless another dial has
		// moved the start meanwhile.
		c.f.start.CompareAndSwap(int32(c.idx), int32((c.idx+1)%len(c.f.addrs)))
	}
	return n, err
}

// SyscallConn is go-redis's health check's way in (see nodeConn).
func (c *nodeConn) SyscallConn() (syscall.RawConn, error) {
	if c.passedOver.Load() {
		return nil, errPassedOver
	}
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return noSocket{}, nil
}

// noSocket is the syscall.RawConn of a connection whose socket is not its
// own (TLS): it runs nothing on it, as if there were nothing to read.
type noSocket struct{}

func (noSocket) Control(func(fd uintptr)) error    { return nil }
func (noSocket) Read(func(fd uintptr) bool) error  { return nil }
func (noSocket) Write(func(fd uintptr) bool) error { return nil }
