package leasehold

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lease is one grant of a lock, taken by Acquire: its key, its fencing token,
// and the client's estimate of how long it is held.
//
// Unless NoKeepAlive was given, the lease renews itself on a goroutine of its
// own (every Config.RenewFraction of its ttl) until Release or loss. Each
// renewal's deadline is reckoned from when its request was sent, on the
// client's monotonic clock, less the safety margin: that is Deadline. A timer
// fires at Deadline; unless a renewal confirmed in the meantime has moved it,
// the lease is lost then. It is lost at once when the server refuses a
// renewal or a Verify (it no longer has the lease). On loss, Lost closes and
// Context is cancelled with a cause wrapping ErrLeaseLost; the holder must
// stop using the lock. Holding is never certain: see the package doc.
//
// A Lease is safe for concurrent use.
type Lease struct {
	c          *Client
	key        string
	token      uint64
	owner      string
	keepAlive  bool
	fixedEvery bool // RenewEvery was given: Extend keeps the interval

	// extendMu serializes EXTENDs (the keep-alive's and Extend's), so that
	// the server applies them in the order their deadlines are reckoned.
	extendMu sync.Mutex

	mu       sync.Mutex    // guards the fields below
	ttl      time.Duration // what renewals ask for
	every    time.Duration // renewal period
	deadline time.Time     // when the lease counts as lost, unless renewed
	renewAt  time.Time     // when the keep-alive renews next
	lastErr  error         // the last renewal's failure, for the loss message
	err      error         // why the lease ended: a loss, or ErrReleased
	released bool          // the server answered a RELEASE
	timer    *time.Timer   // fires at deadline: a hint, re-checked under mu

	lost   chan struct{} // closed on loss
	stop   chan struct{} // closed when the lease ends: the keep-alive returns
	kick   chan struct{} // wakes the keep-alive when renewAt moved
	done   chan struct{} // closed when the keep-alive has returned
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newLease(c *Client, key string, token uint64, o acquireOptions, ttl, every time.Duration, sent time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lease{
		c:          c,
		key:        key,
		token:      token,
		owner:      o.owner,
		keepAlive:  !o.noKeepAlive,
		fixedEvery: o.renewEvery > 0,
		ttl:        ttl,
		every:      every,
		deadline:   sent.Add(ttl - c.margin(ttl)),
		renewAt:    sent.Add(every),
		lost:       make(chan struct{}),
		stop:       make(chan struct{}),
		kick:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		ctx:        ctx,
		cancel:     cancel,
	}
}

// start arms the deadline timer and starts the keep-alive.
func (l *Lease) start() {
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(l.deadline), l.expire)
	l.mu.Unlock()
	if l.keepAlive {
		go l.run()
	} else {
		close(l.done)
	}
}

// Key is the lock's name.
func (l *Lease) Key() string { return l.key }

// Token is the lease's fencing token: pass it to the resource the lock
// protects, with every request.
func (l *Lease) Token() uint64 { return l.token }

// Owner is the OWNER the lease was taken under (random unless given).
func (l *Lease) Owner() string { return l.owner }

// Deadline is when the lease counts as lost unless a renewal is confirmed
// first: the send time of the last confirmed ACQUIRE or EXTEND plus its ttl
// (the earliest the server can end the lease), less the safety margin.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Lost is closed when the lease is lost: a renewal or Verify refused, or no
// renewal confirmed before Deadline. It is not closed by Release; to wait
// for either, use Context().Done().
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Context is cancelled when the lease is lost or released; its cause
// (context.Cause) is Err.
func (l *Lease) Context() context.Context { return l.ctx }

// Err is nil while the lease is held; then an error wrapping ErrLeaseLost
// after a loss, or ErrReleased after Release.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Release stops the keep-alive and ends the lease on the server. It returns
// ErrNotHeld when the server no longer had the lease (it was lost, say),
// and a connection error as is: the lease then runs out at its deadline, and
// Release may be called again. After a successful Release, further calls
// return nil. It waits for the keep-alive goroutine to return, which may
// take until a renewal in flight is answered or timed out.
//
// A cluster's TRYAGAIN and UNCERTAIN are retried. A RELEASE sent again
// after an UNCERTAIN that finds no lease counts as released (nil, not
// ErrNotHeld): the first one may have ended it. When the retries run out
// after an UNCERTAIN, the error wraps ErrUncertain.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	ended := l.err != nil
	if !ended {
		l.err = ErrReleased
		l.stopLocked()
	}
	l.mu.Unlock()
	if !ended {
		l.cancel(ErrReleased)
	}

	cmd, _, uncertain := l.c.doRetry(ctx, idempotent, "RELEASE", l.key, l.token)
	n, err := cmd.Int()
	select {
	case <-l.done: // the keep-alive has stopped
	case <-ctx.Done():
	}
	if err != nil {
		return fmt.Errorf("leasehold: release %q: %w", l.key, err)
	}
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	if n == 0 && !uncertain {
		return ErrNotHeld
	}
	return nil
}

// Extend moves the lease's deadline to ttl from now and renews it with ttl
// from then on. It returns an error wrapping ErrLeaseLost (and the lease is
// lost) when the server refuses: the lease had already ended. After a
// connection error the outcome is unknown; a shorter ttl then also shortens
// Deadline, in case the server applied it.
//
// A cluster's TRYAGAIN and UNCERTAIN are retried, as the keep-alive's
// renewals are: an EXTEND sent again extends from a later moment, which is
// harmless, and Deadline is reckoned from the send of the one that was
// answered. When the retries run out after an UNCERTAIN, the error wraps
// ErrUncertain.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	l.mu.Lock()
	every := l.every
	l.mu.Unlock()
	if l.keepAlive && l.fixedEvery && every >= ttl-l.c.margin(ttl) {
		return fmt.Errorf("leasehold: renewing every %s leaves no room before a %s lease counts as lost", every, ttl)
	}
	if ok, err := l.extend(ctx, ttl, true); !ok {
		return err
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return nil
}

// Verify asks the server whether the lease is live. A false answer (the
// server no longer has it) makes the lease lost, unless it was released.
func (l *Lease) Verify(ctx context.Context) (bool, error) {
	ok, err := l.c.Verify(ctx, l.key, l.token)
	if err == nil && !ok {
		l.lose(fmt.Errorf("%w: VERIFY found no lease %d on %q", ErrLeaseLost, l.token, l.key))
	}
	return ok, err
}

// extend sends one EXTEND and moves the deadline by its answer; with adopt,
// later renewals ask for ttl too. It reports true when the server extended
// the lease.
func (l *Lease) extend(ctx context.Context, ttl time.Duration, adopt bool) (bool, error) {
	ms, err := millis("ttl", ttl)
	if err != nil {
		return false, err
	}
	ttl = time.Duration(ms) * time.Millisecond
	l.extendMu.Lock()
	defer l.extendMu.Unlock()
	if err := l.Err(); err != nil {
		return false, err
	}
	first := time.Now()
	cmd, sent, _ := l.c.doRetry(ctx, idempotent, "EXTEND", l.key, l.token, ms)
	n, err := cmd.Int()
	if err != nil {
		// Any try may have been applied: the first sent is the earliest
		// the server can have begun a shorter period.
		sent = first
	}
	deadline := sent.Add(ttl - l.c.margin(ttl))
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.lastErr = err
		// The server may have applied it: a shorter ttl may bound the
		// lease now.
		if deadline.Before(l.deadline) {
			l.setDeadlineLocked(deadline)
		}
		return false, fmt.Errorf("leasehold: extend %q: %w", l.key, err)
	case n == 0:
		err := fmt.Errorf("%w: the server refused to renew lease %d on %q (it expired or was released)", ErrLeaseLost, l.token, l.key)
		l.loseLocked(err)
		return false, err
	case l.err != nil:
		// Answered after the deadline passed: too late, the lease is
		// already given up.
		return false, l.err
	}
	if adopt {
		l.ttl = ttl
		if !l.fixedEvery {
			l.every = l.c.renewInterval(ttl, 0)
		}
	}
	l.lastErr = nil
	l.setDeadlineLocked(deadline)
	l.renewAt = sent.Add(l.every)
	return true, nil
}

// setDeadlineLocked moves the deadline and its timer.
func (l *Lease) setDeadlineLocked(d time.Time) {
	l.deadline = d
	if l.timer != nil {
		l.timer.Reset(time.Until(d))
	}
}

// expire runs when the deadline timer fires. A renewal may have moved the
// deadline since the timer was set: the firing is only a hint.
func (l *Lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if d := time.Until(l.deadline); d > 0 {
		l.timer.Reset(d)
		return
	}
	why := "no renewal was confirmed in time"
	if l.lastErr != nil {
		why += " (last error: " + l.lastErr.Error() + ")"
	}
	l.loseLocked(fmt.Errorf("%w: lease %d on %q reached its deadline: %s", ErrLeaseLost, l.token, l.key, why))
}

// lose ends the lease as lost, unless it has ended already.
func (l *Lease) lose(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked(err)
}

func (l *Lease) loseLocked(err error) {
	if l.err != nil {
		return
	}
	l.err = err
	l.stopLocked()
	close(l.lost)
	// Cancelling runs no callback on this goroutine (context.AfterFunc
	// starts its own), so it is safe under mu.
	l.cancel(err)
}

func (l *Lease) stopLocked() {
	close(l.stop)
	if l.timer != nil {
		l.timer.Stop()
	}
}

// run is the keep-alive goroutine: it renews the lease when due, and
// retries a failed renewal every quarter period, until the lease ends.
func (l *Lease) run() {
	defer close(l.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		l.mu.Lock()
		at, every := l.renewAt, l.every
		l.mu.Unlock()
		t.Reset(time.Until(at))
		select {
		case <-l.stop:
			return
		case <-l.kick:
			continue
		case <-t.C:
		}
		l.mu.Lock()
		ttl, deadline := l.ttl, l.deadline
		l.mu.Unlock()
		// A renewal answered after the deadline is no use: the lease
		// counts as lost by then.
		ctx, cancel := context.WithDeadline(l.ctx, deadline)
		ok, err := l.extend(ctx, ttl, false)
		cancel()
		if !ok && err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrReleased) {
			l.mu.Lock()
			l.renewAt = time.Now().Add(max(every/4, time.Millisecond))
			l.mu.Unlock()
		}
	}
}
