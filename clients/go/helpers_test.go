package leasehold_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/rs/zerolog"
)

// serverAddr is the address of a leasehold server, for the examples:
// TestMain starts one in this process on a free loopback port.
var serverAddr string

func TestMain(m *testing.M) {
	srv, err := lockserver.Serve(zerolog.Nop())
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the example server:", err)
		os.Exit(1)
	}
	serverAddr = srv.Addr
	code := m.Run()
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "example server:", err)
		code = 1
	}
	os.Exit(code)
}

// newClient returns a Client for addr, closed when the test ends; adjust
// changes the config first.
func newClient(t *testing.T, addr string, adjust ...func(*leasehold.Config)) *leasehold.Client {
	t.Helper()
	cfg := leasehold.DefaultConfig()
	cfg.Redis.Addr = addr
	for _, f := range adjust {
		f(&cfg)
	}
	c, err := leasehold.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testContext is cancelled when the test ends, and bounds it.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// within waits for ch to close, failing the test after d.
func within(t *testing.T, d time.Duration, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %s", what, d)
	}
}

// noLeaks returns a check that the goroutine count is back to where it was
// when noLeaks was called, to be run once everything the test started is
// closed. A test that calls it does not call t.Parallel: go test starts the
// parallel tests only once every other top-level test has returned, so the
// count is the test's own. The tests that do call t.Parallel are those that
// wait most (past a read timeout, through an election), each on servers of
// its own.
func noLeaks(t *testing.T) func() {
	t.Helper()
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("%d goroutines, %d before the test:\n%s", n, before, buf)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// proxy forwards TCP connections to a server. Paused, it reads but forwards
// nothing, in either direction: a network partition that leaves the sockets
// open. It can also cut a connection in place of the next reply, as a
// connection that broke after the server acted on a request.
type proxy struct {
	t        *testing.T
	ln       net.Listener
	target   string
	accepted atomic.Int64
	dropNext atomic.Bool // close the connection instead of the next reply

	mu     sync.Mutex    // guards resume, conns
	resume chan struct{} // non-nil while paused; closed by Resume
	conns  map[net.Conn]struct{}

	closed chan struct{}
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target, conns: make(map[net.Conn]struct{}), closed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		p.wg.Add(2)
		go p.pump(out, in, false)
		go p.pump(in, out, true)
	}
}

// track records the connections, or closes them if the proxy is closed.
func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		for _, c := range conns {
			c.Close()
		}
		return false
	default:
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pump copies src to dst, holding data back while paused; replies is true
// for the server-to-client direction.
func (p *proxy) pump(dst, src net.Conn, replies bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				return
			}
			if replies && p.dropNext.CompareAndSwap(true, false) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// gate blocks while the proxy is paused; false when it was closed.
func (p *proxy) gate() bool {
	p.mu.Lock()
	ch := p.resume
	p.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-p.closed:
		return false
	}
}

// Pause stops forwarding.
func (p *proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume == nil {
		p.resume = make(chan struct{})
	}
}

// Resume forwards what was held back, and everything after.
func (p *proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

// DropNextReply cuts the connection that next carries a reply, instead of
// passing the reply on.
func (p *proxy) DropNextReply() { p.dropNext.Store(true) }

// Close stops the proxy and waits for its goroutines.
func (p *proxy) Close() {
	p.mu.Lock()
	select {
	case <-p.closed:
		p.mu.Unlock()
		return
	default:
	}
	close(p.closed)
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
