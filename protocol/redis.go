package protocol

import (
	"math"
	"time"
)

// The Redis commands that Redis lock libraries send (docs/redis-compat.md):
// a key set with SET key value NX PX ms is a lock whose owner is the value
// and whose lease is the ttl. Their parsing gives Redis's own errors for
// every form Redis accepts, and a leasehold error, saying what is
// supported, for a form that is not a lock operation.

// SetRequest is SET key value NX [PX ms | EX s | PXAT ms | EXAT s | KEEPTTL].
type SetRequest struct {
	Key, Value []byte
	TTL        time.Duration // PX or EX; 0: none given (the lock's default ttl)
	// AtMillis is PXAT's or EXAT's deadline in Unix milliseconds, 0 for
	// none: the server makes a ttl of it with its clock.
	AtMillis int64
}

// ParseSet parses SET. As Redis does, it reads every option before it
// checks the expire time's value, and a repeated or conflicting option is a
// syntax error.
func ParseSet(args [][]byte) (SetRequest, error) {
	req := SetRequest{Key: args[1], Value: args[2]}
	var nx, xx, get, keepTTL bool
	var unit string // "px", "ex", "pxat", "exat"
	var value []byte
	for i := 3; i < len(args); i++ {
		opt := args[i]
		switch {
		case equalFoldASCII(opt, "nx") && !xx:
			nx = true
		case equalFoldASCII(opt, "xx") && !nx:
			xx = true
		case equalFoldASCII(opt, "get"):
			get = true
		case equalFoldASCII(opt, "keepttl") && unit == "":
			keepTTL = true
		case !keepTTL && unit == "" && i+1 < len(args) && expireUnit(opt) != "":
			unit = expireUnit(opt)
			i++
			value = args[i]
		default:
			return req, ErrSyntax
		}
	}
	if unit != "" {
		n, ok := parseInt(value)
		if !ok {
			return req, ErrNotInteger
		}
		ms, ok := toMillis(n, unit == "ex" || unit == "exat")
		if !ok || n <= 0 {
			return req, InvalidExpireError("set")
		}
		if unit == "px" || unit == "ex" {
			req.TTL = time.Duration(ms) * time.Millisecond
		} else {
			req.AtMillis = ms
		}
	}
	switch {
	case get:
		return req, ErrSetGet
	case !nx:
		return req, ErrSetNeedsNX
	case len(req.Value) == 0:
		return req, ErrEmptyValue
	}
	return req, nil
}

// toMillis is n, in seconds when seconds, in milliseconds, and false when
// that does not fit a ttl in nanoseconds.
func toMillis(n int64, seconds bool) (int64, bool) {
	if seconds {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return 0, false
		}
		n *= 1000
	}
	if n > math.MaxInt64/int64(time.Millisecond) {
		return 0, false
	}
	return n, true
}

// expireUnit is SET's expire option opt in lower case, "" if it is none.
func expireUnit(opt []byte) string {
	for _, u := range [...]string{"px", "ex", "pxat", "exat"} {
		if equalFoldASCII(opt, u) {
			return u
		}
	}
	return ""
}

// ExpireRequest is PEXPIRE key ms, EXPIRE key s, PEXPIREAT key unix-ms or
// EXPIREAT key unix-s.
type ExpireRequest struct {
	Key []byte
	// TTL is PEXPIRE's or EXPIRE's; at or below zero the key is deleted, as
	// in Redis.
	TTL time.Duration
	// AtMillis is PEXPIREAT's or EXPIREAT's deadline in Unix milliseconds
	// (Absolute set): the server makes a ttl of it with its clock.
	AtMillis int64
	Absolute bool
}

// ParseExpire parses cmd ("pexpire", "expire", "pexpireat", "expireat").
// Redis 7's NX, XX, GT and LT are refused: no lock library sends them.
func ParseExpire(cmd string, args [][]byte) (ExpireRequest, error) {
	req := ExpireRequest{Key: args[1], Absolute: cmd == "pexpireat" || cmd == "expireat"}
	n, ok := parseInt(args[2])
	if !ok {
		return req, ErrNotInteger
	}
	if len(args) > 3 {
		for _, opt := range args[3:] {
			if !equalFoldASCII(opt, "nx") && !equalFoldASCII(opt, "xx") && !equalFoldASCII(opt, "gt") && !equalFoldASCII(opt, "lt") {
				return req, UnsupportedOptionError(opt)
			}
		}
		return req, ErrExpireOptions
	}
	ms, ok := toMillis(n, cmd == "expire" || cmd == "expireat")
	if !ok || ms < -math.MaxInt64/int64(time.Millisecond) {
		return req, InvalidExpireError(cmd)
	}
	if req.Absolute {
		req.AtMillis = ms
	} else {
		req.TTL = time.Duration(ms) * time.Millisecond
	}
	return req, nil
}

// TTLReply is PTTL's reply (TTL's in seconds when seconds) for a lock
// with ttl left: Redis rounds to the nearest second.
func TTLReply(ttl time.Duration, seconds bool) int64 {
	ms := ttl.Milliseconds()
	if seconds {
		return (ms + 500) / 1000
	}
	return ms
}

// The replies of PTTL and TTL for a key that does not exist, and for one
// with no expiry, as Redis's.
const (
	TTLNoKey    = -2
	TTLNoExpiry = -1
)

// EvalRequest is EVAL script numkeys [key ...] [arg ...], and so EVALSHA,
// EVAL_RO and EVALSHA_RO with a SHA1 for the script.
type EvalRequest struct {
	Script []byte // the script's text, or its SHA1 in hex
	Keys   [][]byte
	Args   [][]byte
}

// ParseEval parses EVAL and its kin, with Redis 7's errors.
func ParseEval(args [][]byte) (EvalRequest, error) {
	req := EvalRequest{Script: args[1]}
	n, ok := parseInt(args[2])
	switch {
	case !ok:
		return req, ErrNotInteger
	case n < 0:
		return req, ErrNegativeNumKeys
	case n > int64(len(args)-3):
		return req, ErrTooManyNumKeys
	}
	req.Keys, req.Args = args[3:3+n], args[3+n:]
	return req, nil
}
