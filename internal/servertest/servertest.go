package servertest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Addr is the address a test server listens on: a port the system picks on
// the loopback interface, so tests never share a port or expose one.
const Addr = "127.0.0.1:0"

// IOLoopsEnv names the environment variable that picks the transport a test
// server runs: unset, the server's default (event loops on Linux); a number,
// that many event loops, 0 being a goroutine per connection. `make test`
// runs the server package once per transport.
const IOLoopsEnv = "LEASEHOLD_TEST_IO_LOOPS"

// IOLoops reads IOLoopsEnv: the number of event loops to configure, and
// whether the variable is set at all.
func IOLoops() (n int, set bool, err error) {
	v := os.Getenv(IOLoopsEnv)
	if v == "" {
		return 0, false, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil {
		return 0, false, fmt.Errorf("%s=%q: %w", IOLoopsEnv, v, err)
	}
	return n, true, nil
}

// TransportOnlyEnv names the environment variable that marks a pass over
// one more transport: set to 1 (as `make test` does for its passes with
// IOLoopsEnv set), the server package runs only the tests whose behaviour
// depends on the transport, those its server/transport_test.go lists; every
// other test ran in the main pass, and skips saying so.
const TransportOnlyEnv = "LEASEHOLD_TEST_TRANSPORT_ONLY"

// TransportOnly reads TransportOnlyEnv: whether this is a pass for the
// transport's tests only. A value other than unset, 0 or 1 is an error.
func TransportOnly() (bool, error) {
	switch v := os.Getenv(TransportOnlyEnv); v {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want 1, 0 or unset", TransportOnlyEnv, v)
	}
}

// SkipUnlessTransportTest skips t in a pass TransportOnlyEnv marks, unless
// its top-level test (t's name up to the first "/") is one of tests; it
// fails t when TransportOnlyEnv holds something else than 1, 0 or nothing.
// Outside such a pass it does nothing. Call it from the test's goroutine,
// before the test starts anything.
func SkipUnlessTransportTest(t testing.TB, tests map[string]bool) {
	t.Helper()
	only, err := TransportOnly()
	if err != nil {
		t.Fatal(err)
	}
	if !only {
		return
	}
	name, _, _ := strings.Cut(t.Name(), "/")
	if !tests[name] {
		t.Skipf("%s=1: %s does not depend on the transport; it ran in the main pass", TransportOnlyEnv, name)
	}
}

// Server is what Start runs. *server.Server satisfies it.
type Server interface {
	// Listen binds the configured address; Addr reports it after.
	Listen() error
	// Serve serves until Close, then returns the error Start is given.
	Serve() error
	// Close stops the server; it is safe to call more than once.
	Close() error
	Addr() net.Addr
}

// Running is a server started by Start or Serve. Its address is fixed for
// its life.
type Running struct {
	// Addr is the server's host:port on the loopback interface.
	Addr string

	srv    Server
	closed error      // what Serve returns after Close
	served chan error // Serve's result

	mu      sync.Mutex // guards clients, done
	clients []*redis.Client
	done    bool // Close has run
}

// Start listens with srv on its configured address (Addr for a free port)
// and serves on a goroutine of its own until Close, which the test's cleanup
// calls. closed is the error srv's Serve returns after Close; anything else
// fails the test. Start returns once the address is bound: a client can
// connect at once, and its requests are answered once Serve runs (see
// WaitServing).
func Start(t testing.TB, srv Server, closed error) *Running {
	t.Helper()
	r, err := Serve(srv, closed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// Serve is Start without a test, for a TestMain (examples have no
// *testing.T): the caller closes the server and reports Close's error.
func Serve(srv Server, closed error) (*Running, error) {
	if err := srv.Listen(); err != nil {
		srv.Close() // whatever the server opened before (a data directory and its lock)
		return nil, fmt.Errorf("listen: %w", err)
	}
	r := &Running{Addr: srv.Addr().String(), srv: srv, closed: closed, served: make(chan error, 1)}
	go func() { r.served <- srv.Serve() }()
	return r, nil
}

// WaitServing returns once the server has answered a PING (or refused it
// for want of AUTH): Serve has started everything it runs (event loops, the
// lock table's reaper), so a count of goroutines taken now holds the
// server's. It costs a connection, which the
// server counts in its statistics and, until it notices the hang-up, in its
// connected clients: tests that count connections do without it.
func (r *Running) WaitServing() error {
	nc, err := net.DialTimeout("tcp", r.Addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	// A server with a password answers NOAUTH, as Redis does: it serves
	// all the same.
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" && line != "-NOAUTH Authentication required.\r\n" {
		return fmt.Errorf("%s answered PING with %q", r.Addr, line)
	}
	return nil
}

// Client returns a go-redis client for the server, with 5s dial and read
// timeouts that adjust may change. Close closes it, before the server.
func (r *Running) Client(adjust ...func(*redis.Options)) *redis.Client {
	opts := &redis.Options{Addr: r.Addr, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second}
	for _, f := range adjust {
		f(opts)
	}
	rdb := redis.NewClient(opts)
	r.mu.Lock()
	r.clients = append(r.clients, rdb)
	r.mu.Unlock()
	return rdb
}

// Dial opens a plain TCP connection to the server, for inline commands and
// broken frames, with a 10s deadline for all it does; t's cleanup closes it.
func (r *Running) Dial(t testing.TB) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", r.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc
}

// Close closes the clients Client made, then the server, as a clean
// shutdown does, and waits up to 10s for Serve to return. It reports what
// went wrong: the server's Close failed, or Serve returned something else
// than it should after Close, or did not return. Calls after the first do
// nothing and return nil.
func (r *Running) Close() error {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return nil
	}
	r.done = true
	clients := r.clients
	r.mu.Unlock()
	for _, rdb := range clients {
		rdb.Close()
	}
	err := r.srv.Close()
	if err != nil {
		err = fmt.Errorf("Close: %w", err)
	}
	select {
	case serr := <-r.served:
		if !errors.Is(serr, r.closed) {
			err = errors.Join(err, fmt.Errorf("Serve returned %v after Close, want %v", serr, r.closed))
		}
	case <-time.After(10 * time.Second):
		err = errors.Join(err, errors.New("Serve did not return within 10s of Close"))
	}
	return err
}
