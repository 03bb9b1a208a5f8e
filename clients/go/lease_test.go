package leasehold_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/redis/go-redis/v9"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name    string
		adjust  func(*leasehold.Config)
		wantErr string // "" for none
	}{
		{"default", func(*leasehold.Config) {}, ""},
		{"renew zero", func(c *leasehold.Config) { c.RenewFraction = 0 }, "renew fraction"},
		{"renew one", func(c *leasehold.Config) { c.RenewFraction = 1 }, "renew fraction"},
		{"margin negative", func(c *leasehold.Config) { c.MarginFraction = -0.1 }, "margin fraction"},
		{"margin zero", func(c *leasehold.Config) { c.MarginFraction = 0 }, "margin fraction"},
		{"margin smallest", func(c *leasehold.Config) { c.MarginFraction = 0.01 }, ""},
		{"no room to renew", func(c *leasehold.Config) { c.RenewFraction, c.MarginFraction = 0.6, 0.4 }, "must be below 1"},
		{"no address", func(c *leasehold.Config) { c.Redis.Addr = "" }, "no server address"},
		{"bad read timeout", func(c *leasehold.Config) { c.Redis.ReadTimeout = -3 }, "read timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := leasehold.DefaultConfig()
			tc.adjust(&cfg)
			c, err := leasehold.New(cfg)
			if c != nil {
				c.Close()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("New: %v, want an error mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestAcquireVerifyExtendRelease(t *testing.T) {
	srv := lockserver.Start(t).Server
	checkLeaks := noLeaks(t)
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)

	before := time.Now()
	l, err := c.Acquire(ctx, "jobs", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Key() != "jobs" || l.Token() == 0 {
		t.Fatalf("lease key %q token %d", l.Key(), l.Token())
	}
	if b, err := hex.DecodeString(l.Owner()); err != nil || len(b) != 16 {
		t.Errorf("owner %q, want 16 random bytes in hex", l.Owner())
	}
	// Deadline: from before the request was sent, ttl less a tenth.
	if d := l.Deadline(); d.Before(before.Add(8*time.Second)) || d.After(time.Now().Add(9*time.Second)) {
		t.Errorf("deadline in %s, want about 9s", time.Until(d))
	}
	st, ok := srv.Table().Status([]byte("jobs"))
	if !ok || st.Token != l.Token() || st.Owner != l.Owner() {
		t.Fatalf("server status %+v, want token %d owner %s", st, l.Token(), l.Owner())
	}
	if ok, err := l.Verify(ctx); !ok || err != nil {
		t.Fatalf("Verify = %v, %v", ok, err)
	}
	if ok, err := c.Verify(ctx, "jobs", l.Token()+1); ok || err != nil {
		t.Fatalf("Verify of another token = %v, %v", ok, err)
	}

	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if st, _ := srv.Table().Status([]byte("jobs")); st.TTL < 50*time.Second {
		t.Errorf("server ttl %s after Extend(1m)", st.TTL)
	}
	if d := time.Until(l.Deadline()); d < 50*time.Second {
		t.Errorf("deadline in %s after Extend(1m), want about 54s", d)
	}

	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.Table().Verify([]byte("jobs"), l.Token()) {
		t.Error("lease still live on the server after Release")
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("second Release: %v, want nil", err)
	}
	if !errors.Is(l.Err(), leasehold.ErrReleased) || !errors.Is(context.Cause(l.Context()), leasehold.ErrReleased) {
		t.Errorf("after Release: Err %v, cause %v; want ErrReleased", l.Err(), context.Cause(l.Context()))
	}
	select {
	case <-l.Lost():
		t.Error("Lost closed by Release")
	default:
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, leasehold.ErrReleased) {
		t.Errorf("Extend after Release: %v, want ErrReleased", err)
	}
	c.Close()
	checkLeaks()
}

func TestNotAcquired(t *testing.T) {
	srv := lockserver.Start(t).Server
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)

	held, err := c.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)

	if _, err := c.TryAcquire(ctx, "k", time.Second, leasehold.Wait(time.Hour)); !errors.Is(err, leasehold.ErrNotAcquired) {
		t.Errorf("TryAcquire of a held lock: %v, want ErrNotAcquired", err)
	}
	if _, err := c.Acquire(ctx, "k", time.Second); !errors.Is(err, leasehold.ErrNotAcquired) {
		t.Errorf("Acquire without Wait of a held lock: %v, want ErrNotAcquired", err)
	}
	start := time.Now()
	if _, err := c.Acquire(ctx, "k", time.Second, leasehold.Wait(100*time.Millisecond)); !errors.Is(err, leasehold.ErrNotAcquired) {
		t.Errorf("Acquire with Wait of a held lock: %v, want ErrNotAcquired", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("Acquire with Wait(100ms) gave up after %s", d)
	}
	// The holder's own owner gets its lease back: the retry rule.
	again, err := c.TryAcquire(ctx, "k", 10*time.Second, leasehold.Owner(held.Owner()))
	if err != nil || again.Token() != held.Token() {
		t.Fatalf("TryAcquire with the holder's owner = %v, %v; want token %d", again, err, held.Token())
	}
	again.Release(ctx)

	if _, err := c.Acquire(ctx, "k", 0); err == nil || !strings.Contains(err.Error(), "ttl must be positive") {
		t.Errorf("Acquire with ttl 0: %v", err)
	}
	if _, err := c.Acquire(ctx, "k", time.Second, leasehold.RenewEvery(950*time.Millisecond)); err == nil {
		t.Error("Acquire renewing every 950ms of a 1s lease succeeded")
	}
}

func TestAcquireWaitsForRelease(t *testing.T) {
	t.Parallel()
	srv := lockserver.Start(t).Server
	// A read timeout well below the wait: a waiting ACQUIRE must not be
	// cut off by it.
	c := newClient(t, srv.Addr().String(), func(cfg *leasehold.Config) { cfg.Redis.ReadTimeout = 500 * time.Millisecond })
	ctx := testContext(t)

	held, err := c.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *leasehold.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.Acquire(ctx, "k", 10*time.Second, leasehold.Wait(20*time.Second))
		got <- result{l, err}
	}()
	testutil.Eventually(t, 5*time.Second, "waiter queued", func() bool {
		st, _ := srv.Table().Status([]byte("k"))
		return st.Waiters == 1
	})
	time.Sleep(time.Second) // past the read timeout, on purpose
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("waiting Acquire not granted within 5s of the release")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.l.Token() <= held.Token() {
		t.Errorf("token %d after %d", r.l.Token(), held.Token())
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireCancelledWhileWaiting(t *testing.T) {
	srv := lockserver.Start(t).Server
	checkLeaks := noLeaks(t)
	// One connection, held by the wait: the unblock cannot borrow it.
	c := newClient(t, srv.Addr().String(), func(cfg *leasehold.Config) { cfg.Redis.PoolSize = 1 })
	ctx := testContext(t)

	held, err := c.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := c.Acquire(wctx, "k", 10*time.Second, leasehold.Wait(20*time.Second))
		got <- err
	}()
	testutil.Eventually(t, 5*time.Second, "waiter queued", func() bool {
		st, _ := srv.Table().Status([]byte("k"))
		return st.Waiters == 1
	})
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("cancelled Acquire did not return within 2s")
	}
	// The client unblocked the request: it left the server's queue, and its
	// connection is back in the pool, long before the 20s WAIT ends.
	testutil.Eventually(t, 5*time.Second, "abandoned wait out of the queue and its connection idle", func() bool {
		st, _ := srv.Table().Status([]byte("k"))
		ps := c.Redis().PoolStats()
		return st.Waiters == 0 && ps.TotalConns == ps.IdleConns
	})
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, ok := srv.Table().Status([]byte("k")); ok && (st.Held || st.LastToken != held.Token()) {
		t.Errorf("after the release: %+v; the abandoned wait was granted the lock", st)
	}
	c.Close()
	checkLeaks()
}

// TestAbandonedWaitsUnblockEndsNoLaterWait: the connection of a wait that
// was abandoned and then granted goes back to the pool only once the
// client's unblock for it is done, so that unblock cannot end the next wait
// on that connection. A slow dial holds the unblock back while the grant
// comes, and the next Acquire finds the granted wait's connection idle in
// the pool, if it was put back too early.
func TestAbandonedWaitsUnblockEndsNoLaterWait(t *testing.T) {
	t.Parallel()
	srv := lockserver.Start(t).Server
	addr := srv.Addr().String()
	holder := newClient(t, addr)
	var dials atomic.Int32
	c := newClient(t, addr, func(cfg *leasehold.Config) {
		cfg.Redis.PoolSize = 2
		cfg.Redis.Dialer = func(ctx context.Context, network, a string) (net.Conn, error) {
			if dials.Add(1) > 1 {
				time.Sleep(300 * time.Millisecond) // the unblock's connection is slow to come
			}
			return (&net.Dialer{}).DialContext(ctx, network, a)
		}
	})
	ctx := testContext(t)
	a, err := holder.Acquire(ctx, "a", 30*time.Second, leasehold.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Acquire(ctx, "b", 30*time.Second, leasehold.NoKeepAlive()); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	gotA := make(chan error, 1)
	go func() {
		_, err := c.Acquire(actx, "a", 30*time.Second, leasehold.Wait(20*time.Second), leasehold.NoKeepAlive())
		gotA <- err
	}()
	testutil.Eventually(t, 5*time.Second, "a's waiter queued", func() bool {
		st, _ := srv.Table().Status([]byte("a"))
		return st.Waiters == 1
	})
	cancel()                               // the unblock goes out on a new, slow connection
	if err := a.Release(ctx); err != nil { // so the abandoned wait is granted first
		t.Fatal(err)
	}
	if err := <-gotA; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned Acquire: %v", err)
	}
	timeouts := func() string {
		info, err := holder.Redis().Info(ctx, "locks").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, after, _ := strings.Cut(info, "wait_timeouts:")
		n, _, _ := strings.Cut(after, "\r\n")
		return n
	}
	before := timeouts()
	// b stays held: this wait can only time out, and an unblock would end
	// it without counting a timeout.
	if _, err := c.Acquire(ctx, "b", 30*time.Second, leasehold.Wait(time.Second), leasehold.NoKeepAlive()); !errors.Is(err, leasehold.ErrNotAcquired) {
		t.Fatalf("waiting for b, which stays held: %v", err)
	}
	if after := timeouts(); after == before {
		t.Fatalf("the wait for b ended without timing out (wait_timeouts stayed %s): a stale unblock ended it", before)
	}
	testutil.Eventually(t, 5*time.Second, "the abandoned wait's late grant released", func() bool {
		st, _ := srv.Table().Status([]byte("a"))
		return !st.Held
	})
	c.Close()
}

// TestAcquireCancelledAsGranted cancels waiting Acquires at the moment the
// lock is released to them, many times: whether the cancellation or the
// grant reaches the server first, no lease is left behind.
func TestAcquireCancelledAsGranted(t *testing.T) {
	srv := lockserver.Start(t).Server
	checkLeaks := noLeaks(t)
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)
	for i := range 50 {
		key := fmt.Sprintf("k%d", i)
		held, err := c.Acquire(ctx, key, 10*time.Second, leasehold.NoKeepAlive())
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			l, err := c.Acquire(wctx, key, 10*time.Second, leasehold.Wait(20*time.Second), leasehold.NoKeepAlive())
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		testutil.Eventually(t, 5*time.Second, "waiter queued", func() bool {
			st, _ := srv.Table().Status([]byte(key))
			return st.Waiters == 1
		})
		go cancel()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v", i, err)
		}
		testutil.Eventually(t, 5*time.Second, "nothing held", func() bool {
			st, ok := srv.Table().Status([]byte(key))
			return !ok || !st.Held && st.Waiters == 0
		})
	}
	c.Close()
	checkLeaks()
}

func TestKeepAliveHoldsLease(t *testing.T) {
	srv := lockserver.Start(t).Server
	checkLeaks := noLeaks(t)
	// Renewing every quarter of the ttl leaves 195ms for a renewal to get
	// through before the lease counts as lost, on a loaded machine too.
	c := newClient(t, srv.Addr().String(), func(cfg *leasehold.Config) { cfg.RenewFraction = 0.25 })
	ctx := testContext(t)

	const ttl = 300 * time.Millisecond
	l, err := c.Acquire(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Deadline()
	start := time.Now()
	for time.Since(start) < 10*ttl {
		select {
		case <-l.Lost():
			t.Fatalf("lease lost after %s: %v", time.Since(start), l.Err())
		case <-time.After(10 * time.Millisecond):
		}
		if !srv.Table().Verify([]byte("k"), l.Token()) {
			// The client must have seen it first.
			select {
			case <-l.Lost():
				t.Fatalf("lease lost after %s: %v", time.Since(start), l.Err())
			default:
				t.Fatalf("lease gone from the server after %s, and the client did not notice", time.Since(start))
			}
		}
	}
	if !l.Deadline().After(first.Add(8 * ttl)) {
		t.Errorf("deadline moved by %s in %s", l.Deadline().Sub(first), 10*ttl)
	}
	if st := srv.Table().Stats(); st.Renewed < 10 {
		t.Errorf("%d renewals in 10 ttls, want about 40", st.Renewed)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	checkLeaks()
}

func TestLostBeforeServerDeadline(t *testing.T) {
	srv := lockserver.Start(t).Server
	checkLeaks := noLeaks(t)
	px := startProxy(t, srv.Addr().String())
	// A margin of 90ms on a 300ms lease leaves the test room for scheduling
	// delays under the race detector.
	c := newClient(t, px.Addr(), func(cfg *leasehold.Config) { cfg.MarginFraction = 0.3 })
	ctx := testContext(t)

	const ttl = 300 * time.Millisecond
	l, err := c.Acquire(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Deadline()
	testutil.Eventually(t, 5*time.Second, "a renewal through the proxy", func() bool { return l.Deadline().After(first) })

	px.Pause()
	// Watch the server's deadline until Lost closes: renewals only move it
	// later, so the last reading is a lower bound.
	var serverDeadline time.Time
	timeout := time.After(5 * time.Second)
watch:
	for {
		now := time.Now()
		if st, ok := srv.Table().Status([]byte("k")); ok && st.Held {
			serverDeadline = now.Add(st.TTL - time.Millisecond) // TTL is rounded up
		}
		select {
		case <-l.Lost():
			break watch
		case <-timeout:
			t.Fatal("Lost not closed within 5s of the proxy pausing")
		case <-time.After(5 * time.Millisecond):
		}
	}
	woke := time.Now()
	lostAt := l.Deadline() // Lost closed when this passed
	if !lostAt.Before(serverDeadline) {
		t.Fatalf("lost at %s, not before the server's deadline %s", lostAt.Format(time.StampMicro), serverDeadline.Format(time.StampMicro))
	}
	// Unless this goroutine woke too late to tell, the server still holds
	// the lease the client gave up.
	if held := srv.Table().Verify([]byte("k"), l.Token()); !held && woke.Before(serverDeadline) {
		t.Fatal("the server's lease had already ended when Lost closed")
	}
	if !errors.Is(l.Err(), leasehold.ErrLeaseLost) || !strings.Contains(l.Err().Error(), "deadline") {
		t.Errorf("Err = %v, want ErrLeaseLost at the deadline", l.Err())
	}
	within(t, time.Second, l.Context().Done(), "Context cancelled")
	if cause := context.Cause(l.Context()); !errors.Is(cause, leasehold.ErrLeaseLost) {
		t.Errorf("Context cause %v, want ErrLeaseLost", cause)
	}
	// The server ends the lease after the client gave it up.
	testutil.Eventually(t, 2*time.Second, "server expiry", func() bool { return !srv.Table().Verify([]byte("k"), l.Token()) })

	px.Resume()
	if err := l.Release(ctx); !errors.Is(err, leasehold.ErrNotHeld) {
		t.Errorf("Release of an expired lease: %v, want ErrNotHeld", err)
	}
	c.Close()
	px.Close()
	checkLeaks()
}

func TestLostWhenRenewalRefused(t *testing.T) {
	srv := lockserver.Start(t).Server
	checkLeaks := noLeaks(t)
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)

	// 2 s, not 300 ms: on a machine at load 10 a renewal every 100 ms
	// could miss the deadline before one was refused (CI, 2026-11-24).
	l, err := c.Acquire(ctx, "k", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Behind the client's back: the next renewal is refused.
	if !srv.Table().Release([]byte("k"), l.Token()) {
		t.Fatal("table release failed")
	}
	within(t, 5*time.Second, l.Lost(), "Lost after a refused renewal")
	if err := l.Err(); !errors.Is(err, leasehold.ErrLeaseLost) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Err = %v, want a refused renewal", err)
	}
	if err := l.Release(ctx); !errors.Is(err, leasehold.ErrNotHeld) {
		t.Errorf("Release: %v, want ErrNotHeld", err)
	}
	if !errors.Is(l.Err(), leasehold.ErrLeaseLost) {
		t.Errorf("Err after Release = %v, want the loss still", l.Err())
	}
	c.Close()
	checkLeaks()
}

func TestVerifyFalseLosesLease(t *testing.T) {
	srv := lockserver.Start(t).Server
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)

	l, err := c.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv.Table().Release([]byte("k"), l.Token())
	if ok, err := l.Verify(ctx); ok || err != nil {
		t.Fatalf("Verify = %v, %v; want false", ok, err)
	}
	within(t, time.Second, l.Lost(), "Lost after Verify found no lease")
	l.Release(ctx)
}

func TestNoKeepAlive(t *testing.T) {
	srv := lockserver.Start(t).Server
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)

	const ttl = 200 * time.Millisecond
	l, err := c.Acquire(ctx, "k", ttl, leasehold.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 2*ttl); err != nil {
		t.Fatal(err)
	}
	extended := time.Now()
	within(t, 5*time.Second, l.Lost(), "Lost of a lease without keep-alive")
	if d := time.Since(extended); d < 2*ttl*9/10-20*time.Millisecond {
		t.Errorf("lost %s after Extend(%s)", d, 2*ttl)
	}
	if st := srv.Table().Stats(); st.Renewed != 1 {
		t.Errorf("%d renewals, want 1 (the Extend)", st.Renewed)
	}
	l.Release(ctx)
}

func TestWithLock(t *testing.T) {
	srv := lockserver.Start(t).Server
	checkLeaks := noLeaks(t)
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)

	t.Run("runs and releases", func(t *testing.T) {
		var got uint64
		err := c.WithLock(ctx, "k", time.Second, func(ctx context.Context, token uint64) error {
			got = token
			if !srv.Table().Verify([]byte("k"), token) {
				t.Error("fn runs without the lease")
			}
			return nil
		})
		if err != nil || got == 0 {
			t.Fatalf("WithLock = %v, token %d", err, got)
		}
		if srv.Table().Verify([]byte("k"), got) {
			t.Error("lease not released after WithLock")
		}
	})
	t.Run("returns fn's error", func(t *testing.T) {
		boom := errors.New("boom")
		if err := c.WithLock(ctx, "k", time.Second, func(context.Context, uint64) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("WithLock = %v, want boom", err)
		}
	})
	t.Run("not acquired", func(t *testing.T) {
		held, err := c.Acquire(ctx, "k", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(ctx)
		ran := false
		err = c.WithLock(ctx, "k", time.Second, func(context.Context, uint64) error { ran = true; return nil })
		if !errors.Is(err, leasehold.ErrNotAcquired) || ran {
			t.Fatalf("WithLock of a held lock = %v, fn ran %v", err, ran)
		}
	})
	t.Run("lost", func(t *testing.T) {
		running := make(chan uint64)
		errc := make(chan error, 1)
		go func() {
			errc <- c.WithLock(ctx, "k", 300*time.Millisecond, func(ctx context.Context, token uint64) error {
				running <- token
				<-ctx.Done()
				return ctx.Err()
			})
		}()
		var token uint64
		select {
		case token = <-running:
		case <-time.After(5 * time.Second):
			t.Fatal("fn not started")
		}
		srv.Table().Release([]byte("k"), token)
		select {
		case err := <-errc:
			if !errors.Is(err, leasehold.ErrLeaseLost) || !errors.Is(err, context.Canceled) {
				t.Fatalf("WithLock = %v, want ErrLeaseLost and fn's context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("fn's context not cancelled within 5s of the loss")
		}
	})
	t.Run("parent cancelled", func(t *testing.T) {
		pctx, cancel := context.WithCancel(ctx)
		err := c.WithLock(pctx, "k", time.Second, func(ctx context.Context, token uint64) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) || errors.Is(err, leasehold.ErrLeaseLost) {
			t.Fatalf("WithLock = %v, want context.Canceled only", err)
		}
		if st, ok := srv.Table().Status([]byte("k")); ok && st.Held {
			t.Error("lease not released after the parent context was cancelled")
		}
	})
	c.Close()
	checkLeaks()
}

// TestRetriedAcquireSameToken cuts the connection in place of ACQUIRE's
// reply: go-redis retries on a new connection, and the OWNER the client
// sends makes the server answer the retry with the same lease.
func TestRetriedAcquireSameToken(t *testing.T) {
	srv := lockserver.Start(t).Server
	px := startProxy(t, srv.Addr().String())
	c := newClient(t, px.Addr())
	ctx := testContext(t)

	// Without an owner, the retry is refused: the first grant is orphaned.
	// This shows the proxy does cut the reply and go-redis does retry.
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr()})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	px.DropNextReply()
	if err := rdb.Do(ctx, "ACQUIRE", "plain", 10000).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("retried ACQUIRE without OWNER: %v, want nil (the first grant's lease holds the lock)", err)
	}
	if st, _ := srv.Table().Status([]byte("plain")); !st.Held {
		t.Fatal("the first ACQUIRE was not granted")
	}

	if err := c.Redis().Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	accepted := px.accepted.Load()
	renewed := srv.Table().Stats().Renewed
	px.DropNextReply()
	l, err := c.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire with a lost reply: %v", err)
	}
	if px.accepted.Load() == accepted {
		t.Fatal("no new connection: the reply was not cut")
	}
	st, _ := srv.Table().Status([]byte("k"))
	if st.Token != l.Token() || st.LastToken != l.Token() || len(st.Holders) != 1 {
		t.Fatalf("server status %+v; want one lease, token %d, granted once", st, l.Token())
	}
	if srv.Table().Stats().Renewed == renewed {
		t.Error("the retry did not renew the first grant")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestStatus(t *testing.T) {
	srv := lockserver.Start(t).Server
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)

	if _, err := c.Status(ctx, "nothing"); !errors.Is(err, leasehold.ErrUnknownLock) {
		t.Errorf("Status of an unknown lock: %v, want ErrUnknownLock", err)
	}
	if err := c.Redis().Do(ctx, "CREATE", "report", "TTL", 5000, "LOCKDELAY", 100).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "free" || !st.Created || st.DefaultTTL != 5*time.Second || st.LockDelay != 100*time.Millisecond || len(st.Holders) != 0 {
		t.Errorf("free lock: %+v", st)
	}
	var leases []*leasehold.Lease
	for _, owner := range []string{"reader-1", "reader-2"} {
		l, err := c.Acquire(ctx, "report", 10*time.Second, leasehold.Shared(), leasehold.Owner(owner))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	st, err = c.Status(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "held" || st.Mode != "shared" || st.Token != 0 || len(st.Holders) != 2 || st.LastToken != leases[1].Token() {
		t.Fatalf("shared lock: %+v", st)
	}
	for i, h := range st.Holders {
		if h.Token != leases[i].Token() || h.Owner != leases[i].Owner() || h.TTL <= 9*time.Second || h.TTL > 10*time.Second {
			t.Errorf("holder %d: %+v, want token %d owner %s ttl about 10s", i, h, leases[i].Token(), leases[i].Owner())
		}
	}
	for _, l := range leases {
		l.Release(ctx)
	}
}

func TestNewFromRedis(t *testing.T) {
	t.Parallel()
	srv := lockserver.Start(t).Server
	ctx := testContext(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr().String(), ReadTimeout: 500 * time.Millisecond})
	defer rdb.Close()
	c, err := leasehold.NewFromRedis(rdb, leasehold.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Redis() != rdb {
		t.Error("Redis() is not the client given")
	}

	held, err := c.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(time.Second) // beyond rdb's read timeout
		held.Release(ctx)
	}()
	l, err := c.Acquire(ctx, "k", 10*time.Second, leasehold.Wait(10*time.Second))
	wg.Wait()
	if err != nil {
		t.Fatalf("waiting Acquire beyond rdb's read timeout: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := leasehold.NewFromRedis(nil, leasehold.DefaultConfig()); err == nil {
		t.Error("NewFromRedis(nil) succeeded")
	}
}
