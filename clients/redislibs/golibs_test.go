//go:build unix

package redislibs_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
)

// testGoLib runs a Go library's tests on each target: calls (its API) and
// the counter under contention in parallel, then hold (a failover on the
// cluster).
func testGoLib(t *testing.T, calls []goCalls, worker func(t *testing.T, tg *target) lockFunc, hold func(t *testing.T, tg *target)) {
	t.Helper()
	eachTarget(t, func(t *testing.T, tg *target) {
		t.Run("calls", func(t *testing.T) {
			for _, c := range calls {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, tg)
				})
			}
			t.Run("contention", func(t *testing.T) {
				t.Parallel()
				contention(t, func() lockFunc { return worker(t, tg) })
			})
		})
		name := "hold"
		if tg.cluster() {
			name = "failover"
		}
		t.Run(name, func(t *testing.T) { hold(t, tg) })
	})
}

// goCalls is a test of a library's calls, named.
type goCalls struct {
	name string
	run  func(t *testing.T, tg *target)
}

// lockFunc takes a lock and returns its release.
type lockFunc func(ctx context.Context) (release func(context.Context) error, err error)

// contention has 4 workers, each a lockFunc of its own (a client and a
// library instance), increment a counter of this process 25 times each
// under the lock: read it, sleep, write it back. A lost update or two
// workers inside at once fails the test.
func contention(t *testing.T, newWorker func() lockFunc) {
	t.Helper()
	const workers, rounds = 4, 25
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var counter, inside, overlaps atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	began := time.Now()
	for range workers {
		lock := newWorker()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				release, err := lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				v := counter.Load()
				time.Sleep(time.Millisecond) // widen the race
				counter.Store(v + 1)
				inside.Add(-1)
				if err := release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("worker: %v", err)
	}
	if got := counter.Load(); got != workers*rounds || overlaps.Load() != 0 {
		t.Fatalf("counter %d, want %d; %d times two workers were inside at once", got, workers*rounds, overlaps.Load())
	}
	t.Logf("%d increments under the lock in %s", workers*rounds, time.Since(began).Round(time.Millisecond))
}

// inRange fails t unless lo < d <= hi.
func inRange(t *testing.T, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d <= lo || d > hi {
		t.Fatalf("%s: %s, want in (%s, %s]", what, d, lo, hi)
	}
}

// waitFree polls until nobody holds key (a lease running out), for 5s.
func (tg *target) waitFree(t *testing.T, key string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for tg.status(t, key).owner != "" {
		if time.Now().After(deadline) {
			t.Fatalf("%s still held 5s on", key)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newRedsync(t *testing.T, tg *target) *redsync.Redsync {
	return redsync.New(goredis.NewPool(client(t, tg.addr)))
}

// expectTaken fails t unless err is redsync's *ErrTaken.
func expectTaken(t *testing.T, what string, ok bool, err error) {
	t.Helper()
	var taken *redsync.ErrTaken
	if ok || !errors.As(err, &taken) {
		t.Fatalf("%s: %v, %v; want false, *redsync.ErrTaken", what, ok, err)
	}
}

// expectOK fails t unless a call succeeded.
func expectOK(t *testing.T, what string, ok bool, err error) {
	t.Helper()
	if !ok || err != nil {
		t.Fatalf("%s: %v, %v; want true, nil", what, ok, err)
	}
}

func TestRedsync(t *testing.T) {
	t.Parallel()
	testGoLib(t, []goCalls{{"api", redsyncCalls}}, func(t *testing.T, tg *target) lockFunc {
		m := newRedsync(t, tg).NewMutex("redsync:count", redsync.WithExpiry(5*time.Second),
			redsync.WithTries(10000), redsync.WithRetryDelay(2*time.Millisecond))
		return func(ctx context.Context) (func(context.Context) error, error) {
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				ok, err := m.UnlockContext(ctx)
				if !ok && err == nil {
					err = errors.New("Unlock: false")
				}
				return err
			}, nil
		}
	}, func(t *testing.T, tg *target) {
		const key = "redsync:hold"
		holdThroughFailover(t, tg, key, 15*time.Second, func(t *testing.T) (string, func()) {
			m := newRedsync(t, tg).NewMutex(key, redsync.WithExpiry(15*time.Second), redsync.WithTries(1))
			if err := m.TryLock(); err != nil {
				t.Fatalf("TryLock: %v", err)
			}
			return m.Value(), func() {
				ok, err := m.Extend()
				expectOK(t, "Extend", ok, err)
				inRange(t, "the lease after Extend", tg.expectHeld(t, key, m.Value(), 15*time.Second).ttl, 10*time.Second, 15*time.Second)
				ok, err = m.Unlock()
				expectOK(t, "Unlock", ok, err)
			}
		})
	})
}

// redsyncCalls: TryLock and Lock (refused while held), Extend, Unlock, a
// second Unlock (ErrLockAlreadyExpired), the stale Unlock and Extend of a
// lock that expired and was taken (ErrTaken), an expired lock's Unlock
// (ErrLockAlreadyExpired), and WithSetNXOnExtend.
func redsyncCalls(t *testing.T, tg *target) {
	const key = "redsync:api"
	rs, rival := newRedsync(t, tg), newRedsync(t, tg)

	m := rs.NewMutex(key, redsync.WithExpiry(3*time.Second), redsync.WithTries(1)) // SET ... ex 3 nx
	if err := m.TryLock(); err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	if len(m.Value()) != 24 {
		t.Fatalf("value %q: want 24 characters of base64", m.Value())
	}
	tg.expectHeld(t, key, m.Value(), 3*time.Second)

	r := rival.NewMutex(key, redsync.WithExpiry(3*time.Second), redsync.WithTries(1))
	expectTaken(t, "TryLock of a held lock", false, r.TryLock())
	r = rival.NewMutex(key, redsync.WithExpiry(1500*time.Millisecond), redsync.WithTries(3), redsync.WithRetryDelay(10*time.Millisecond)) // px 1500
	expectTaken(t, "Lock of a held lock", false, r.Lock())
	tg.expectHeld(t, key, m.Value(), 3*time.Second)

	// Extend sets the lease to the mutex's expiry: longer through a mutex
	// made with the same value, then back to 3s.
	long := rs.NewMutex(key, redsync.WithExpiry(20*time.Second), redsync.WithValue(m.Value()))
	ok, err := long.Extend()
	expectOK(t, "Extend to 20s", ok, err)
	inRange(t, "the lease after Extend to 20s", tg.expectHeld(t, key, m.Value(), 20*time.Second).ttl, 19*time.Second, 20*time.Second)
	ok, err = m.Extend()
	expectOK(t, "Extend to 3s", ok, err)
	inRange(t, "the lease after Extend to 3s", tg.expectHeld(t, key, m.Value(), 3*time.Second).ttl, 2*time.Second, 3*time.Second)

	ok, err = m.Unlock()
	expectOK(t, "Unlock", ok, err)
	tg.expectFree(t, key)
	if ok, err = m.Unlock(); ok || !errors.Is(err, redsync.ErrLockAlreadyExpired) {
		t.Fatalf("a second Unlock: %v, %v; want false, ErrLockAlreadyExpired", ok, err)
	}

	// A short lock runs out and a rival takes it: the stale Unlock and
	// Extend are refused (ErrTaken) and leave the rival's lock alone.
	short := rs.NewMutex(key+":x", redsync.WithExpiry(300*time.Millisecond), redsync.WithTries(1), redsync.WithTimeoutFactor(0.5))
	if err := short.TryLock(); err != nil {
		t.Fatalf("TryLock of a 300ms lock: %v", err)
	}
	w := rival.NewMutex(key+":x", redsync.WithExpiry(10*time.Second), redsync.WithTries(500), redsync.WithRetryDelay(10*time.Millisecond))
	if err := w.Lock(); err != nil {
		t.Fatalf("Lock once the 300ms lock expires: %v", err)
	}
	ok, err = short.Unlock()
	expectTaken(t, "stale Unlock", ok, err)
	ok, err = short.Extend()
	expectTaken(t, "stale Extend", ok, err)
	tg.expectHeld(t, key+":x", w.Value(), 10*time.Second)
	ok, err = w.Unlock()
	expectOK(t, "Unlock", ok, err)

	// Expired, nobody took it: Unlock says so.
	e := rs.NewMutex(key+":e", redsync.WithExpiry(300*time.Millisecond), redsync.WithTries(1), redsync.WithTimeoutFactor(0.5))
	if err := e.TryLock(); err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	tg.waitFree(t, key+":e")
	if ok, err = e.Unlock(); ok || !errors.Is(err, redsync.ErrLockAlreadyExpired) {
		t.Fatalf("Unlock of an expired lock: %v, %v; want false, ErrLockAlreadyExpired", ok, err)
	}

	// WithSetNXOnExtend: Extend takes the lock again once it is free.
	again := rs.NewMutex(key+":e", redsync.WithExpiry(2*time.Second), redsync.WithValue(e.Value()), redsync.WithSetNXOnExtend())
	ok, err = again.Extend()
	expectOK(t, "Extend WithSetNXOnExtend of an expired lock", ok, err)
	tg.expectHeld(t, key+":e", e.Value(), 2*time.Second)
	r = rival.NewMutex(key+":e", redsync.WithExpiry(2*time.Second), redsync.WithSetNXOnExtend(), redsync.WithValue("someone else"))
	ok, err = r.Extend()
	expectTaken(t, "Extend WithSetNXOnExtend of another's lock", ok, err)
	ok, err = again.Unlock()
	expectOK(t, "Unlock", ok, err)
	tg.expectFree(t, key+":e")
}

func TestRedislock(t *testing.T) {
	t.Parallel()
	testGoLib(t, []goCalls{{"api", redislockCalls}, {"reobtain", redislockReobtain}}, func(t *testing.T, tg *target) lockFunc {
		lc := redislock.New(client(t, tg.addr))
		return func(ctx context.Context) (func(context.Context) error, error) {
			l, err := lc.Obtain(ctx, "redislock:count", 5*time.Second, &redislock.Options{RetryStrategy: redislock.LinearBackoff(2 * time.Millisecond)})
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		}
	}, func(t *testing.T, tg *target) {
		const key = "redislock:hold"
		holdThroughFailover(t, tg, key, 15*time.Second, func(t *testing.T) (string, func()) {
			ctx := context.Background()
			l, err := redislock.New(client(t, tg.addr)).Obtain(ctx, key, 15*time.Second, nil)
			if err != nil {
				t.Fatalf("Obtain: %v", err)
			}
			return l.Token(), func() {
				if err := l.Refresh(ctx, 15*time.Second, nil); err != nil {
					t.Fatalf("Refresh: %v", err)
				}
				ttl, err := l.TTL(ctx)
				if err != nil {
					t.Fatalf("TTL: %v", err)
				}
				inRange(t, "TTL after Refresh", ttl, 10*time.Second, 15*time.Second)
				if err := l.Release(ctx); err != nil {
					t.Fatalf("Release: %v", err)
				}
			}
		})
	})
}

// redislockCalls: Obtain (with metadata; refused while held, with and
// without retries), TTL, Refresh, Release, and the stale Release, Refresh and TTL of a released lock and of one that
// expired and was taken.
func redislockCalls(t *testing.T, tg *target) {
	const key = "redislock:api"
	ctx := context.Background()
	lc, rival := redislock.New(client(t, tg.addr)), redislock.New(client(t, tg.addr))

	l, err := lc.Obtain(ctx, key, 10*time.Second, &redislock.Options{Metadata: "meta1"})
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	if len(l.Token()) != 22 || l.Metadata() != "meta1" {
		t.Fatalf("token %q, metadata %q: want 22 characters and meta1", l.Token(), l.Metadata())
	}
	tg.expectHeld(t, key, l.Token()+"meta1", 10*time.Second)
	if _, err := rival.Obtain(ctx, key, 10*time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Obtain of a held lock: %v, want ErrNotObtained", err)
	}
	retry := &redislock.Options{RetryStrategy: redislock.LimitRetry(redislock.LinearBackoff(10*time.Millisecond), 3)}
	if _, err := rival.Obtain(ctx, key, 10*time.Second, retry); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Obtain of a held lock with 3 retries: %v, want ErrNotObtained", err)
	}

	ttl, err := l.TTL(ctx)
	if err != nil {
		t.Fatalf("TTL: %v", err)
	}
	inRange(t, "TTL", ttl, 9*time.Second, 10*time.Second)
	if err := l.Refresh(ctx, 20*time.Second, nil); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if ttl, err = l.TTL(ctx); err != nil {
		t.Fatalf("TTL: %v", err)
	}
	inRange(t, "TTL after Refresh to 20s", ttl, 19*time.Second, 20*time.Second)
	inRange(t, "the lease after Refresh to 20s", tg.expectHeld(t, key, l.Token()+"meta1", 20*time.Second).ttl, 19*time.Second, 20*time.Second)

	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	tg.expectFree(t, key)
	if err := l.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Fatalf("a second Release: %v, want ErrLockNotHeld", err)
	}
	if err := l.Refresh(ctx, time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Refresh of a released lock: %v, want ErrNotObtained", err)
	}
	if ttl, err := l.TTL(ctx); ttl != 0 || err != nil {
		t.Fatalf("TTL of a released lock: %s, %v; want 0, nil", ttl, err)
	}
	// A short lock runs out and a rival takes it: the stale calls are
	// refused and leave the rival's lock alone.
	short, err := lc.Obtain(ctx, key+":x", 300*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("Obtain of a 300ms lock: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	w, err := rival.Obtain(wctx, key+":x", 10*time.Second, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
	if err != nil {
		t.Fatalf("Obtain once the 300ms lock expires: %v", err)
	}
	if err := short.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Fatalf("stale Release: %v, want ErrLockNotHeld", err)
	}
	if err := short.Refresh(ctx, time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("stale Refresh: %v, want ErrNotObtained", err)
	}
	if ttl, err := short.TTL(ctx); ttl != 0 || err != nil {
		t.Fatalf("stale TTL: %s, %v; want 0, nil", ttl, err)
	}
	tg.expectHeld(t, key+":x", w.Token(), 10*time.Second)
	if err := w.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	tg.expectFree(t, key+":x")
}

// redislockReobtain: Obtain by the holder's own token (Options.Token) takes
// the lock again, as redislock's script allows: with the same metadata, and
// on Redis with new metadata, which replaces the lock's value (the script
// compares the value's first len(token) bytes) so that the old handle's
// value is no longer the lock's. leasehold compares the whole value, as
// docs/redis-compat.md says: new metadata is refused.
func redislockReobtain(t *testing.T, tg *target) {
	const key = "redislock:reobtain"
	ctx := context.Background()
	lc := redislock.New(client(t, tg.addr))
	l, err := lc.Obtain(ctx, key, 10*time.Second, &redislock.Options{Metadata: "meta1"})
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	same, err := lc.Obtain(ctx, key, 20*time.Second, &redislock.Options{Token: l.Token(), Metadata: "meta1"})
	if err != nil {
		t.Fatalf("Obtain by the holder's token and metadata: %v", err)
	}
	inRange(t, "the lease after the re-Obtain", tg.expectHeld(t, key, l.Token()+"meta1", 20*time.Second).ttl, 19*time.Second, 20*time.Second)
	l2, err := lc.Obtain(ctx, key, 5*time.Second, &redislock.Options{Token: l.Token(), Metadata: "meta2"})
	if !tg.redis {
		// leasehold compares the whole value (docs/redis-compat.md).
		if !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("Obtain by the holder's token with new metadata: %v; want ErrNotObtained from leasehold", err)
		}
		tg.expectHeld(t, key, l.Token()+"meta1", 20*time.Second)
		if err := same.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		tg.expectFree(t, key)
		return
	}
	if err != nil {
		t.Fatalf("Obtain by the holder's token with new metadata: %v", err)
	}
	inRange(t, "the lease after the re-Obtain with new metadata", tg.expectHeld(t, key, l.Token()+"meta2", 5*time.Second).ttl, 4*time.Second, 5*time.Second)
	if err := same.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Fatalf("Release by the handle whose metadata was replaced: %v, want ErrLockNotHeld", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	tg.expectFree(t, key)
}
