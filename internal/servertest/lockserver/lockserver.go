// Package lockserver starts a real leasehold server (server.Server) for a
// test, through servertest: the one call the tests of every package but
// server itself use. The server package's internal tests cannot import it
// (it imports server); they build their server and call servertest.Start.
package lockserver

import (
	"testing"

	"github.com/leasehold/leasehold/internal/servertest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
	"github.com/rs/zerolog"
)

// Server is a leasehold server serving on a free loopback port: Addr,
// Client, Dial and Close come from servertest.Running.
type Server struct {
	*servertest.Running
	// Server is the server itself, for its lock table.
	Server *server.Server
}

// Config is the configuration Start begins from: the defaults, on a free
// loopback port, with 8 shards, version "test", and the transport
// servertest.IOLoopsEnv asks for.
func Config() (server.Config, error) {
	cfg := server.DefaultConfig()
	cfg.Addr = servertest.Addr
	cfg.Locker.Shards = 8
	cfg.Version = "test"
	n, set, err := servertest.IOLoops()
	if set {
		cfg.IOLoops = n
	}
	return cfg, err
}

// Start starts a server on Config changed by adjust, logging warnings and
// errors to the test's log, and returns once it serves (every goroutine it
// runs is started). The test's cleanup closes it.
func Start(t testing.TB, adjust ...func(*server.Config)) *Server {
	t.Helper()
	srv, err := newServer(zerolog.New(testutil.NewTestLog(t)).Level(zerolog.WarnLevel), adjust...)
	if err != nil {
		t.Fatal(err)
	}
	ts := &Server{Running: servertest.Start(t, srv, server.ErrServerClosed), Server: srv}
	if err := ts.WaitServing(); err != nil {
		t.Fatal(err)
	}
	return ts
}

// Serve is Start without a test, for a TestMain (examples have no
// *testing.T): the server logs to log, and the caller closes it.
func Serve(log zerolog.Logger, adjust ...func(*server.Config)) (*Server, error) {
	srv, err := newServer(log, adjust...)
	if err != nil {
		return nil, err
	}
	r, err := servertest.Serve(srv, server.ErrServerClosed)
	if err != nil {
		return nil, err
	}
	if err := r.WaitServing(); err != nil {
		r.Close()
		return nil, err
	}
	return &Server{Running: r, Server: srv}, nil
}

// newServer makes a server on Config changed by adjust.
func newServer(log zerolog.Logger, adjust ...func(*server.Config)) (*server.Server, error) {
	cfg, err := Config()
	if err != nil {
		return nil, err
	}
	for _, f := range adjust {
		f(&cfg)
	}
	return server.New(cfg, log)
}
