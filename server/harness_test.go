package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// testServer is a real server on a random loopback port, closed through its
// own Close when the test ends.
type testServer struct {
	*Server
	t     testing.TB
	addr  string
	clock *locker.ManualClock // nil unless the test asked for a manual clock
}

type option func(*Config)

// withIdleTimeout sets the server's idle timeout.
func withIdleTimeout(d time.Duration) option { return func(c *Config) { c.IdleTimeout = d } }

// withManualClock drives lease expiry by hand instead of by the system clock.
func withManualClock(clock *locker.ManualClock) option {
	return func(c *Config) { c.Locker.Clock = clock }
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
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Locker.Shards = 8
	cfg.Version = "test"
	// make test runs this package once per transport: the default (epoll
	// loops on Linux) and LEASEHOLD_TEST_IO_LOOPS=0 (a goroutine per connection).
	if v := os.Getenv("LEASEHOLD_TEST_IO_LOOPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("LEASEHOLD_TEST_IO_LOOPS=%q: %v", v, err)
		}
		cfg.IOLoops = n
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		select {
		case err := <-served:
			if !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	ts := &testServer{Server: srv, t: t, addr: srv.Addr().String()}
	if mc, ok := cfg.Locker.Clock.(*locker.ManualClock); ok {
		ts.clock = mc
	}
	return ts
}

// client returns a go-redis client for the server, closed at the end of the test.
func (ts *testServer) client() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: ts.addr, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second})
	ts.t.Cleanup(func() { rdb.Close() })
	return rdb
}

// rawConn is a plain TCP connection for inline commands and broken frames.
type rawConn struct {
	t testing.TB
	net.Conn
	r *bufio.Reader
}

func (ts *testServer) dial() *rawConn {
	ts.t.Helper()
	nc, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
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
