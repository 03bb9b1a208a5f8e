// Package servertest runs a server for a test, as net/http/httptest does for
// HTTP handlers: it owns the one way tests of this module start a server on
// a free loopback port, wait until it serves, reach it (a go-redis client,
// a plain TCP connection) and stop it through its own Close when the test
// ends, checking that Serve returned. Only tests import it.
//
// It is split in two because of who may import what. The server package's
// own tests are internal (package server, to reach its internals), and an
// internal test cannot import a package that imports the package under
// test. So servertest itself knows nothing of leasehold's packages: it runs
// any [Server] (an interface *server.Server satisfies), and the server
// package's tests build their server and hand it to [Start]. Every other
// package's tests start a leasehold server in one call through the thin
// constructor in [github.com/leasehold/leasehold/internal/servertest/lockserver],
// which builds the server from a server.Config and hands it to Start.
//
// Store-level helpers that need no server (damaging a data file) live in
// internal/testutil.
package servertest
