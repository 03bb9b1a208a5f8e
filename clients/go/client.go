package leasehold

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultAddr is the server's default address.
const DefaultAddr = "127.0.0.1:7379"

// Config holds every setting of a Client. Build it from DefaultConfig.
type Config struct {
	// Redis holds the connection settings as go-redis takes them: Addr,
	// Username and Password (for a server started with a password: every
	// connection sends AUTH; without Username, as the "default" user),
	// TLSConfig (every connection speaks TLS: those of a waiting Acquire
	// and of CLIENT UNBLOCK too), Dialer, DialTimeout, ReadTimeout,
	// WriteTimeout, PoolSize, MaxRetries and the rest. New uses it;
	// NewFromRedis ignores it. This package reads no environment variable
	// and never logs the password.
	//
	// ReadTimeout (go-redis's default 5s when 0, none when -1) bounds each
	// try of a call of this package, go-redis's retries included (a call
	// tries again while a cluster answers TRYAGAIN or UNCERTAIN, within
	// RetryTimeout), and for a waiting Acquire it is added to the wait.
	// New enforces it through context deadlines, so it sets
	// ContextTimeoutEnabled and leaves no read timeout on the sockets
	// themselves: a blocking ACQUIRE ... WAIT then shares the pool with the
	// rest, as go-redis does for BLPOP.
	Redis redis.Options
	// Addrs, when not empty, lists the servers to connect to, in place of
	// Redis.Addr: the nodes of one leasehold cluster, each HOST:PORT (an
	// IPv6 host in brackets, [::1]:7379). Every connection (those of a
	// waiting Acquire and of CLIENT UNBLOCK too) goes to the first address
	// that accepts it, starting at the one that last did; an address that
	// fails is passed over by the next connection. Each address gets
	// Redis.DialTimeout (go-redis's 5s when 0) to connect, and the TLS
	// handshake within it; with TLSConfig and no ServerName in it, each is
	// verified against its own host. A Redis.Dialer, if set, is called for
	// each address in turn (and does the TLS itself, as in go-redis). When
	// all addresses fail, the error is a *DialError naming each.
	//
	// Only list the nodes of one cluster. Independent single-node servers
	// do not know of each other's locks: with a list of them, a client that
	// fails over takes a lock on the second server that someone else holds
	// on the first. See "Several addresses" in the package doc.
	Addrs []string
	// RenewFraction is how often a lease is renewed, as a fraction of its
	// ttl, counted from when the last renewal was sent: 1/3 renews a 30s
	// lease every 10s. A failed renewal is retried every quarter of that.
	RenewFraction float64
	// MarginFraction is how much of the ttl before the estimated deadline
	// a lease counts as lost when no renewal has been confirmed: 0.1 gives
	// up a 30s lease 3s early. It covers the holder's reaction time and
	// the drift between the client's and the server's clocks; a renewal
	// must fit before it, so RenewFraction + MarginFraction < 1.
	MarginFraction float64
	// RetryTimeout bounds how long one call goes on sending its command
	// again while a cluster answers TRYAGAIN (no leader is ready: an
	// election) or, for a change that is safe to repeat, UNCERTAIN (the
	// leader was lost mid-way): no new try starts later than this after
	// the first, and the context bounds them all. Each try has the read
	// timeout, so a call lasts at most about RetryTimeout plus
	// Redis.ReadTimeout. 0 retries neither. See "Clusters" in the package
	// doc.
	RetryTimeout time.Duration
}

// DefaultConfig returns a Config with every default set: the server at
// DefaultAddr, go-redis's defaults otherwise, renewal every third of the
// ttl, a margin of a tenth of it, and 10s of retries of a cluster's
// TRYAGAIN and UNCERTAIN, enough for a few elections at Raft's default
// timeouts.
func DefaultConfig() Config {
	return Config{
		Redis:          redis.Options{Addr: DefaultAddr},
		RenewFraction:  1.0 / 3,
		MarginFraction: 0.1,
		RetryTimeout:   10 * time.Second,
	}
}

// Validate reports the first setting out of range; it never changes c.
func (c Config) Validate() error {
	if c.RenewFraction <= 0 || c.RenewFraction >= 1 {
		return fmt.Errorf("leasehold: renew fraction must be between 0 and 1, got %v", c.RenewFraction)
	}
	if c.MarginFraction < 0.01 || c.MarginFraction >= 1 {
		// Some margin is needed: the client's and the server's clocks do
		// not run at exactly the same rate.
		return fmt.Errorf("leasehold: margin fraction must be at least 0.01 and below 1, got %v", c.MarginFraction)
	}
	if c.RetryTimeout < 0 {
		return fmt.Errorf("leasehold: retry timeout must not be negative, got %s", c.RetryTimeout)
	}
	if c.RenewFraction+c.MarginFraction >= 1 {
		return fmt.Errorf("leasehold: renew fraction %v plus margin fraction %v must be below 1: a renewal must be due before the lease counts as lost", c.RenewFraction, c.MarginFraction)
	}
	return nil
}

// validateRedis checks what New needs of the connection settings.
func (c Config) validateRedis() error {
	if len(c.Addrs) > 0 {
		if err := validateAddrs(c.Addrs, c.Redis.Network); err != nil {
			return err
		}
	} else if c.Redis.Addr == "" && c.Redis.Dialer == nil {
		return errors.New("leasehold: no server address (Config.Redis.Addr)")
	}
	if c.Redis.ReadTimeout < -2 {
		return fmt.Errorf("leasehold: read timeout %s: want a positive duration, 0 (the default), -1 or -2", c.Redis.ReadTimeout)
	}
	return nil
}

// Client talks to one leasehold server, or to the nodes of one cluster
// (Config.Addrs). It is safe for concurrent use; close it when done.
type Client struct {
	cfg Config
	// rdb runs every command but a waiting ACQUIRE; wait runs those. They
	// are the same client when New made it. ctl, of one connection, sends
	// CLIENT UNBLOCK for abandoned waits, which may hold every connection
	// of wait's pool; it dials only when first needed.
	rdb, wait, ctl *redis.Client
	// owned are the go-redis clients Close closes.
	owned []*redis.Client
	// readTimeout bounds each call (beyond WAIT); 0 is no bound.
	readTimeout time.Duration
	// waitChunk, when positive, is the longest WAIT a WaitForever sends,
	// instead of the server's max-ttl: tests set it (export_test.go).
	waitChunk time.Duration

	mu        sync.Mutex     // guards closed, and wg.Add against Close's wg.Wait
	closed    bool           // Close was called
	wg        sync.WaitGroup // goroutines collecting abandoned waits
	closeOnce sync.Once
	closeErr  error
}

// goTracked runs f on a goroutine that Close waits for; false, and f does
// not run, once the Client is closed.
func (c *Client) goTracked(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// New validates cfg and returns a Client for the server at cfg.Redis.Addr,
// or the servers of cfg.Addrs. It opens no connection until the first call.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.validateRedis(); err != nil {
		return nil, err
	}
	opts := cfg.Redis
	if len(cfg.Addrs) > 0 {
		if err := FailoverOptions(&opts, cfg.Addrs); err != nil {
			return nil, err
		}
	}
	rt := effectiveReadTimeout(opts.ReadTimeout)
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = durationOption(rt)
	}
	if opts.PoolTimeout == 0 && rt > 0 {
		opts.PoolTimeout = rt + time.Second
	}
	opts.ReadTimeout = -1 // no socket read deadline but the context's
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(&opts)
	ctl := newControlClient(opts)
	return &Client{cfg: cfg, rdb: rdb, wait: rdb, ctl: ctl, owned: []*redis.Client{rdb, ctl}, readTimeout: rt}, nil
}

// newControlClient is a one-connection client with opts's settings, for
// CLIENT UNBLOCK.
func newControlClient(opts redis.Options) *redis.Client {
	opts.PoolSize, opts.MinIdleConns, opts.MaxIdleConns = 1, 0, 1
	return redis.NewClient(&opts)
}

// NewFromRedis returns a Client that runs its commands on rdb, which stays
// the caller's to close (after the Client). cfg.Redis and cfg.Addrs are
// ignored (to fail over, make rdb with FailoverOptions): rdb's own
// options apply, and the context deadlines of this package's calls bound
// them only if rdb has ContextTimeoutEnabled (otherwise its ReadTimeout
// does; Lost still closes on time, since a timer, not the renewal, marks
// the deadline).
//
// A waiting Acquire cannot run on rdb: go-redis offers no way to extend one
// command's read timeout beyond rdb's ReadTimeout. It runs on a second
// go-redis client made from a copy of rdb's options (so without rdb's
// hooks) with no socket read timeout, bounded by context deadlines instead;
// Close closes that one, and the one-connection client that ends abandoned
// waits (CLIENT UNBLOCK), made the same way.
func NewFromRedis(rdb *redis.Client, cfg Config) (*Client, error) {
	if rdb == nil {
		return nil, errors.New("leasehold: NewFromRedis with a nil redis client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := *rdb.Options()
	// rdb's options are go-redis's after its defaults: 0 is no timeout, -1
	// no deadline calls at all.
	rt := max(opts.ReadTimeout, 0)
	// State a client keeps in its options is rdb's own, not to be shared:
	// its push notification processor, its client-side cache (of no use to
	// lock commands anyway).
	opts.PushNotificationProcessor = nil
	opts.ClientSideCache, opts.ClientSideCacheConfig = nil, nil
	opts.ReadTimeout = -1
	opts.ContextTimeoutEnabled = true
	wait := redis.NewClient(&opts)
	ctl := newControlClient(opts)
	return &Client{cfg: cfg, rdb: rdb, wait: wait, ctl: ctl, owned: []*redis.Client{wait, ctl}, readTimeout: rt}, nil
}

// effectiveReadTimeout is the per-call bound a go-redis ReadTimeout option
// means: 0 is go-redis's default of 5s, -1 and -2 none.
func effectiveReadTimeout(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return 5 * time.Second
	case d < 0:
		return 0
	}
	return d
}

// durationOption turns a bound back into a go-redis timeout option, where 0
// means the default and -1 none.
func durationOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// Redis returns the go-redis client that runs this Client's commands, for
// the server's other commands (MACQUIRE, SUBSCRIBE).
func (c *Client) Redis() *redis.Client { return c.rdb }

// Close closes the connections this Client opened and waits for the
// goroutines it owns. It does not release leases: release them first, or
// they run out at their deadlines (their holders see them lost before). It is
// safe to call more than once.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		var errs []error
		for _, r := range c.owned {
			errs = append(errs, r.Close())
		}
		c.wg.Wait() // closing the pools ended their blocked reads
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// callContext bounds one call by the read timeout plus extra (a WAIT).
func (c *Client) callContext(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	if c.readTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.readTimeout+extra)
}

// do runs one command that does not block on the server.
func (c *Client) do(ctx context.Context, args ...any) *redis.Cmd {
	ctx, cancel := c.callContext(ctx, 0)
	defer cancel()
	return c.rdb.Do(ctx, args...)
}

// millis turns a duration into the whole milliseconds the wire takes,
// rounding up, and refuses durations that are not positive.
func millis(what string, d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, fmt.Errorf("leasehold: %s must be positive, got %s", what, d)
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond), nil
}

// Verify reports whether token is a live lease of the lock key. A cluster's
// TRYAGAIN is retried (see "Clusters" in the package doc).
func (c *Client) Verify(ctx context.Context, key string, token uint64) (bool, error) {
	cmd, _, _ := c.doRetry(ctx, readOnly, "VERIFY", key, token)
	n, err := cmd.Int()
	return n == 1, err
}

// Release ends the lease token holds on key. It reports false when token did
// not hold the lock (expired, released, never granted). For a lease taken by
// Acquire, use Lease.Release, which also stops its keep-alive.
//
// A cluster's TRYAGAIN and UNCERTAIN are retried. When a RELEASE sent again
// after an UNCERTAIN finds no lease, Release reports true: the first one
// may have ended it, and either way token holds the lock no more. When
// the retries run out after an UNCERTAIN, the error wraps ErrUncertain.
func (c *Client) Release(ctx context.Context, key string, token uint64) (bool, error) {
	cmd, _, uncertain := c.doRetry(ctx, idempotent, "RELEASE", key, token)
	n, err := cmd.Int()
	return n == 1 || err == nil && uncertain, err
}

// Extend moves the deadline of the lease token holds on key to ttl from now
// (on the server's clock). It reports false when token does not hold the
// lock: an expired lease cannot be extended. For a lease taken by Acquire,
// use Lease.Extend.
//
// A cluster's TRYAGAIN and UNCERTAIN are retried: an EXTEND sent again
// extends from a later moment, which is harmless, and finds the lease gone
// only if it is. When the retries run out after an UNCERTAIN, the error
// wraps ErrUncertain.
func (c *Client) Extend(ctx context.Context, key string, token uint64, ttl time.Duration) (bool, error) {
	ms, err := millis("ttl", ttl)
	if err != nil {
		return false, err
	}
	cmd, _, _ := c.doRetry(ctx, idempotent, "EXTEND", key, token, ms)
	n, err := cmd.Int()
	return n == 1, err
}

// Status is a lock's state as STATUS reports it (see docs/commands.md).
type Status struct {
	State string // "held", "free" or "delayed" (in its lock-delay)
	Token uint64 // the exclusive lease's token; 0 when not held exclusively, or Hidden
	Owner string // the exclusive lease's owner
	// Hidden: the lease is another user's, whose token and owner the
	// server shows only to that user and to admins; LastToken is hidden
	// with it (0). See docs/security.md.
	Hidden     bool
	TTL        time.Duration // time left on the exclusive lease
	LastToken  uint64        // the last token granted for the lock
	DefaultTTL time.Duration // from CREATE ... TTL; 0 for none
	Created    bool          // made by CREATE, rather than on the fly by ACQUIRE
	LockDelay  time.Duration // how long the lock stays ungrantable after a lease expires
	DelayLeft  time.Duration // time left in its lock-delay
	Waiters    int           // requests queued by ACQUIRE ... WAIT
	Limit      int           // a semaphore's permits; 0 for a lock
	Mode       string        // "exclusive", "shared", "permits", or "" when no lease is live
	// Holders is the oldest live leases, oldest first: all of them, or the
	// first 100 when HoldersTotal is larger (Holders reads every one).
	Holders []Holder
	// HoldersTotal counts every live lease of the lock.
	HoldersTotal int
}

// Holder is one live lease of a lock.
type Holder struct {
	Token  uint64 // 0 when Hidden
	Owner  string
	TTL    time.Duration
	Hidden bool // another user's lease, as Status.Hidden
}

// Status returns the lock's state, or ErrUnknownLock. A cluster's TRYAGAIN
// is retried.
func (c *Client) Status(ctx context.Context, key string) (*Status, error) {
	cmd, _, _ := c.doRetry(ctx, readOnly, "STATUS", key)
	reply, err := cmd.Slice()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, fmt.Errorf("%w %q", ErrUnknownLock, key)
	case err != nil:
		return nil, err
	}
	st, err := parseStatus(reply)
	if err != nil {
		return nil, fmt.Errorf("leasehold: STATUS %q: %w", key, err)
	}
	return st, nil
}

// parseStatus reads STATUS's field/value pairs; fields it does not know are
// skipped, for servers newer than this client.
func parseStatus(reply []any) (*Status, error) {
	if len(reply)%2 != 0 {
		return nil, fmt.Errorf("odd number of elements (%d)", len(reply))
	}
	st := &Status{}
	seenTotal := false
	for i := 0; i < len(reply); i += 2 {
		name, _ := reply[i].(string)
		if name == "holders" {
			hs, err := parseHolders(reply[i+1])
			if err != nil {
				return nil, err
			}
			st.Holders = hs
			continue
		}
		val, ok := reply[i+1].(string)
		if !ok {
			continue
		}
		var err error
		switch name {
		case "state":
			st.State = val
		case "token":
			st.Token, st.Hidden, err = parseToken(val)
		case "owner":
			st.Owner = val
		case "ttl":
			st.TTL, err = parseMillis(val)
		case "last-token":
			st.LastToken, _, err = parseToken(val)
		case "default-ttl":
			st.DefaultTTL, err = parseMillis(val)
		case "created":
			st.Created = val == "1"
		case "lock-delay":
			st.LockDelay, err = parseMillis(val)
		case "delay-left":
			st.DelayLeft, err = parseMillis(val)
		case "waiters":
			st.Waiters, err = strconv.Atoi(val)
		case "limit":
			st.Limit, err = strconv.Atoi(val)
		case "mode":
			st.Mode = val
		case "holders-total":
			st.HoldersTotal, err = strconv.Atoi(val)
			seenTotal = true
		}
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", name, err)
		}
	}
	if !seenTotal {
		st.HoldersTotal = len(st.Holders) // a server before holders-total lists them all
	}
	return st, nil
}

func parseHolders(v any) ([]Holder, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("holders is a %T, not an array", v)
	}
	hs := make([]Holder, 0, len(list))
	for _, e := range list {
		pairs, ok := e.([]any)
		if !ok || len(pairs)%2 != 0 {
			return nil, fmt.Errorf("holder %v is not field/value pairs", e)
		}
		var h Holder
		for j := 0; j < len(pairs); j += 2 {
			name, _ := pairs[j].(string)
			val, _ := pairs[j+1].(string)
			var err error
			switch name {
			case "token":
				h.Token, h.Hidden, err = parseToken(val)
			case "owner":
				h.Owner = val
			case "ttl":
				h.TTL, err = parseMillis(val)
			}
			if err != nil {
				return nil, fmt.Errorf("holder field %s: %w", name, err)
			}
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// parseToken reads a token of STATUS or HOLDERS: empty when the server
// hides it from this user.
func parseToken(s string) (token uint64, hidden bool, err error) {
	if s == "" {
		return 0, true, nil
	}
	token, err = strconv.ParseUint(s, 10, 64)
	return token, false, err
}

func parseMillis(s string) (time.Duration, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * time.Millisecond, err
}
