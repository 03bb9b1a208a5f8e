// Package servertest runs a server for a test, as net/http/httptest does for
// HTTP handlers: it owns the one way tests of this module start a server on
// a free loopback port (Addr), wait until it serves, reach it (a go-redis
// client, a plain TCP connection) and stop it through its own Close when the
// test ends, checking that Serve returned as it should. Only tests import it.
//
// It comes in two layers because of who may import what. The server
// package's own tests are internal (package server, to reach its
// internals), and an internal test cannot import a package that imports the
// package under test. So this package knows nothing of leasehold's packages:
// it runs any [Server], an interface *server.Server satisfies, and the
// server package's tests build their server and hand it to [Start]:
//
//	srv, err := New(cfg, log)
//	...
//	run := servertest.Start(t, srv, ErrServerClosed)
//	rdb := run.Client()
//
// Every other package's tests start a leasehold server in one call through
// the thin constructor in the lockserver subpackage, which builds the server
// from a server.Config and hands it to Start:
//
//	ts := lockserver.Start(t)
//	rdb := ts.Client()
//	st, _ := ts.Server.Table().Status([]byte("k"))
//
// The persist package's tests run a store and a lock table, not a server;
// the helper they share with others (FlipByte, damage to a data file) is in
// internal/testutil.
package servertest
