package leasehold

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CreateOption sets one of Create's options.
type CreateOption func(*createOptions)

type createOptions struct {
	ttl          time.Duration
	lockDelay    time.Duration
	setLockDelay bool
	limit        int
}

// DefaultTTL gives the lock a default lease ttl (CREATE ... TTL), used by
// an ACQUIRE that names none.
func DefaultTTL(d time.Duration) CreateOption { return func(o *createOptions) { o.ttl = d } }

// LockDelay gives the lock its own lock-delay (CREATE ... LOCKDELAY), in
// place of the server's --lock-delay; 0 turns the delay off for this lock.
func LockDelay(d time.Duration) CreateOption {
	return func(o *createOptions) { o.lockDelay, o.setLockDelay = d, true }
}

// Limit makes the lock a semaphore of n permits (CREATE ... LIMIT): up to n
// leases hold it at once, each Acquire taking one.
func Limit(n int) CreateOption { return func(o *createOptions) { o.limit = n } }

// Create makes the lock key, which then stays when free until Delete (a lock
// ACQUIRE makes on the fly disappears once free). It reports true when it
// made the lock, or adopted one made on the fly, with these settings; false
// when a created lock of that name exists already, which it leaves as it
// is (compare Status's DefaultTTL, LockDelay and Limit). Limit on a lock
// made on the fly that a lease holds returns an error wrapping ErrInUse.
//
// A cluster's TRYAGAIN and UNCERTAIN are retried; a CREATE sent again after
// an UNCERTAIN that finds the lock created reports true, as the first one
// may have made it (its settings may then be another's: compare Status).
// When the retries run out after an UNCERTAIN, the error wraps
// ErrUncertain.
func (c *Client) Create(ctx context.Context, key string, opts ...CreateOption) (bool, error) {
	var o createOptions
	for _, opt := range opts {
		opt(&o)
	}
	args := []any{"CREATE", key}
	if o.ttl != 0 {
		ms, err := millis("default ttl", o.ttl)
		if err != nil {
			return false, err
		}
		args = append(args, "TTL", ms)
	}
	if o.setLockDelay {
		if o.lockDelay < 0 {
			return false, fmt.Errorf("leasehold: lock-delay must not be negative, got %s", o.lockDelay)
		}
		ms := int64(0)
		if o.lockDelay > 0 {
			ms, _ = millis("lock-delay", o.lockDelay)
		}
		args = append(args, "LOCKDELAY", ms)
	}
	if o.limit != 0 {
		args = append(args, "LIMIT", o.limit)
	}
	cmd, _, uncertain := c.doRetry(ctx, idempotent, args...)
	n, err := cmd.Int()
	if err != nil {
		return false, fmt.Errorf("leasehold: create %q: %w", key, inUse(err))
	}
	return n == 1 || uncertain, nil
}

// Delete removes the lock key. It reports false when the server does not
// know the lock; a lock that a lease holds, that requests wait for, or that
// is in its lock-delay is not deleted: the error wraps ErrInUse.
//
// A cluster's TRYAGAIN and UNCERTAIN are retried; a DELETE sent again after
// an UNCERTAIN that finds no lock reports true, as the first one may have
// removed it. When the retries run out after an UNCERTAIN, the error wraps
// ErrUncertain.
func (c *Client) Delete(ctx context.Context, key string) (bool, error) {
	cmd, _, uncertain := c.doRetry(ctx, idempotent, "DELETE", key)
	n, err := cmd.Int()
	if err != nil {
		return false, fmt.Errorf("leasehold: delete %q: %w", key, inUse(err))
	}
	return n == 1 || uncertain, nil
}

// ForceRelease is the operator's override (FORCE-RELEASE): it ends the lease
// token names on key whoever holds it, or with token 0 (no lease has it)
// every lease of the lock, and a lock-delay in progress. It returns how many
// it ended, lock-delays included. Waiters are then granted as after a
// release, with higher tokens; the old holder learns of it only when its
// next call on the lease fails, as after an expiry.
//
// A cluster's TRYAGAIN is retried. After an UNCERTAIN, a FORCE-RELEASE of
// one token is sent again (the count then leaves out the lease the first
// one may have ended), while one of every lease (token 0) is not, since it
// would also end leases granted in between: it returns an error wrapping
// ErrUncertain at once.
func (c *Client) ForceRelease(ctx context.Context, key string, token uint64) (int, error) {
	args := []any{"FORCE-RELEASE", key}
	eff := once // a second FORCE-RELEASE of every lease would end those granted in between
	if token != 0 {
		args = append(args, token)
		eff = idempotent
	}
	cmd, _, _ := c.doRetry(ctx, eff, args...)
	n, err := cmd.Int()
	if err != nil {
		return 0, fmt.Errorf("leasehold: force-release %q: %w", key, err)
	}
	return n, nil
}

// inUse makes the server's INUSE reply an error that wraps ErrInUse too.
func inUse(err error) error {
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "INUSE ") {
		return fmt.Errorf("%w: %w", ErrInUse, err)
	}
	return err
}

// locksPage is how many names one LOCKS call asks for.
const locksPage = 1000

// Locks iterates over the names of the server's locks that match pattern
// (Redis's glob rules; "" or "*" for all), LOCKS's cursor from start to end,
// a page of names per call. A lock that exists for the whole iteration is
// yielded exactly once; one created or removed meanwhile may or may not be.
// An error ends the iteration, yielded with an empty name. A cluster's
// TRYAGAIN is retried.
func (c *Client) Locks(ctx context.Context, pattern string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		cursor := "0"
		for {
			args := []any{"LOCKS", cursor, "COUNT", locksPage}
			if pattern != "" && pattern != "*" {
				args = append(args, "MATCH", pattern)
			}
			cmd, _, _ := c.doRetry(ctx, readOnly, args...)
			reply, err := cmd.Slice()
			if err != nil {
				yield("", fmt.Errorf("leasehold: locks: %w", err))
				return
			}
			next, names, err := parseLocks(reply)
			if err != nil {
				yield("", fmt.Errorf("leasehold: LOCKS answered %v: %w", reply, err))
				return
			}
			for _, name := range names {
				if !yield(name, nil) {
					return
				}
			}
			if next == "0" {
				return
			}
			cursor = next
		}
	}
}

func parseLocks(reply []any) (cursor string, names []string, err error) {
	if len(reply) != 2 {
		return "", nil, fmt.Errorf("%d elements, want 2", len(reply))
	}
	cursor, ok := reply[0].(string)
	list, ok2 := reply[1].([]any)
	if !ok || !ok2 {
		return "", nil, errors.New("not a cursor and a list")
	}
	names = make([]string, 0, len(list))
	for _, v := range list {
		name, ok := v.(string)
		if !ok {
			return "", nil, fmt.Errorf("name %v is a %T", v, v)
		}
		names = append(names, name)
	}
	return cursor, names, nil
}

// holdersPage is how many holders one HOLDERS call of Holders asks for:
// the most the server gives.
const holdersPage = 1000

// Holders iterates over the live leases of the lock key, oldest first,
// HOLDERS's cursor from start to end, a page per call: Status lists the
// first 100 only. A lease live for the whole iteration is yielded exactly
// once, as is one granted meanwhile; one that ends meanwhile may or may not
// be. An unknown lock yields nothing. An error ends the iteration, yielded
// with a zero Holder. A cluster's TRYAGAIN is retried.
func (c *Client) Holders(ctx context.Context, key string) iter.Seq2[Holder, error] {
	return func(yield func(Holder, error) bool) {
		for cursor := uint64(0); ; {
			next, hs, err := c.HoldersPage(ctx, key, cursor, holdersPage)
			if err != nil {
				yield(Holder{}, err)
				return
			}
			for _, h := range hs {
				if !yield(h, nil) {
					return
				}
			}
			if next == 0 {
				return
			}
			cursor = next
		}
	}
}

// HoldersPage is one HOLDERS call: up to count (1 to 1000) of the lock's
// live leases whose tokens come after cursor, oldest first, and the cursor
// to pass next, 0 once there are no more. Start with cursor 0. A page may
// hold fewer than count leases, even none, before the end: the server looks
// at count holders a call, expired ones in their lock-delay included, and
// ends a page once its owners pass a megabyte.
func (c *Client) HoldersPage(ctx context.Context, key string, cursor uint64, count int) (next uint64, holders []Holder, err error) {
	cmd, _, _ := c.doRetry(ctx, readOnly, "HOLDERS", key, cursor, "COUNT", count)
	reply, err := cmd.Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("leasehold: holders %q: %w", key, err)
	}
	if len(reply) != 2 {
		return 0, nil, fmt.Errorf("leasehold: HOLDERS %q answered %d elements, want 2", key, len(reply))
	}
	cur, _ := reply[0].(string)
	if next, err = strconv.ParseUint(cur, 10, 64); err != nil {
		return 0, nil, fmt.Errorf("leasehold: HOLDERS %q: cursor: %w", key, err)
	}
	if holders, err = parseHolders(reply[1]); err != nil {
		return 0, nil, fmt.Errorf("leasehold: HOLDERS %q: %w", key, err)
	}
	return next, holders, nil
}

// Info is the server's INFO: each section's fields by name, the sections
// named in lower case ("server", "clients", "memory", "stats", "locks",
// "persistence"). Every value is a string, as INFO sends it.
type Info map[string]map[string]string

// Info returns the server's INFO sections (as the server's INFO takes
// them: none for its default set, "all" for every one).
func (c *Client) Info(ctx context.Context, sections ...string) (Info, error) {
	args := []any{"INFO"}
	for _, s := range sections {
		args = append(args, s)
	}
	text, err := c.do(ctx, args...).Text()
	if err != nil {
		return nil, fmt.Errorf("leasehold: info: %w", err)
	}
	return parseInfo(text), nil
}

// parseInfo reads INFO's text: "# Section" lines, then "field:value" lines.
func parseInfo(text string) Info {
	info := Info{}
	var section map[string]string
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
		case strings.HasPrefix(line, "#"):
			section = map[string]string{}
			info[strings.ToLower(strings.TrimSpace(line[1:]))] = section
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok || section == nil {
				continue
			}
			section[name] = value
		}
	}
	return info
}
