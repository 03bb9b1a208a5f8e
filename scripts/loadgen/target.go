package main

import (
	"fmt"
	"time"
)

// releaseScript is the usual Redis lock release: delete the key only if it
// still holds our token.
const releaseScript = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`

// target builds the lock commands of one server and reads their replies.
//
//	leasehold: ACQUIRE key ttl        -> :token | nil
//	           RELEASE key token      -> :1 | :0
//	redis:     SET key tok NX PX ttl  -> +OK | nil
//	           EVALSHA sha 1 key tok  -> :1 | :0
type target struct {
	redis bool
	sha   string // the release script's SHA1, after prepare
}

func parseTarget(name string) (*target, error) {
	switch name {
	case "leasehold":
		return &target{}, nil
	case "redis":
		return &target{redis: true}, nil
	}
	return nil, fmt.Errorf("unknown -target %q: want leasehold or redis", name)
}

func (t *target) String() string {
	if t.redis {
		return "redis"
	}
	return "leasehold"
}

// prepare loads the release script on Redis; a no-op on leasehold.
func (t *target) prepare(addr string) error {
	if !t.redis {
		return nil
	}
	c, err := dial(addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.do("SCRIPT", "LOAD", releaseScript)
	if err != nil {
		return err
	}
	if r.kind != '$' || r.null {
		return fmt.Errorf("SCRIPT LOAD answered %v", r)
	}
	t.sha = string(r.str)
	return nil
}

var (
	cmdACQUIRE = []byte("ACQUIRE")
	cmdRELEASE = []byte("RELEASE")
	cmdSET     = []byte("SET")
	cmdEVALSHA = []byte("EVALSHA")
	argNX      = []byte("NX")
	argPX      = []byte("PX")
	argOne     = []byte("1")
)

// appendAcquire appends a lease request; tok is the value Redis stores
// (leasehold makes its own token).
func (t *target) appendAcquire(b, key, tok []byte, ttlMs int64) []byte {
	if t.redis {
		b = appendArray(b, 6)
		b = appendBulk(b, cmdSET)
		b = appendBulk(b, key)
		b = appendBulk(b, tok)
		b = appendBulk(b, argNX)
		b = appendBulk(b, argPX)
		return appendBulkInt(b, ttlMs)
	}
	b = appendArray(b, 3)
	b = appendBulk(b, cmdACQUIRE)
	b = appendBulk(b, key)
	return appendBulkInt(b, ttlMs)
}

// granted reads an acquire reply: whether the lease was granted and, on
// leasehold, its fencing token.
func (t *target) granted(r reply) (ok bool, token int64, err error) {
	switch {
	case r.isErr():
		return false, 0, fmt.Errorf("acquire: %s", r.str)
	case r.null:
		return false, 0, nil
	case t.redis && r.kind == '+':
		return true, 0, nil
	case !t.redis && r.kind == ':':
		return true, r.n, nil
	}
	return false, 0, fmt.Errorf("acquire: unexpected reply %v", r)
}

// appendRelease appends the release of a lease granted under tok (Redis) or
// token (leasehold).
func (t *target) appendRelease(b, key, tok []byte, token int64) []byte {
	if t.redis {
		b = appendArray(b, 5)
		b = appendBulk(b, cmdEVALSHA)
		b = appendBulkString(b, t.sha)
		b = appendBulk(b, argOne)
		b = appendBulk(b, key)
		return appendBulk(b, tok)
	}
	b = appendArray(b, 3)
	b = appendBulk(b, cmdRELEASE)
	b = appendBulk(b, key)
	return appendBulkInt(b, token)
}

// released reads a release reply: true for 1, false for 0.
func (t *target) released(r reply) (bool, error) {
	switch {
	case r.isErr():
		return false, fmt.Errorf("release: %s", r.str)
	case r.kind == ':' && (r.n == 0 || r.n == 1):
		return r.n == 1, nil
	}
	return false, fmt.Errorf("release: unexpected reply %v", r)
}

// rng is splitmix64: cheap, and one per goroutine so nothing is shared.
type rng uint64

func (r *rng) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// appendToken appends 16 random hex digits: the value a Redis lock client
// stores and compares on release.
func appendToken(b []byte, r *rng) []byte {
	const hex = "0123456789abcdef"
	v := r.next()
	for i := 0; i < 16; i++ {
		b = append(b, hex[v&15])
		v >>= 4
	}
	return b
}
