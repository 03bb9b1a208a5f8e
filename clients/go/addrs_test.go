package leasehold_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
	"github.com/redis/go-redis/v9"
)

// withAddrs gives the client the list addrs.
func withAddrs(addrs ...string) func(*leasehold.Config) {
	return func(cfg *leasehold.Config) { cfg.Addrs = addrs }
}

// held reports whether srv's lock table has a live lease on key.
func held(srv *server.Server, key string) bool {
	st, _ := srv.Table().Status([]byte(key))
	return st.Token != 0
}

// TestAddrsFailover: a client of two servers works on the first; once the
// first is closed, every call goes to the second: Acquire, Release, a
// waiting Acquire, a lease's keep-alive.
func TestAddrsFailover(t *testing.T) {
	t.Parallel()
	a, b := lockserver.Start(t), lockserver.Start(t)
	c := newClient(t, "", withAddrs(a.Addr, b.Addr))
	ctx := testContext(t)

	l, err := c.Acquire(ctx, "first", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !held(a.Server, "first") || held(b.Server, "first") {
		t.Fatal("the lease is not on the first server alone")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = c.Acquire(ctx, "second", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire after the first server closed: %v", err)
	}
	if !held(b.Server, "second") {
		t.Fatal("the lease is not on the second server")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if held(b.Server, "second") {
		t.Fatal("released, still held on the second server")
	}

	// A waiting Acquire, granted when the holder lets go.
	other := b.Client()
	tok, err := other.Do(ctx, "ACQUIRE", "waited", 10000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	var waited *leasehold.Lease
	go func() {
		var err error
		waited, err = c.Acquire(ctx, "waited", 10*time.Second, leasehold.Wait(10*time.Second))
		got <- err
	}()
	testutil.Eventually(t, 5*time.Second, "the wait queued on the second server", func() bool { return waiters(b.Server, "waited") == 1 })
	if err := other.Do(ctx, "RELEASE", "waited", tok).Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Acquire: %v", err)
	}
	if err := waited.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A short lease lives through several renewals.
	l, err = c.Acquire(ctx, "kept", 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	renewedPast := l.Deadline().Add(time.Second)
	testutil.Eventually(t, 5*time.Second, "renewals", func() bool { return l.Deadline().After(renewedPast) })
	if err := l.Err(); err != nil {
		t.Fatalf("lease after renewals: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAddrsOneCluster stands in for the nodes of a cluster with two proxies
// in front of one server: a lease taken through the first keeps being
// renewed through the second once the first is gone, and a waiting Acquire
// whose connection breaks is answered as this test records.
func TestAddrsOneCluster(t *testing.T) {
	t.Parallel()
	srv := lockserver.Start(t)
	pa, pb := startProxy(t, srv.Addr), startProxy(t, srv.Addr)
	c := newClient(t, "", withAddrs(pa.Addr(), pb.Addr()))
	ctx := testContext(t)

	// A lease long enough that a renewal delayed by a loaded machine (the
	// package's tests run in parallel) does not lose it while the client
	// moves to the second address.
	l, err := c.Acquire(ctx, "kept", 2*time.Second, leasehold.Owner("me"))
	if err != nil {
		t.Fatal(err)
	}
	if pb.accepted.Load() != 0 {
		t.Fatal("the second address was dialled while the first was up")
	}
	pa.Close()
	renewedPast := l.Deadline().Add(time.Second)
	testutil.Eventually(t, 10*time.Second, "renewals through the second node", func() bool { return l.Deadline().After(renewedPast) })
	if err := l.Err(); err != nil {
		t.Fatalf("lease after the first node went: %v", err)
	}
	if pb.accepted.Load() == 0 {
		t.Fatal("nothing went through the second node")
	}
	// With OWNER, acquiring again (as a retry after a lost reply does)
	// gets the same lease back.
	again, err := c.Acquire(ctx, "kept", 2*time.Second, leasehold.Owner("me"), leasehold.NoKeepAlive())
	if err != nil || again.Token() != l.Token() {
		t.Fatalf("Acquire again with the same owner: %v, token %d, want %d", err, again.Token(), l.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAddrsWaitBrokenByNodeLoss: a waiting Acquire whose node goes away
// mid-wait fails with the connection's error (go-redis does not retry a
// command on a connection of its own, and neither does this package); the
// request left the queue with its connection, and an Acquire again, of the
// same owner, queues through the next node.
func TestAddrsWaitBrokenByNodeLoss(t *testing.T) {
	srv := lockserver.Start(t)
	pa, pb := startProxy(t, srv.Addr), startProxy(t, srv.Addr)
	c := newClient(t, "", withAddrs(pa.Addr(), pb.Addr()))
	ctx := testContext(t)
	other := srv.Client()
	tok, err := other.Do(ctx, "ACQUIRE", "w", 10000).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	acquire := func() <-chan error {
		got := make(chan error, 1)
		go func() {
			l, err := c.Acquire(ctx, "w", 10*time.Second, leasehold.Wait(10*time.Second), leasehold.Owner("waiter"))
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		return got
	}
	got := acquire()
	testutil.Eventually(t, 5*time.Second, "the wait queued", func() bool { return waiters(srv.Server, "w") == 1 })
	pa.Close()
	err = <-got
	if err == nil || errors.Is(err, leasehold.ErrNotAcquired) || !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("waiting Acquire whose node went: %v, want the connection's EOF", err)
	}
	testutil.Eventually(t, 5*time.Second, "the broken wait out of the queue", func() bool { return waiters(srv.Server, "w") == 0 })

	got = acquire()
	testutil.Eventually(t, 5*time.Second, "the wait queued again", func() bool { return waiters(srv.Server, "w") == 1 })
	if err := other.Do(ctx, "RELEASE", "w", tok).Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire again through the second node: %v", err)
	}
	if pb.accepted.Load() == 0 {
		t.Fatal("nothing went through the second node")
	}
}

// TestAddrsAllDown: when no address takes the connection, the error names
// every one.
func TestAddrsAllDown(t *testing.T) {
	dead := []string{deadAddr(t), deadAddr(t)}
	c := newClient(t, "", withAddrs(dead...), func(cfg *leasehold.Config) {
		cfg.Redis.MaxRetries, cfg.Redis.DialerRetries = -1, 1
	})
	_, err := c.Acquire(testContext(t), "k", time.Second)
	var de *leasehold.DialError
	if !errors.As(err, &de) {
		t.Fatalf("Acquire with every address down: %v, want a DialError", err)
	}
	for _, a := range dead {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("%q does not name %s", err, a)
		}
	}
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestAddrsConfig(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{[]string{"127.0.0.1:1", "nohost"}, "not HOST:PORT"},
		{[]string{"127.0.0.1:1", "127.0.0.1:1"}, "twice"},
	} {
		cfg := leasehold.DefaultConfig()
		cfg.Addrs = tc.addrs
		if _, err := leasehold.New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with Addrs %q: %v, want %q", tc.addrs, err, tc.want)
		}
	}
	opts := &redis.Options{}
	if err := leasehold.FailoverOptions(opts, nil); err == nil {
		t.Error("FailoverOptions without an address: no error")
	}
}
