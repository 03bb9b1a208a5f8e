package leasehold

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// AcquireOption sets one of Acquire's options.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	wait        time.Duration
	forever     bool // WaitForever: wait has no bound
	owner       string
	priority    int32
	shared      bool
	renewEvery  time.Duration // 0: the Config's fraction of the ttl
	noKeepAlive bool
}

// Wait makes Acquire wait up to d for the lock in the server's fair queue
// (ACQUIRE ... WAIT). Without it Acquire tries once. The server refuses a
// wait longer than its --max-ttl. It replaces WaitForever.
func Wait(d time.Duration) AcquireOption {
	return func(o *acquireOptions) { o.wait, o.forever = d, false }
}

// WaitForever makes Acquire wait in the server's fair queue until the lock
// is granted or ctx is done. The server bounds one WAIT by its --max-ttl,
// which Acquire asks for first (CONFIG GET max-ttl); shortly before each
// wait would end, it sends the same ACQUIRE again, with the same owner, on
// another connection, and the server moves the request into the old one's
// place in the queue: the place is kept however long the wait. An error
// (the connection lost, the server restarted) ends the wait with that
// error; the caller decides whether to queue again. It replaces Wait.
func WaitForever() AcquireOption {
	return func(o *acquireOptions) { o.wait, o.forever = 0, true }
}

// Owner names the holder (ACQUIRE ... OWNER). Without it each Acquire call
// picks a random owner. An Acquire that names an owner already holding the
// lock gets that lease back, renewed, with the same token: give owners that
// are unique per holder.
func Owner(id string) AcquireOption { return func(o *acquireOptions) { o.owner = id } }

// Priority lets a waiting Acquire go ahead of waiters with a lower priority
// (higher first; the default is 0).
func Priority(n int32) AcquireOption { return func(o *acquireOptions) { o.priority = n } }

// Shared takes a read lease: any number of readers hold the lock together,
// while no exclusive lease does.
func Shared() AcquireOption { return func(o *acquireOptions) { o.shared = true } }

// There is no option for the server's EPHEMERAL: it ties a lease to the
// connection that took it, and a pooled client's connections come and go
// (an unrelated command that times out closes one), so the server could end
// a lease long before the keep-alive noticed. The keep-alive gives what a
// connection-tied lease is for: when the process dies, renewals stop and
// the lease runs out within its ttl.

// RenewEvery renews the lease every d instead of Config.RenewFraction of its
// ttl. d must leave room for a renewal before the lease would count as lost.
func RenewEvery(d time.Duration) AcquireOption {
	return func(o *acquireOptions) { o.renewEvery = d }
}

// NoKeepAlive leaves the lease without renewal: it runs out at its ttl
// unless Lease.Extend moves its deadline, and Lost still closes the margin
// before then. No goroutine is started for it.
func NoKeepAlive() AcquireOption { return func(o *acquireOptions) { o.noKeepAlive = true } }

// newOwner returns a random owner id: 16 random bytes in hex.
func newOwner() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b[:])
}

// Acquire takes a lease on the lock key for ttl and keeps it alive until
// Lease.Release, or until it is lost. It waits up to the Wait option for the
// lock (without it, it tries once), and returns ErrNotAcquired when the lock
// was not granted. ttl is sent in whole milliseconds, rounded up.
//
// Acquire blocks until the server answers, for at most the wait plus the
// read timeout (Config.Redis.ReadTimeout), or until ctx is done. If ctx is
// cancelled while the server still holds the request in its queue, Acquire
// returns ctx's error at once; a goroutine owned by the Client takes the
// request out of the queue (CLIENT UNBLOCK) and releases a lease granted
// before that landed. ctx bounds the call only: the lease lives on after
// it, until Release or loss. A waiting Acquire costs one round trip more
// than a TryAcquire, for the waiting connection's CLIENT ID.
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	var o acquireOptions
	for _, opt := range opts {
		opt(&o)
	}
	return c.acquire(ctx, key, ttl, o)
}

// TryAcquire is Acquire without waiting, whatever the options say: it
// returns ErrNotAcquired at once when the lock is not free.
func (c *Client) TryAcquire(ctx context.Context, key string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	var o acquireOptions
	for _, opt := range opts {
		opt(&o)
	}
	o.wait, o.forever = 0, false
	return c.acquire(ctx, key, ttl, o)
}

func (c *Client) acquire(ctx context.Context, key string, ttl time.Duration, o acquireOptions) (*Lease, error) {
	ms, err := millis("ttl", ttl)
	if err != nil {
		return nil, err
	}
	ttl = time.Duration(ms) * time.Millisecond
	if o.wait < 0 {
		return nil, fmt.Errorf("leasehold: wait must not be negative, got %s", o.wait)
	}
	every := c.renewInterval(ttl, o.renewEvery)
	if !o.noKeepAlive && every >= ttl-c.margin(ttl) {
		return nil, fmt.Errorf("leasehold: renewing every %s leaves no room before a %s lease counts as lost (%s before its deadline)", every, ttl, c.margin(ttl))
	}
	if o.owner == "" {
		o.owner = newOwner()
	}
	args := []any{"ACQUIRE", key, ms, "OWNER", o.owner}
	if o.priority != 0 {
		args = append(args, "PRIORITY", o.priority)
	}
	if o.shared {
		args = append(args, "SHARED")
	}

	// sent is when the request that was granted went out: the server's
	// lease starts no earlier, so its deadline is at least sent+ttl,
	// whenever the grant and the reply come.
	var token uint64
	var sent time.Time
	switch {
	case o.forever:
		token, sent, err = c.acquireForever(ctx, key, args)
	case o.wait > 0:
		token, sent, err = c.acquireWaitingRetry(ctx, key, o.wait, args)
	default:
		var cmd *redis.Cmd
		cmd, sent, _ = c.doRetry(ctx, idempotent, args...)
		token, err = cmd.Uint64()
	}
	switch {
	case errors.Is(err, redis.Nil):
		return nil, ErrNotAcquired
	case errors.Is(err, ErrUncertain):
		// The owner is what settles it: an Acquire with it gets the lease
		// back if it was granted.
		return nil, fmt.Errorf("leasehold: acquire %q as owner %q: %w", key, o.owner, err)
	case err != nil:
		return nil, fmt.Errorf("leasehold: acquire %q: %w", key, err)
	}

	l := newLease(c, key, token, o, ttl, every, sent)
	if time.Now().Before(l.Deadline()) {
		l.start()
		return l, nil
	}
	// Granted after a long wait (or a slow reply): the deadline reckoned
	// from the request has passed, so nothing proves the lease yet. A
	// renewal sent now does.
	if _, err := l.extend(ctx, ttl, false); err != nil {
		c.Release(context.WithoutCancel(ctx), key, token)
		if errors.Is(err, ErrLeaseLost) {
			return nil, fmt.Errorf("%w: the lease granted on %q ran out before it could be renewed (%w)", ErrNotAcquired, key, err)
		}
		return nil, fmt.Errorf("leasehold: renewing the lease granted on %q: %w", key, err)
	}
	l.start()
	return l, nil
}

// acquireWaitingRetry runs ACQUIRE args ... WAIT through retry: a try that
// a cluster answers TRYAGAIN or UNCERTAIN is sent again, with the same
// OWNER, for what is left of the wait; none is sent once the wait is over.
// It returns the token and when the try that answered was sent.
func (c *Client) acquireWaitingRetry(ctx context.Context, key string, wait time.Duration, args []any) (uint64, time.Time, error) {
	end := time.Now().Add(wait)
	var token uint64
	last, _, err := c.retry(ctx, idempotent, "ACQUIRE", func(tctx context.Context) error {
		var err error
		left := time.Until(end)
		if left <= 0 {
			// The wait is over, but an earlier try may have been granted:
			// one more without WAIT gets that lease back.
			token, err = c.rdb.Do(tctx, args...).Uint64()
			return err
		}
		wms, _ := millis("wait", left)
		// acquireWaiting bounds the try itself, by the read timeout plus
		// the wait: it gets the call's context.
		token, err = c.acquireWaiting(ctx, key, left, append(slices.Clip(args), "WAIT", wms))
		return err
	})
	return token, last.sent, err
}

// acquireWaiting runs an ACQUIRE ... WAIT on the client without a socket read
// timeout, bounded by the wait plus the read timeout. go-redis reads no
// context cancellation off a socket, so the call runs on a goroutine, on a
// connection whose CLIENT ID it asks first; when ctx is done, Acquire
// returns at once and a goroutine owned by the Client sends CLIENT UNBLOCK
// for that ID, so the request leaves the server's queue and its connection
// goes back to the pool, rather than both waiting out the WAIT.
func (c *Client) acquireWaiting(ctx context.Context, key string, wait time.Duration, args []any) (uint64, error) {
	w := c.startWait(ctx, wait, args)
	if w == nil {
		return 0, redis.ErrClosed
	}
	select {
	case r := <-w.done:
		r.conn.Close() // back to the pool
		return r.token, r.err
	case <-ctx.Done():
	}
	c.abandon(ctx, key, w)
	return 0, ctx.Err()
}

// pendingWait is an ACQUIRE ... WAIT under way on a goroutine of the
// Client's (startWait).
type pendingWait struct {
	sent    time.Time       // before the request went out
	waiting chan int64      // the waiting connection's CLIENT ID, once known
	done    chan waitResult // how it ended; its receiver closes r.conn
}

// startWait sends args, an ACQUIRE ... WAIT of wait, on a connection of its
// own from a goroutine the Client tracks, first asking that connection's
// CLIENT ID for abandon; nil, and nothing is sent, once the Client is
// closed.
func (c *Client) startWait(ctx context.Context, wait time.Duration, args []any) *pendingWait {
	w := &pendingWait{sent: time.Now(), waiting: make(chan int64, 1), done: make(chan waitResult, 1)}
	started := c.goTracked(func() {
		cctx, cancel := c.callContext(ctx, wait)
		defer cancel()
		conn := c.wait.Conn()
		id, err := conn.ClientID(cctx).Result()
		if err == nil {
			err = ctx.Err() // given up already: do not queue at all
		}
		if err != nil {
			w.done <- waitResult{conn: conn, err: err}
			return
		}
		w.waiting <- id
		tok, err := conn.Do(cctx, args...).Uint64()
		w.done <- waitResult{conn: conn, token: tok, err: err}
	})
	if !started {
		return nil
	}
	return w
}

// abandon hands w, whose result nobody waits for any more, to abandonWait.
func (c *Client) abandon(ctx context.Context, key string, w *pendingWait) {
	abandon := func() { c.abandonWait(context.WithoutCancel(ctx), key, w.waiting, w.done) }
	if !c.goTracked(abandon) {
		abandon() // closing: the wait's connection is closed, it ends at once
	}
}

// acquireForever runs ACQUIRE args (without WAIT) as a chain of waits, each
// as long as the server allows (its max-ttl), until one is granted or ctx
// is done, and returns the token and when the granted request was sent.
//
// A wait is followed, a little before its end, by the next on another
// connection; with the same OWNER, the server puts the next into the old
// request's place in the queue and ends the old one with nil. From then on
// the next request decides: had the old one been granted just before, the
// next gets that same lease back (an owner's retry), renewed. Only a next
// request that arrives after the old one timed out (a network slower than
// the lead) queues again at the back.
func (c *Client) acquireForever(ctx context.Context, key string, args []any) (uint64, time.Time, error) {
	chunk, err := c.maxWait(ctx)
	if err != nil {
		return 0, time.Time{}, err
	}
	lead := min(chunk/2, 5*time.Second)
	wms, _ := millis("wait", chunk)
	args = append(args, "WAIT", wms)
	start := func() (*pendingWait, <-chan time.Time, error) {
		w := c.startWait(ctx, chunk, args)
		if w == nil {
			return nil, nil, redis.ErrClosed
		}
		return w, time.After(time.Until(w.sent.Add(chunk - lead))), nil
	}
	cur, refresh, err := start()
	if err != nil {
		return 0, time.Time{}, err
	}
	var next *pendingWait
	var granted uint64 // a grant to cur that next has not confirmed yet
	fail := func(err error) (uint64, time.Time, error) {
		if granted != 0 {
			c.Release(context.WithoutCancel(ctx), key, granted)
		}
		return 0, time.Time{}, err
	}
	for {
		select {
		case r := <-cur.done:
			r.conn.Close()
			if next != nil {
				if r.err == nil {
					granted = r.token
				}
				cur, next = next, nil
				refresh = time.After(time.Until(cur.sent.Add(chunk - lead)))
				continue
			}
			switch {
			case r.err == nil:
				return r.token, cur.sent, nil
			case !errors.Is(r.err, redis.Nil):
				return fail(r.err)
			}
			// Ran out before the next request was sent: queue again.
			granted = 0
			if cur, refresh, err = start(); err != nil {
				return 0, time.Time{}, err
			}
		case <-refresh:
			refresh = nil
			if next = c.startWait(ctx, chunk, args); next == nil {
				c.abandon(ctx, key, cur)
				return 0, time.Time{}, redis.ErrClosed
			}
		case <-ctx.Done():
			c.abandon(ctx, key, cur)
			if next != nil {
				c.abandon(ctx, key, next)
			}
			return fail(ctx.Err())
		}
	}
}

// maxWait is the longest WAIT the server takes: its max-ttl, unless the
// Client's waitChunk is shorter.
func (c *Client) maxWait(ctx context.Context) (time.Duration, error) {
	if c.waitChunk > 0 {
		return c.waitChunk, nil
	}
	reply, err := c.do(ctx, "CONFIG", "GET", "max-ttl").StringSlice()
	if err != nil {
		return 0, fmt.Errorf("leasehold: asking the server's max-ttl, the longest WAIT: %w", err)
	}
	if len(reply) != 2 {
		return 0, fmt.Errorf("leasehold: CONFIG GET max-ttl answered %q", reply)
	}
	ms, err := strconv.ParseInt(reply[1], 10, 64)
	if err != nil || ms <= 0 {
		return 0, fmt.Errorf("leasehold: CONFIG GET max-ttl answered %q", reply)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// waitResult is how a waiting ACQUIRE ended, and the connection it waited
// on, which its receiver puts back in the pool.
type waitResult struct {
	conn  *redis.Conn
	token uint64
	err   error
}

// abandonWait ends a waiting ACQUIRE nobody waits for any more. Until the
// wait's result comes on done, it sends CLIENT UNBLOCK for the waiting
// connection (its ID comes on waiting), over the Client's own control
// connection, since waits may hold every connection of the pool. An unblock
// that finds no wait (the ACQUIRE is not in the server's queue yet) is sent
// again after a pause that doubles up to a second; a server that refuses
// CLIENT UNBLOCK is left to end the WAIT on its own. Then it releases the
// lease if the result is a grant, on the wait's own connection, and only
// then puts that connection back in the pool: no unblock for it can still
// be on its way to end some later wait on it.
func (c *Client) abandonWait(ctx context.Context, key string, waiting <-chan int64, done <-chan waitResult) {
	var retry <-chan time.Time
	pause := 5 * time.Millisecond
	var id int64
	for {
		select {
		case r := <-done:
			if r.err == nil {
				rctx, cancel := c.callContext(ctx, 0)
				r.conn.Do(rctx, "RELEASE", key, r.token)
				cancel()
			}
			r.conn.Close()
			return
		case id = <-waiting:
		case <-retry:
		}
		uctx, cancel := c.callContext(ctx, 0)
		n, err := c.ctl.ClientUnblock(uctx, id).Result()
		cancel()
		var refused redis.Error
		switch {
		case err == nil && n == 1, errors.As(err, &refused):
			retry = nil // the result is on its way, or will come when the WAIT ends
			continue
		}
		retry = time.After(pause)
		pause = min(2*pause, time.Second)
	}
}

// renewInterval is how often a lease of ttl is renewed.
func (c *Client) renewInterval(ttl, every time.Duration) time.Duration {
	if every > 0 {
		return every
	}
	return time.Duration(float64(ttl) * c.cfg.RenewFraction)
}

// margin is how long before its estimated deadline a lease of ttl counts as
// lost.
func (c *Client) margin(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl) * c.cfg.MarginFraction)
}

// WithLock acquires the lock key (with Acquire's options: pass Wait to wait
// for it), keeps the lease alive while fn runs, and releases it when fn
// returns. fn gets the lease's fencing token and a context that is cancelled
// when ctx is, or when the lease is lost: fn must stop then.
//
// WithLock returns Acquire's error (ErrNotAcquired when the lock was not
// granted), or fn's, or, when the lease was lost while fn ran or the release
// found it gone, an error wrapping ErrLeaseLost (joined with fn's error,
// which is then most often context.Canceled). Then the work fn did may
// have overlapped another holder's: the fencing token is what guards the
// resource. The release runs even when ctx is done.
func (c *Client) WithLock(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, token uint64) error, opts ...AcquireOption) error {
	l, err := c.Acquire(ctx, key, ttl, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	ferr := fn(fctx, l.Token())
	stop()
	cancel(nil)

	var lost error
	select {
	case <-l.Lost():
		lost = l.Err()
	default:
	}
	rerr := l.Release(context.WithoutCancel(ctx))
	switch {
	case lost != nil:
		return errors.Join(lost, ferr)
	case errors.Is(rerr, ErrNotHeld):
		return errors.Join(fmt.Errorf("%w: releasing %q found the lease already gone", ErrLeaseLost, key), ferr)
	case ferr != nil:
		return ferr
	case rerr != nil:
		return fmt.Errorf("leasehold: release %q: %w", key, rerr)
	}
	return nil
}
