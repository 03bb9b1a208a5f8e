//go:build linux

package chaos

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fault is a bug a Fake server can be told to have, to show the checkers
// catch it (the control runs).
type Fault int

// The faults of a Fake.
const (
	NoFault     Fault = iota
	LowToken          // every Every-th new lease gets a token below the last one
	DoubleGrant       // every Every-th exclusive ACQUIRE ignores the lock's holders
	EarlyExpiry       // leases end at half their ttl
	LostRelease       // every Every-th RELEASE answers 1 and keeps the lease
)

func (f Fault) String() string {
	return [...]string{"none", "low-token", "double-grant", "early-expiry", "lost-release"}[f]
}

// Fake is an in-memory lock server with leasehold's ACQUIRE, RELEASE,
// EXTEND, VERIFY, STATUS and CREATE (no queue: WAIT polls), used to test the
// driver and, with a Fault, the checkers. It is a Target of one node.
type Fake struct {
	Fault Fault
	Every int // how often the fault strikes (0: 5)

	mu    sync.Mutex // guards locks, count
	locks map[string]*fakeLock
	count int
}

type fakeLock struct {
	limit   int
	created bool
	last    uint64
	leases  []fakeLease
}

type fakeLease struct {
	token    uint64
	owner    string
	shared   bool
	deadline time.Time
}

// Nodes implements Target.
func (f *Fake) Nodes() int { return 1 }

// Dial implements Target.
func (f *Fake) Dial(int, int) Conn { return fakeConn{f} }

type fakeConn struct{ f *Fake }

func (c fakeConn) Close() error { return nil }

func (c fakeConn) Do(ctx context.Context, args ...interface{}) (interface{}, error) {
	s := make([]string, len(args))
	for i, a := range args {
		switch x := a.(type) {
		case string:
			s[i] = x
		case int:
			s[i] = strconv.Itoa(x)
		case int64:
			s[i] = strconv.FormatInt(x, 10)
		case uint64:
			s[i] = strconv.FormatUint(x, 10)
		}
	}
	if strings.ToUpper(s[0]) != "ACQUIRE" {
		return c.f.do(s)
	}
	var wait time.Duration
	for i := 3; i+1 < len(s); i++ {
		if s[i] == "WAIT" {
			n, _ := strconv.Atoi(s[i+1])
			wait = time.Duration(n) * time.Millisecond
		}
	}
	end := time.Now().Add(wait)
	for {
		r, err := c.f.do(s)
		if r != nil || err != nil && !errors.Is(err, redis.Nil) || !time.Now().Before(end) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (f *Fake) strike() bool {
	every := f.Every
	if every == 0 {
		every = 5
	}
	f.count++
	return f.count%every == 0
}

func (f *Fake) lock(key string) *fakeLock {
	if f.locks == nil {
		f.locks = map[string]*fakeLock{}
	}
	l := f.locks[key]
	if l == nil {
		l = &fakeLock{last: 100}
		f.locks[key] = l
	}
	now := time.Now()
	kept := l.leases[:0]
	for _, le := range l.leases {
		if now.Before(le.deadline) {
			kept = append(kept, le)
		}
	}
	l.leases = kept
	return l
}

func (f *Fake) deadline(ttl string) time.Time {
	n, _ := strconv.Atoi(ttl)
	d := time.Duration(n) * time.Millisecond
	if f.Fault == EarlyExpiry {
		d /= 2
	}
	return time.Now().Add(d)
}

func (f *Fake) do(s []string) (interface{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lock(s[1])
	find := func() int {
		for i, le := range l.leases {
			if strconv.FormatUint(le.token, 10) == s[2] {
				return i
			}
		}
		return -1
	}
	switch strings.ToUpper(s[0]) {
	case "CREATE":
		l.created = true
		if len(s) == 4 {
			l.limit, _ = strconv.Atoi(s[3])
		}
		return int64(1), nil
	case "ACQUIRE":
		var owner string
		shared := false
		for i := 3; i < len(s); i++ {
			switch s[i] {
			case "OWNER":
				owner = s[i+1]
			case "SHARED":
				shared = true
			}
		}
		if owner != "" {
			for i, le := range l.leases {
				if le.owner == owner {
					l.leases[i].deadline = f.deadline(s[2])
					return int64(le.token), nil
				}
			}
		}
		free := true
		for _, le := range l.leases {
			if l.limit == 0 && (!shared || !le.shared) {
				free = false
			}
		}
		if l.limit > 0 && len(l.leases) >= l.limit {
			free = false
		}
		if !free && !(f.Fault == DoubleGrant && l.limit == 0 && !shared && f.strike()) {
			return nil, redis.Nil
		}
		l.last++
		token := l.last
		if f.Fault == LowToken && f.strike() {
			token -= 3
		}
		l.leases = append(l.leases, fakeLease{token: token, owner: owner, shared: shared, deadline: f.deadline(s[2])})
		return int64(token), nil
	case "RELEASE":
		i := find()
		if i < 0 {
			return int64(0), nil
		}
		if f.Fault == LostRelease && f.strike() {
			return int64(1), nil
		}
		l.leases = append(l.leases[:i], l.leases[i+1:]...)
		return int64(1), nil
	case "EXTEND":
		i := find()
		if i < 0 {
			return int64(0), nil
		}
		l.leases[i].deadline = f.deadline(s[3])
		return int64(1), nil
	case "VERIFY":
		if find() < 0 {
			return int64(0), nil
		}
		return int64(1), nil
	case "STATUS":
		if !l.created && len(l.leases) == 0 {
			return nil, redis.Nil
		}
		return []interface{}{"state", "held", "last-token", strconv.FormatUint(l.last, 10)}, nil
	}
	return nil, errors.New("ERR unknown command")
}

// LowerTokens wraps a target so that every every-th granted ACQUIRE reports a
// token 1000 below the server's: a planted bug for a control run against a
// real server.
func LowerTokens(t Target, every int) Target { return &lowering{Target: t, every: every} }

type lowering struct {
	Target
	every int
	mu    sync.Mutex // guards n
	n     int
}

func (l *lowering) Dial(client, node int) Conn { return lowerConn{l.Target.Dial(client, node), l} }

type lowerConn struct {
	Conn
	l *lowering
}

func (c lowerConn) Do(ctx context.Context, args ...interface{}) (interface{}, error) {
	r, err := c.Conn.Do(ctx, args...)
	if tok, ok := r.(int64); ok && err == nil && args[0] == "ACQUIRE" && tok > 1000 {
		c.l.mu.Lock()
		c.l.n++
		strike := c.l.n%c.l.every == 0
		c.l.mu.Unlock()
		if strike {
			return tok - 1000, nil
		}
	}
	return r, err
}
