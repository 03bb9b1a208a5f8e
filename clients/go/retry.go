package leasehold

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

// The pauses between this package's own attempts at a call that a cluster
// in transition refused (TRYAGAIN) or left unknown (UNCERTAIN): the first,
// doubling up to the last, each drawn at random between half and all of
// it, so that the clients of one cluster do not come back in step. The cap
// is short next to an election (about 1-2 s at Raft's defaults), so that a
// call goes on within a quarter of a second of the new leader's term.
const (
	retryFirstPause = 25 * time.Millisecond
	retryMaxPause   = 250 * time.Millisecond
)

// effect says what may be done again with a command whose outcome a
// cluster left in doubt.
type effect int

const (
	// readOnly: VERIFY, STATUS and other reads. A TRYAGAIN is retried;
	// the server never answers UNCERTAIN to a read.
	readOnly effect = iota
	// idempotent: a change that is safe to send again after UNCERTAIN,
	// because a second one finds the first's effect and does no more:
	// ACQUIRE with an OWNER (the same lease and token come back), RELEASE
	// and EXTEND of a token, CREATE, DELETE, FORCE-RELEASE of one token.
	idempotent
	// once: a change that must not be sent twice (FORCE-RELEASE of every
	// lease, which a second time would end leases granted in between): a
	// TRYAGAIN is retried (nothing ran), an UNCERTAIN ends the call.
	once
)

// isTryAgain reports a TRYAGAIN reply: no cluster leader was ready and
// nothing ran.
func isTryAgain(err error) bool { return redis.HasErrorPrefix(err, "TRYAGAIN ") }

// isUncertain reports an UNCERTAIN reply: the leader was lost while the
// change was on its way, which may or may not have been applied.
func isUncertain(err error) bool { return redis.HasErrorPrefix(err, "UNCERTAIN ") }

// settled reports whether err says what a command did: no error, nil, or a
// reply of the server's other than TRYAGAIN and UNCERTAIN. A connection
// error or a context's says nothing of the command's effect.
func settled(err error) bool {
	var re redis.Error
	switch {
	case err == nil, errors.Is(err, redis.Nil):
		return true
	case errors.As(err, &re):
		return !isTryAgain(err) && !isUncertain(err)
	}
	return false
}

// attempt is what retry learns of one try of a call.
type attempt struct {
	sent time.Time // when it was sent
	err  error     // its error, nil when it succeeded
}

// retry makes one call of this package: it runs try, and again after a
// pause while the cluster answers TRYAGAIN (and, for an idempotent change,
// UNCERTAIN), until an answer settles the call, ctx is done, or
// Config.RetryTimeout since the first try would be past before the next.
// Each try is bounded by the read timeout, and go-redis's own retries run
// inside it (see "Clusters" in the package doc).
//
// It returns the last try and whether an earlier one ended UNCERTAIN, which
// the caller weighs: a RELEASE that then finds no lease released it all the
// same. When the call ends without a settled answer after an UNCERTAIN, its
// error wraps ErrUncertain.
func (c *Client) retry(ctx context.Context, eff effect, what string, try func(ctx context.Context) error) (last attempt, uncertain bool, err error) {
	first := time.Now()
	pause := retryFirstPause
	for {
		last.sent = time.Now()
		tctx, cancel := c.callContext(ctx, 0)
		last.err = try(tctx)
		cancel()
		switch {
		case settled(last.err):
			return last, uncertain, last.err
		case isUncertain(last.err) && eff != readOnly:
			uncertain = true
			if eff == once {
				return last, true, fmt.Errorf("%w: %s: %w", ErrUncertain, what, last.err)
			}
		case !isTryAgain(last.err) && !isUncertain(last.err):
			// A connection's error (go-redis has spent its retries) or the
			// context's: not this package's to retry.
			return last, uncertain, c.doubt(uncertain, what, last.err)
		}
		d := pause/2 + rand.N(pause/2+1)
		pause = min(2*pause, retryMaxPause)
		if c.cfg.RetryTimeout <= 0 || time.Since(first)+d > c.cfg.RetryTimeout {
			return last, uncertain, c.doubt(uncertain, what, last.err)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return last, uncertain, c.doubt(uncertain, what, last.err)
		}
	}
}

// doubt is the error of a call that ended unsettled: it wraps ErrUncertain
// when an earlier try's outcome was unknown.
func (c *Client) doubt(uncertain bool, what string, err error) error {
	if !uncertain {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrUncertain, what, err)
}

// doRetry runs one command that does not block on the server, through
// retry, and returns its last try's reply.
func (c *Client) doRetry(ctx context.Context, eff effect, args ...any) (cmd *redis.Cmd, sent time.Time, uncertain bool) {
	what := fmt.Sprint(args[0])
	var err error
	last, uncertain, err := c.retry(ctx, eff, what, func(ctx context.Context) error {
		cmd = c.rdb.Do(ctx, args...)
		return cmd.Err()
	})
	if err != cmd.Err() {
		cmd.SetErr(err)
	}
	return cmd, last.sent, uncertain
}
