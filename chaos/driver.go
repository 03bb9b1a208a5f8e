//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

func init() {
	// go-redis logs failed dials; a run kills nodes on purpose.
	redis.SetLogger(quiet{})
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

// Conn sends commands to one node for one client, one at a time.
type Conn interface {
	Do(ctx context.Context, args ...interface{}) (interface{}, error)
	Close() error
}

// Target is what the driver talks to: a number of nodes, any of which
// accepts every command.
type Target interface {
	Nodes() int
	// Dial returns client's connection to node; the driver closes it.
	Dial(client, node int) Conn
}

// KeySpec is a key the workload uses.
type KeySpec struct {
	Name    string
	Limit   int  // a semaphore's permits (made by CREATE ... LIMIT); 0: a lock
	Created bool // made by CREATE before the run; else made on the fly by ACQUIRE
}

// Workload says what the clients do.
type Workload struct {
	Clients   int
	Keys      []KeySpec
	MaxOps    int           // over all clients
	TTLMin    time.Duration // lease ttls are drawn from [TTLMin, TTLMax]
	TTLMax    time.Duration
	MaxWait   time.Duration // ACQUIRE ... WAIT up to this (0: none)
	OpTimeout time.Duration // a reply later than this (after WAIT) is an unknown outcome
	Pace      time.Duration // the longest pause between a client's operations
	Seed      int64
}

// DefaultKeys: an exclusive/shared lock made by CREATE, one made on the fly,
// and a semaphore of 2 permits.
func DefaultKeys() []KeySpec {
	return []KeySpec{{Name: "chaos-lock-a", Created: true}, {Name: "chaos-lock-b"}, {Name: "chaos-sem", Limit: 2, Created: true}}
}

// DriverStats counts what the driver saw.
type DriverStats struct {
	Ops        int            // operations sent
	ByKind     map[string]int // by command
	Granted    int
	MGranted   int               // of them, MACQUIREs (each counted once, not per key)
	Unknown    int               // writes of unknown outcome
	Refused    int               // not executed: TRYAGAIN, SHUTDOWN, a dial failure
	Unexpected map[string]int    // error replies the workload should not get, by first word
	Sample     map[string]string // one such reply of each word, with its command
}

// Setup makes the keys that must exist (CREATE); it retries, on the next
// node each time, until ctx ends, since the target may still be electing a
// leader.
func Setup(ctx context.Context, t Target, keys []KeySpec) error {
	conns := make([]Conn, t.Nodes())
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	attempt := 0
	for _, k := range keys {
		if !k.Created {
			continue
		}
		args := []interface{}{"CREATE", k.Name}
		if k.Limit > 0 {
			args = append(args, "LIMIT", k.Limit)
		}
		for {
			node := attempt % t.Nodes()
			if conns[node] == nil {
				conns[node] = t.Dial(-1, node)
			}
			octx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := conns[node].Do(octx, args...)
			cancel()
			if err == nil {
				break
			}
			attempt++
			if !sleep(ctx, 50*time.Millisecond) {
				return fmt.Errorf("chaos: CREATE %s: %w", k.Name, err)
			}
		}
	}
	return nil
}

// outcome sorts a reply error.
type outcome int

const (
	known   outcome = iota // a reply (nil included)
	refused                // certainly not executed
	open                   // may or may not have been executed
)

func classify(err error) (outcome, string) {
	if err == nil || errors.Is(err, redis.Nil) {
		return known, ""
	}
	msg := err.Error()
	var rerr redis.Error
	if errors.As(err, &rerr) {
		word, _, _ := strings.Cut(msg, " ")
		switch word {
		case "TRYAGAIN", "SHUTDOWN", "CLUSTERDOWN", "LOADING":
			return refused, word
		case "UNCERTAIN", "MISCONF":
			return open, word
		}
		// Any other error reply is a refusal before the command ran (a
		// usage error, ERR for what a server does not support yet); if one
		// ever hid an executed write, the checkers would say so.
		return refused, "unexpected " + word
	}
	if strings.Contains(msg, "connect: ") || strings.Contains(msg, "dial tcp") {
		// The connection was never made, so nothing was sent.
		return refused, "dial"
	}
	return open, "io"
}

// Drive runs the workload against t until ctx ends or MaxOps are sent,
// recording every operation in h.
func Drive(ctx context.Context, t Target, w Workload, h *History) DriverStats {
	var (
		mu    sync.Mutex
		stats = DriverStats{ByKind: map[string]int{}, Unexpected: map[string]int{}, Sample: map[string]string{}}
		sent  int
	)
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if w.MaxOps > 0 && sent >= w.MaxOps {
			return false
		}
		sent++
		return true
	}
	record := func(o Op, oc outcome, why string) {
		mu.Lock()
		stats.Ops++
		if len(o.With) > 0 {
			stats.ByKind["MACQUIRE"]++
		} else {
			stats.ByKind[o.Kind.String()]++
		}
		switch {
		case oc == refused:
			stats.Refused++
		case oc == open:
			stats.Unknown++
		case o.granted():
			stats.Granted++
			if len(o.With) > 0 {
				stats.MGranted++
			}
		}
		if word, ok := strings.CutPrefix(why, "unexpected "); ok {
			stats.Unexpected[word]++
			if _, seen := stats.Sample[word]; !seen {
				stats.Sample[word] = o.String()
			}
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := 0; i < w.Clients; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			c := &client{id: id, w: w, t: t, h: h, rng: rand.New(rand.NewSource(w.Seed + int64(id)*7919)), conns: map[int]Conn{}, node: id % t.Nodes()}
			defer c.close()
			for ctx.Err() == nil && take() {
				o, oc, why := c.next(ctx)
				record(o, oc, why)
				if oc == refused {
					// Nothing listens (a node down) or it is electing: a short
					// pause, not a storm of dials.
					sleep(ctx, 50*time.Millisecond)
				} else if w.Pace > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(time.Duration(c.rng.Int63n(int64(w.Pace)))):
					}
				}
			}
		}(i)
	}
	wg.Wait()
	return stats
}

type heldLease struct {
	key    KeySpec
	token  uint64
	owner  string
	shared bool
	until  time.Time // by the client's clock: call + ttl
}

type client struct {
	id    int
	w     Workload
	t     Target
	h     *History
	rng   *rand.Rand
	conns map[int]Conn
	node  int
	seq   int
	held  []heldLease
	stale []heldLease // leases released or run out, to VERIFY now and then
	retry *Op         // an ACQUIRE of unknown outcome to send again with its OWNER
}

func (c *client) close() {
	for _, cn := range c.conns {
		cn.Close()
	}
}

// ttl draws a lease ttl, in whole milliseconds as the wire carries it.
func (c *client) ttl() time.Duration {
	d := c.w.TTLMin
	if c.w.TTLMax > c.w.TTLMin {
		d += time.Duration(c.rng.Int63n(int64(c.w.TTLMax - c.w.TTLMin)))
	}
	return max(d.Truncate(time.Millisecond), time.Millisecond)
}

func (c *client) forget(i int) {
	c.stale = append(c.stale, c.held[i])
	if len(c.stale) > 8 {
		c.stale = c.stale[1:]
	}
	c.held = append(c.held[:i], c.held[i+1:]...)
}

// next picks an operation, sends it, records it, and updates what the client
// believes it holds.
func (c *client) next(ctx context.Context) (Op, outcome, string) {
	now := time.Now()
	for i := len(c.held) - 1; i >= 0; i-- {
		if now.After(c.held[i].until) {
			c.forget(i)
		}
	}
	var o Op
	r := c.rng.Float64()
	switch {
	case c.retry != nil:
		o = *c.retry
		o.Unknown, o.Return, o.Result, o.Err = false, 0, 0, ""
		c.retry = nil
	case len(c.held) > 0 && r < 0.5:
		i := c.rng.Intn(len(c.held))
		l := c.held[i]
		o = Op{Key: l.key.Name, Limit: l.key.Limit, Created: l.key.Created, Token: l.token}
		switch r := c.rng.Float64(); {
		case r < 0.3:
			o.Kind = Verify
		case r < 0.6:
			o.Kind, o.TTL = Extend, c.ttl()
		default:
			o.Kind = Release
		}
	case len(c.stale) > 0 && r < 0.55:
		l := c.stale[c.rng.Intn(len(c.stale))]
		o = Op{Kind: Verify, Key: l.key.Name, Limit: l.key.Limit, Created: l.key.Created, Token: l.token}
	case r < 0.6:
		k := c.w.Keys[c.rng.Intn(len(c.w.Keys))]
		o = Op{Kind: Status, Key: k.Name, Limit: k.Limit, Created: k.Created}
	case len(c.w.Keys) > 1 && r < 0.65:
		return c.macquire(ctx)
	default:
		k := c.w.Keys[c.rng.Intn(len(c.w.Keys))]
		o = Op{Kind: Acquire, Key: k.Name, Limit: k.Limit, Created: k.Created, TTL: c.ttl()}
		c.seq++
		if c.rng.Float64() < 0.85 {
			o.Owner = fmt.Sprintf("c%d-%d", c.id, c.seq)
		}
		o.Shared = k.Limit == 0 && c.rng.Float64() < 0.3
		c.waitAndPriority(&o)
	}
	o.Client = c.id
	oc, why := c.send(ctx, &o)
	if oc != refused {
		c.h.Add(o)
	}
	c.learn(o, oc)
	if oc != known {
		c.node = (c.node + 1) % c.t.Nodes() // try another node next
	}
	return o, oc, why
}

// macquire sends a MACQUIRE of two keys in a random order, SHARED when both
// are locks, now and then with WAIT and PRIORITY, and records it as an
// ACQUIRE per key (see Op.With). It has no OWNER: a retry of one whose
// outcome is unknown is left to the single-key ACQUIREs.
func (c *client) macquire(ctx context.Context) (Op, outcome, string) {
	picked := c.rng.Perm(len(c.w.Keys))[:2]
	keys := []KeySpec{c.w.Keys[picked[0]], c.w.Keys[picked[1]]}
	base := Op{Kind: Acquire, Client: c.id, TTL: c.ttl()}
	base.Shared = keys[0].Limit == 0 && keys[1].Limit == 0 && c.rng.Float64() < 0.3
	c.waitAndPriority(&base)
	args := acquireOptions([]interface{}{"MACQUIRE", base.TTL.Milliseconds(), len(keys), keys[0].Name, keys[1].Name}, base)
	reply, oc, why, err := c.call(ctx, &base, args)
	var tokens []interface{}
	switch {
	case oc != known, errors.Is(err, redis.Nil):
	default:
		tokens, _ = reply.([]interface{})
		if len(tokens) != len(keys) {
			// Not the reply MACQUIRE gives: the summary reports it with
			// the unexpected replies.
			oc, why = refused, "unexpected MACQUIRE-reply"
		}
	}
	ops := make([]Op, len(keys))
	for i, k := range keys {
		o := base
		o.Key, o.Limit, o.Created = k.Name, k.Limit, k.Created
		o.With = []string{keys[1-i].Name}
		if tokens != nil && oc == known {
			o.Result = toUint(tokens[i])
		}
		ops[i] = o
		if oc != refused {
			c.h.Add(o)
		}
		c.learn(o, oc)
	}
	if oc != known {
		c.node = (c.node + 1) % c.t.Nodes()
	}
	return ops[0], oc, why
}

// waitAndPriority draws an ACQUIRE's or MACQUIRE's WAIT (30%, if the
// workload waits) and PRIORITY (20%).
func (c *client) waitAndPriority(o *Op) {
	if c.w.MaxWait > 0 && c.rng.Float64() < 0.3 {
		o.Wait = time.Duration(c.rng.Int63n(int64(c.w.MaxWait))).Truncate(time.Millisecond)
	}
	if c.rng.Float64() < 0.2 {
		o.Priority = c.rng.Intn(4)
	}
}

// acquireOptions appends o's WAIT, PRIORITY and SHARED to args, as ACQUIRE
// and MACQUIRE take them.
func acquireOptions(args []interface{}, o Op) []interface{} {
	if o.Wait > 0 {
		args = append(args, "WAIT", o.Wait.Milliseconds())
	}
	if o.Priority != 0 {
		args = append(args, "PRIORITY", o.Priority)
	}
	if o.Shared {
		args = append(args, "SHARED")
	}
	return args
}

func (c *client) conn() Conn {
	cn := c.conns[c.node]
	if cn == nil {
		cn = c.t.Dial(c.id, c.node)
		c.conns[c.node] = cn
	}
	return cn
}

// call sends args for o within its timeout (plus its WAIT), sets its call
// and return times, sorts the error, and marks o unknown when the outcome
// is.
func (c *client) call(ctx context.Context, o *Op, args []interface{}) (interface{}, outcome, string, error) {
	octx, cancel := context.WithTimeout(ctx, c.w.OpTimeout+o.Wait)
	defer cancel()
	o.Call = c.h.Now()
	reply, err := c.conn().Do(octx, args...)
	o.Return = c.h.Now()
	oc, why := classify(err)
	if oc != known {
		o.Unknown, o.Err = true, err.Error()
	}
	return reply, oc, why, err
}

// send runs o and fills in its times and result.
func (c *client) send(ctx context.Context, o *Op) (outcome, string) {
	args := []interface{}{o.Kind.String(), o.Key}
	switch o.Kind {
	case Acquire:
		args = append(args, o.TTL.Milliseconds())
		if o.Owner != "" {
			args = append(args, "OWNER", o.Owner)
		}
		args = acquireOptions(args, *o)
	case Extend:
		args = append(args, o.Token, o.TTL.Milliseconds())
	case Release, Verify:
		args = append(args, o.Token)
	}
	reply, oc, why, err := c.call(ctx, o, args)
	if oc != known {
		return oc, why
	}
	if errors.Is(err, redis.Nil) {
		reply = nil
	}
	switch o.Kind {
	case Acquire:
		if reply != nil {
			o.Result = toUint(reply)
		}
	case Status:
		if reply == nil {
			o.Nil = true
		} else {
			o.Result = lastToken(reply)
		}
	default:
		o.OK = toUint(reply) == 1
	}
	return known, ""
}

// learn updates what the client holds after o.
func (c *client) learn(o Op, oc outcome) {
	key := KeySpec{Name: o.Key, Limit: o.Limit, Created: o.Created}
	idx := -1
	for i, l := range c.held {
		if l.token == o.Token && l.key.Name == o.Key {
			idx = i
		}
	}
	switch o.Kind {
	case Acquire:
		switch {
		case oc == open && o.Owner != "" && c.rng.Float64() < 0.5:
			c.retry = &o // the OWNER makes a retry safe: it gets the lease back if it was granted
		case o.granted():
			for _, l := range c.held {
				if l.token == o.Result && l.key.Name == o.Key {
					return
				}
			}
			c.held = append(c.held, heldLease{key: key, token: o.Result, owner: o.Owner, shared: o.Shared, until: c.h.At(o.Call).Add(o.TTL)})
		}
	case Extend:
		if idx >= 0 {
			switch {
			case oc == known && o.OK:
				c.held[idx].until = c.h.At(o.Call).Add(o.TTL)
			case oc == known, oc == open:
				c.forget(idx)
			}
		}
	case Release, Verify:
		if idx >= 0 && (o.Kind == Release && oc != refused || oc == known && !o.OK) {
			c.forget(idx)
		}
	}
}

func toUint(v interface{}) uint64 {
	switch x := v.(type) {
	case int64:
		return uint64(x)
	case string:
		n, _ := strconv.ParseUint(x, 10, 64)
		return n
	case uint64:
		return x
	}
	return 0
}

// lastToken reads last-token out of STATUS's field/value pairs.
func lastToken(v interface{}) uint64 {
	a, _ := v.([]interface{})
	for i := 0; i+1 < len(a); i += 2 {
		if s, _ := a[i].(string); s == "last-token" {
			return toUint(a[i+1])
		}
	}
	return 0
}

// RedisTarget is a Target of leasehold nodes at addresses, through go-redis.
type RedisTarget struct {
	Addrs   []string
	Timeout time.Duration // read timeout ceiling; each operation's context bounds it further
}

// Nodes implements Target.
func (r *RedisTarget) Nodes() int { return len(r.Addrs) }

// Dial implements Target: a connection of its own, no retries of its own
// (a retry is the driver's decision), RESP2.
func (r *RedisTarget) Dial(_, node int) Conn {
	return redisConn{redis.NewClient(&redis.Options{
		Addr:                  r.Addrs[node],
		Protocol:              2,
		DisableIdentity:       true,
		PoolSize:              1,
		MaxRetries:            -1,
		DialTimeout:           300 * time.Millisecond,
		ReadTimeout:           r.Timeout,
		WriteTimeout:          r.Timeout,
		ContextTimeoutEnabled: true,
	})}
}

type redisConn struct{ c *redis.Client }

func (r redisConn) Do(ctx context.Context, args ...interface{}) (interface{}, error) {
	return r.c.Do(ctx, args...).Result()
}

func (r redisConn) Close() error { return r.c.Close() }
