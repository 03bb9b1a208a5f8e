package protocol

import (
	"bytes"
	"math"
	"time"
)

// The typed requests of the lock commands. Byte slices alias the reader's
// buffer: they are valid until the next command is read.

// CreateRequest is CREATE key [TTL ms] [LOCKDELAY ms].
type CreateRequest struct {
	Key          []byte
	DefaultTTL   time.Duration // 0: none
	LockDelay    time.Duration // with LockDelaySet; else the server's --lock-delay
	LockDelaySet bool
}

// AcquireRequest is ACQUIRE key [ttl-ms] [OWNER id] [WAIT ms] [PRIORITY n]
// [EPHEMERAL].
type AcquireRequest struct {
	Key       []byte
	TTL       time.Duration // 0: the lock's default
	Owner     []byte        // nil: anonymous
	Wait      time.Duration // 0: try once
	Priority  int           // among waiters, higher first
	Ephemeral bool          // released when the connection closes
}

// TokenRequest is VERIFY or RELEASE key token.
type TokenRequest struct {
	Key   []byte
	Token uint64
}

// ExtendRequest is EXTEND key token ttl-ms.
type ExtendRequest struct {
	Key   []byte
	Token uint64
	TTL   time.Duration
}

// LocksRequest is LOCKS cursor [MATCH pattern] [COUNT count].
type LocksRequest struct {
	Cursor uint64
	Match  []byte // nil: every name
	Count  int
}

// DefaultLocksCount is LOCKS's COUNT when none is given, as SCAN's.
const DefaultLocksCount = 10

// maxLocksCount bounds COUNT so that one call holds a shard lock briefly.
const maxLocksCount = 100000

// The parsers below expect args to have passed the command's arity check.

// ParseCreate parses CREATE.
func ParseCreate(args [][]byte) (CreateRequest, error) {
	req := CreateRequest{Key: args[1]}
	seenTTL := false
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return req, ErrSyntax
		}
		switch {
		case bytes.EqualFold(args[i], []byte("ttl")) && !seenTTL:
			ttl, err := parseTTL("create", args[i+1])
			if err != nil {
				return req, err
			}
			req.DefaultTTL, seenTTL = ttl, true
		case bytes.EqualFold(args[i], []byte("lockdelay")) && !req.LockDelaySet:
			ms, ok := parseInt(args[i+1])
			if !ok {
				return req, ErrNotInteger
			}
			if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
				return req, ErrBadLockDelay
			}
			req.LockDelay, req.LockDelaySet = time.Duration(ms)*time.Millisecond, true
		default:
			return req, ErrSyntax
		}
	}
	return req, nil
}

// ParseAcquire parses ACQUIRE. The ttl is recognised by position: an
// argument right after the key that is not an option name.
func ParseAcquire(args [][]byte) (AcquireRequest, error) {
	req := AcquireRequest{Key: args[1]}
	i := 2
	if i < len(args) && looksNumeric(args[i]) {
		ttl, err := parseTTL("acquire", args[i])
		if err != nil {
			return req, err
		}
		req.TTL = ttl
		i++
	}
	seenWait, seenPriority := false, false
	for ; i < len(args); i += 2 {
		if bytes.EqualFold(args[i], []byte("ephemeral")) && !req.Ephemeral {
			req.Ephemeral = true
			i-- // a flag: no value follows
			continue
		}
		if i+1 >= len(args) {
			return req, ErrSyntax
		}
		v := args[i+1]
		switch {
		case bytes.EqualFold(args[i], []byte("owner")) && req.Owner == nil:
			if len(v) == 0 {
				return req, ErrEmptyOwner
			}
			req.Owner = v
		case bytes.EqualFold(args[i], []byte("wait")) && !seenWait:
			ms, ok := parseInt(v)
			if !ok {
				return req, ErrNotInteger
			}
			if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
				return req, ErrBadWait
			}
			req.Wait, seenWait = time.Duration(ms)*time.Millisecond, true
		case bytes.EqualFold(args[i], []byte("priority")) && !seenPriority:
			n, ok := parseInt(v)
			if !ok {
				return req, ErrNotInteger
			}
			if n < math.MinInt32 || n > math.MaxInt32 {
				return req, ErrBadPriority
			}
			req.Priority, seenPriority = int(n), true
		default:
			return req, ErrSyntax
		}
	}
	return req, nil
}

// ParseToken parses VERIFY and RELEASE.
func ParseToken(args [][]byte) (TokenRequest, error) {
	tok, ok := parseUint(args[2])
	if !ok {
		return TokenRequest{}, ErrBadToken
	}
	return TokenRequest{Key: args[1], Token: tok}, nil
}

// ParseExtend parses EXTEND.
func ParseExtend(args [][]byte) (ExtendRequest, error) {
	tok, ok := parseUint(args[2])
	if !ok {
		return ExtendRequest{}, ErrBadToken
	}
	ttl, err := parseTTL("extend", args[3])
	if err != nil {
		return ExtendRequest{}, err
	}
	return ExtendRequest{Key: args[1], Token: tok, TTL: ttl}, nil
}

// ParseLocks parses LOCKS.
func ParseLocks(args [][]byte) (LocksRequest, error) {
	cur, ok := parseUint(args[1])
	if !ok {
		return LocksRequest{}, ErrBadCursor
	}
	req := LocksRequest{Cursor: cur, Count: DefaultLocksCount}
	seenMatch, seenCount := false, false
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return req, ErrSyntax
		}
		switch {
		case bytes.EqualFold(args[i], []byte("match")) && !seenMatch:
			req.Match, seenMatch = args[i+1], true
		case bytes.EqualFold(args[i], []byte("count")) && !seenCount:
			seenCount = true
			n, ok := parseInt(args[i+1])
			if !ok {
				return req, ErrNotInteger
			}
			if n < 1 || n > maxLocksCount {
				return req, ErrSyntax // Redis answers a COUNT below 1 so
			}
			req.Count = int(n)
		default:
			return req, ErrSyntax
		}
	}
	return req, nil
}

// parseTTL parses a positive number of milliseconds. Zero, negative and
// overflowing values get Redis's "invalid expire time" reply; the upper
// bound (max-ttl) is the lock table's to check.
func parseTTL(cmd string, b []byte) (time.Duration, error) {
	ms, ok := parseInt(b)
	if !ok {
		return 0, ErrNotInteger
	}
	if ms <= 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, InvalidExpireError(cmd)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// looksNumeric tells a positional number from an option name, so that a
// misspelt option is a syntax error rather than "not an integer".
func looksNumeric(b []byte) bool {
	return len(b) > 0 && (b[0] == '-' || '0' <= b[0] && b[0] <= '9')
}

// ParseInt parses a decimal int64 as Redis's string2ll does: an optional
// minus sign and digits, no plus sign, no spaces, no leading zeros, no
// overflow.
func ParseInt(b []byte) (int64, bool) { return parseInt(b) }

func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, ok := parseUint(b)
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		if u == 0 {
			return 0, false // "-0"
		}
		return -int64(u-1) - 1, true
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	}
	return 0, false
}

func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
