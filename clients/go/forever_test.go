package leasehold_test

import (
	"context"
	"errors"
	"testing"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
)

// waitTimeouts is INFO locks' wait_timeouts: WAITs that ran out.
func waitTimeouts(t *testing.T, c *leasehold.Client) string {
	t.Helper()
	info, err := c.Info(testContext(t), "locks")
	if err != nil {
		t.Fatal(err)
	}
	return info["locks"]["wait_timeouts"]
}

func waiters(srv *server.Server, key string) int {
	st, _ := srv.Table().Status([]byte(key))
	return st.Waiters
}

// TestWaitForeverKeepsItsPlace: a WaitForever outlasts many of the
// server's longest WAITs (shortened here to 1s) without ever timing out
// on the server or queueing twice, and keeps its place ahead of a waiter
// that came later.
func TestWaitForeverKeepsItsPlace(t *testing.T) {
	srv := lockserver.Start(t).Server
	checkLeaks := noLeaks(t)
	const chunk = time.Second
	c := newClient(t, srv.Addr().String())
	leasehold.SetWaitChunk(c, chunk)
	ctx := testContext(t)

	held, err := c.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *leasehold.Lease
		err error
	}
	acquire := func(owner string) <-chan result {
		got := make(chan result, 1)
		go func() {
			l, err := c.Acquire(ctx, "k", 10*time.Second, leasehold.WaitForever(), leasehold.Owner(owner))
			got <- result{l, err}
		}()
		return got
	}
	first := acquire("first")
	testutil.Eventually(t, 5*time.Second, "first waiter queued", func() bool { return waiters(srv, "k") == 1 })
	// Three of the longest waits: the request is renewed in place
	// each time, never twice in the queue.
	for end := time.Now().Add(3 * chunk); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if n := waiters(srv, "k"); n != 1 {
			t.Fatalf("%d waiters, want the one", n)
		}
	}
	second := acquire("second")
	testutil.Eventually(t, 5*time.Second, "second waiter queued", func() bool { return waiters(srv, "k") == 2 })
	time.Sleep(3 * chunk / 2) // both renew their waits at least once
	if n := waitTimeouts(t, c); n != "0" {
		t.Errorf("wait_timeouts %s: a wait ran out on the server instead of being renewed in place", n)
	}

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("the first waiter was not granted the released lock")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.l.Owner() != "first" || r.l.Token() <= held.Token() {
		t.Fatalf("granted to %q with token %d (holder's %d)", r.l.Owner(), r.l.Token(), held.Token())
	}
	select {
	case r2 := <-second:
		t.Fatalf("the second waiter was granted too: %v, %v", r2.l, r2.err)
	default:
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r = <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("the second waiter was not granted after the first released")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	checkLeaks()
}

// TestWaitForeverServerBound: without a shortened chain, WaitForever asks
// the server for its max-ttl, and waits until the lock is released; a
// cancelled one leaves the queue.
func TestWaitForeverServerBound(t *testing.T) {
	t.Parallel()
	srv := lockserver.Start(t).Server
	c := newClient(t, srv.Addr().String(), func(cfg *leasehold.Config) { cfg.Redis.ReadTimeout = 300 * time.Millisecond })
	ctx := testContext(t)
	held, err := c.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() {
		_, err := c.Acquire(wctx, "k", 10*time.Second, leasehold.WaitForever())
		cancelled <- err
	}()
	testutil.Eventually(t, 5*time.Second, "waiter queued", func() bool { return waiters(srv, "k") == 1 })
	cancel()
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled WaitForever: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled WaitForever did not return")
	}
	testutil.Eventually(t, 5*time.Second, "cancelled wait out of the queue", func() bool { return waiters(srv, "k") == 0 })

	got := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, "k", 10*time.Second, leasehold.WaitForever())
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	testutil.Eventually(t, 5*time.Second, "waiter queued", func() bool { return waiters(srv, "k") == 1 })
	time.Sleep(time.Second) // past the read timeout, on purpose
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitForever not granted after the release")
	}
	// TryAcquire never waits, whatever the options.
	l, err := c.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	start := time.Now()
	if _, err := c.TryAcquire(ctx, "k", time.Second, leasehold.WaitForever()); !errors.Is(err, leasehold.ErrNotAcquired) || time.Since(start) > time.Second {
		t.Errorf("TryAcquire with WaitForever: %v after %s", err, time.Since(start))
	}
}
