package server

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/servertest"
	"github.com/leasehold/leasehold/locker"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// testServer is a real server on a random loopback port, run by servertest
// and closed through its own Close when the test ends.
type testServer struct {
	*Server
	t     testing.TB
	addr  string
	run   *servertest.Running
	clock *locker.ManualClock // nil unless the test asked for a manual clock
}

type option func(*Config)

// withIdleTimeout sets the server's idle timeout.
func withIdleTimeout(d time.Duration) option { return func(c *Config) { c.IdleTimeout = d } }

// withManualClock drives lease expiry by hand instead of by the system clock.
func withManualClock(clock *locker.ManualClock) option {
	return func(c *Config) { c.Locker.Clock = clock }
}

// testConfig is the configuration every test server begins from (as
// lockserver.Config is for other packages' tests; that package imports
// server, so these internal tests cannot use it): a free loopback port, 8
// shards, and the transport servertest.IOLoopsEnv asks for, changed by opts.
func testConfig(t testing.TB, opts ...option) Config {
	t.Helper()
	skipUnlessTransportTest(t) // transport_test.go
	cfg := DefaultConfig()
	cfg.Addr = servertest.Addr
	cfg.Locker.Shards = 8
	cfg.Version = "test"
	n, set, err := servertest.IOLoops()
	if err != nil {
		t.Fatal(err)
	}
	if set {
		cfg.IOLoops = n
	}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

func startServer(t testing.TB, opts ...option) *testServer {
	t.Helper()
	return startServerLogging(t, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel), opts...)
}

// startServerLogging is startServer with the server's log going to log: a
// fuzz test's server outlives each input's *testing.T and must not log to
// the *testing.F.
func startServerLogging(t testing.TB, log zerolog.Logger, opts ...option) *testServer {
	t.Helper()
	cfg := testConfig(t, opts...)
	srv, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	run := servertest.Start(t, srv, ErrServerClosed)
	ts := &testServer{Server: srv, t: t, addr: run.Addr, run: run}
	if mc, ok := cfg.Locker.Clock.(*locker.ManualClock); ok {
		ts.clock = mc
	}
	return ts
}

// client returns a go-redis client for the server, closed at the end of the test.
func (ts *testServer) client() *redis.Client { return ts.run.Client() }

// rawConn is a plain TCP connection for inline commands and broken frames.
type rawConn struct {
	t testing.TB
	net.Conn
	r *bufio.Reader
}

func (ts *testServer) dial() *rawConn {
	ts.t.Helper()
	nc := ts.run.Dial(ts.t)
	return &rawConn{t: ts.t, Conn: nc, r: bufio.NewReader(nc)}
}

func (rc *rawConn) send(s string) {
	rc.t.Helper()
	if _, err := rc.Write([]byte(s)); err != nil {
		rc.t.Fatal(err)
	}
}

// line reads one reply line without its CRLF.
func (rc *rawConn) line() string {
	rc.t.Helper()
	l, err := rc.r.ReadString('\n')
	if err != nil {
		rc.t.Fatalf("reading reply: %v (got %q)", err, l)
	}
	if len(l) < 2 || l[len(l)-2] != '\r' {
		rc.t.Fatalf("reply line %q does not end in CRLF", l)
	}
	return l[:len(l)-2]
}

// closed reports whether the server closed the connection (EOF after any
// pending bytes are drained).
func (rc *rawConn) closed() bool {
	rc.t.Helper()
	_, err := rc.r.ReadByte()
	return err != nil
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
