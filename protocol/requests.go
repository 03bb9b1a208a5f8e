package protocol

import (
	"bytes"
	"math"
	"slices"
	"time"

	"github.com/leasehold/leasehold/internal/glob"
	"github.com/leasehold/leasehold/locker"
)

// The typed requests of the lock commands. Byte slices alias the reader's
// buffer: they are valid until the next command is read.

// CreateRequest is CREATE key [TTL ms] [LOCKDELAY ms] [LIMIT n].
type CreateRequest struct {
	Key          []byte
	DefaultTTL   time.Duration // 0: none
	LockDelay    time.Duration // with LockDelaySet; else the server's --lock-delay
	LockDelaySet bool
	Limit        int // a semaphore's permits; 0: a lock
}

// AcquireRequest is ACQUIRE key [ttl-ms] [OWNER id] [WAIT ms] [PRIORITY n]
// [SHARED] [EPHEMERAL].
type AcquireRequest struct {
	Key       []byte
	TTL       time.Duration // 0: the lock's default
	Owner     []byte        // nil: anonymous
	Wait      time.Duration // 0: try once
	Priority  int           // among waiters, higher first
	Shared    bool          // a read lease
	Ephemeral bool          // released when the connection closes
}

// MAcquireRequest is MACQUIRE ttl-ms numkeys key [key ...] followed by
// ACQUIRE's options, which apply to every key.
type MAcquireRequest struct {
	Keys      [][]byte
	TTL       time.Duration
	Owner     []byte
	Wait      time.Duration
	Priority  int
	Shared    bool
	Ephemeral bool
}

// MaxMultiKeys bounds MACQUIRE's numkeys and MRELEASE's pairs: an atomic
// attempt holds the locks of every shard the keys fall in, and either runs
// to its end while the other clients of its event loop wait, so one call
// must stay short.
const MaxMultiKeys = 1000

// MReleaseRequest is MRELEASE key token [key token ...].
type MReleaseRequest struct {
	Keys   [][]byte
	Tokens []uint64
}

// TokenRequest is VERIFY or RELEASE key token.
type TokenRequest struct {
	Key   []byte
	Token uint64
}

// ForceReleaseRequest is FORCE-RELEASE key [token].
type ForceReleaseRequest struct {
	Key   []byte
	Token uint64 // locker.AllLeases when the token is left out
	// All is set when the token is left out: every lease of the lock ends.
	// A token of 0 given names no lease, as for RELEASE.
	All bool
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

// MaxLocksCount bounds COUNT so that one call holds a shard lock briefly.
const MaxLocksCount = 100000

// MaxPatternLen bounds a glob pattern from a client (LOCKS ... MATCH,
// PSUBSCRIBE), in bytes. Matching one name costs up to the pattern's length
// times the name's, so a pattern as long as the longest name would let one
// call run for seconds. Redis has no such bound.
const MaxPatternLen = 256

// The bounds of SUBSCRIBE and PSUBSCRIBE. Each subscription costs every
// event of the lock table a lookup or, for a pattern, a match, so they are
// bounded per connection; and one call runs to its end while the other
// clients of its event loop wait, so it is bounded too.
const (
	// MaxSubscribeArgs is the most channels or patterns one call of
	// SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE or PUNSUBSCRIBE may name.
	MaxSubscribeArgs = 1000
	// MaxChannelsPerConn is the most channels one connection may listen to.
	MaxChannelsPerConn = 10000
	// MaxPatternsPerConn is the most patterns one connection may listen to.
	MaxPatternsPerConn = 1000
	// MaxPatternBacktrack bounds glob.Backtrack of a PSUBSCRIBE pattern, and
	// MaxBacktrackPerConn the sum over a connection's patterns: every event
	// whose channel has a pattern's anchors is matched against it, at a cost
	// of up to Backtrack steps per byte of the channel, paid by the client
	// whose command caused the event.
	MaxPatternBacktrack = 64
	MaxBacktrackPerConn = 4096
)

// CheckSubscribePattern refuses a PSUBSCRIBE pattern that is too long or
// whose glob.Backtrack passes MaxPatternBacktrack, and returns that
// Backtrack, which counts towards MaxBacktrackPerConn.
func CheckSubscribePattern(p []byte) (backtrack int, err error) {
	if err := CheckPattern(p); err != nil {
		return 0, err
	}
	if n := glob.Backtrack(p); n <= MaxPatternBacktrack {
		return n, nil
	}
	return 0, ErrPatternBacktrack
}

// CheckPattern refuses a glob pattern longer than MaxPatternLen.
func CheckPattern(p []byte) error {
	if len(p) > MaxPatternLen {
		return ErrPatternTooLong
	}
	return nil
}

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
		case bytes.EqualFold(args[i], []byte("limit")) && req.Limit == 0:
			n, ok := parseInt(args[i+1])
			if !ok {
				return req, ErrNotInteger
			}
			if n < 1 || n > locker.MaxLimit {
				return req, ErrBadLimit
			}
			req.Limit = int(n)
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
	return req, parseAcquireOptions(args[i:], &req)
}

// ParseMAcquire parses MACQUIRE.
func ParseMAcquire(args [][]byte) (MAcquireRequest, error) {
	var req MAcquireRequest
	ttl, err := parseTTL("macquire", args[1])
	if err != nil {
		return req, err
	}
	n, ok := parseInt(args[2])
	switch {
	case !ok:
		return req, ErrNotInteger
	case n < 1 || n > MaxMultiKeys:
		return req, ErrBadNumKeys
	case n > int64(len(args)-3):
		return req, ErrSyntax
	}
	var opts AcquireRequest
	if err := parseAcquireOptions(args[3+n:], &opts); err != nil {
		return req, err
	}
	return MAcquireRequest{Keys: args[3 : 3+n : 3+n], TTL: ttl, Owner: opts.Owner, Wait: opts.Wait,
		Priority: opts.Priority, Shared: opts.Shared, Ephemeral: opts.Ephemeral}, nil
}

// ParseMRelease parses MRELEASE.
func ParseMRelease(args [][]byte) (MReleaseRequest, error) {
	if len(args)%2 == 0 {
		return MReleaseRequest{}, ArityError("mrelease")
	}
	if len(args)/2 > MaxMultiKeys {
		return MReleaseRequest{}, ErrTooManyPairs
	}
	req := MReleaseRequest{Keys: make([][]byte, 0, len(args)/2), Tokens: make([]uint64, 0, len(args)/2)}
	for i := 1; i < len(args); i += 2 {
		tok, ok := parseUint(args[i+1])
		if !ok {
			return req, ErrBadToken
		}
		req.Keys = append(req.Keys, args[i])
		req.Tokens = append(req.Tokens, tok)
	}
	return req, nil
}

// parseAcquireOptions parses the options of ACQUIRE and MACQUIRE into req.
func parseAcquireOptions(args [][]byte, req *AcquireRequest) error {
	seenWait, seenPriority := false, false
	for i := 0; i < len(args); i += 2 {
		var flag *bool // the options without a value
		switch {
		case bytes.EqualFold(args[i], []byte("ephemeral")):
			flag = &req.Ephemeral
		case bytes.EqualFold(args[i], []byte("shared")):
			flag = &req.Shared
		}
		if flag != nil && !*flag {
			*flag = true
			i-- // no value follows
			continue
		}
		if i+1 >= len(args) {
			return ErrSyntax
		}
		v := args[i+1]
		switch {
		case bytes.EqualFold(args[i], []byte("owner")) && req.Owner == nil:
			if len(v) == 0 {
				return ErrEmptyOwner
			}
			req.Owner = v
		case bytes.EqualFold(args[i], []byte("wait")) && !seenWait:
			ms, ok := parseInt(v)
			if !ok {
				return ErrNotInteger
			}
			if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
				return ErrBadWait
			}
			req.Wait, seenWait = time.Duration(ms)*time.Millisecond, true
		case bytes.EqualFold(args[i], []byte("priority")) && !seenPriority:
			n, ok := parseInt(v)
			if !ok {
				return ErrNotInteger
			}
			if n < math.MinInt32 || n > math.MaxInt32 {
				return ErrBadPriority
			}
			req.Priority, seenPriority = int(n), true
		default:
			return ErrSyntax
		}
	}
	return nil
}

// ParseToken parses VERIFY and RELEASE.
func ParseToken(args [][]byte) (TokenRequest, error) {
	tok, ok := parseUint(args[2])
	if !ok {
		return TokenRequest{}, ErrBadToken
	}
	return TokenRequest{Key: args[1], Token: tok}, nil
}

// ParseForceRelease parses FORCE-RELEASE.
func ParseForceRelease(args [][]byte) (ForceReleaseRequest, error) {
	switch len(args) {
	case 2:
		return ForceReleaseRequest{Key: args[1], Token: locker.AllLeases, All: true}, nil
	case 3:
		tok, ok := parseUint(args[2])
		if !ok {
			return ForceReleaseRequest{}, ErrBadToken
		}
		return ForceReleaseRequest{Key: args[1], Token: tok}, nil
	}
	return ForceReleaseRequest{}, ArityError("force-release")
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

// ParseLocks parses LOCKS [cursor] [MATCH pattern] [COUNT count]. Without a
// cursor it is the first page, as cursor 0: SCAN requires one, but a person
// typing LOCKS means the first page. A cursor is a number, never MATCH or
// COUNT, so an option where the cursor would be starts the options.
func ParseLocks(args [][]byte) (LocksRequest, error) {
	req := LocksRequest{Count: DefaultLocksCount}
	opts := 1
	if len(args) > 1 && !bytes.EqualFold(args[1], []byte("match")) && !bytes.EqualFold(args[1], []byte("count")) {
		cur, ok := parseUint(args[1])
		if !ok {
			return LocksRequest{}, ErrBadCursor
		}
		req.Cursor, opts = cur, 2
	}
	seenMatch, seenCount := false, false
	for i := opts; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return req, ErrSyntax
		}
		switch {
		case bytes.EqualFold(args[i], []byte("match")) && !seenMatch:
			if err := CheckPattern(args[i+1]); err != nil {
				return req, err
			}
			req.Match, seenMatch = args[i+1], true
		case bytes.EqualFold(args[i], []byte("count")) && !seenCount:
			seenCount = true
			n, ok := parseInt(args[i+1])
			if !ok {
				return req, ErrNotInteger
			}
			if n < 1 || n > MaxLocksCount {
				return req, ErrSyntax // Redis answers a COUNT below 1 so
			}
			req.Count = int(n)
		default:
			return req, ErrSyntax
		}
	}
	return req, nil
}

// HoldersRequest is HOLDERS key cursor [COUNT count].
type HoldersRequest struct {
	Key    []byte
	Cursor uint64
	Count  int
}

// HOLDERS's COUNT: by default the size of STATUS's list, so that the first
// page is what STATUS showed, and at most MaxHoldersCount: a page is copied
// under the lock's shard lock, which every command on the shard waits for,
// and becomes one reply (about a megabyte at most; locker.Table.Holders ends
// a page early once its owners pass that).
const (
	DefaultHoldersCount = locker.StatusHolders
	MaxHoldersCount     = 1000
)

// ParseHolders parses HOLDERS.
func ParseHolders(args [][]byte) (HoldersRequest, error) {
	cur, ok := parseUint(args[2])
	if !ok {
		return HoldersRequest{}, ErrBadCursor
	}
	req := HoldersRequest{Key: args[1], Cursor: cur, Count: DefaultHoldersCount}
	seenCount := false
	for i := 3; i < len(args); i += 2 {
		if i+1 >= len(args) || seenCount || !bytes.EqualFold(args[i], []byte("count")) {
			return req, ErrSyntax
		}
		seenCount = true
		n, ok := parseInt(args[i+1])
		switch {
		case !ok:
			return req, ErrNotInteger
		case n < 1 || n > MaxHoldersCount:
			return req, ErrBadHoldersCount
		}
		req.Count = int(n)
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

// SlowlogDefaultCount is how many entries SLOWLOG GET returns without a
// count, as in Redis.
const SlowlogDefaultCount = 10

// ParseSlowlogCount parses SLOWLOG GET's count: -1 for every entry.
func ParseSlowlogCount(arg []byte) (int, error) {
	n, ok := parseInt(arg)
	if !ok || n < -1 {
		return 0, ErrBadSlowlogCount
	}
	if n == -1 || n > math.MaxInt32 {
		return math.MaxInt32, nil
	}
	return int(n), nil
}

// MaxLockStatsTop bounds LOCKSTATS TOP (and --lockstats-top).
const MaxLockStatsTop = 100000

// LockStatsOrders are the fields LOCKSTATS BY sorts by, in lower case; the
// first is the default.
var LockStatsOrders = []string{"waits", "wait-time", "hold-time", "expiries", "acquisitions"}

// LockStatsRequest is LOCKSTATS [TOP n] [BY order].
type LockStatsRequest struct {
	Top int    // 0 for every lock tracked
	By  string // one of LockStatsOrders
}

// ParseLockStats parses LOCKSTATS's options, each at most once.
func ParseLockStats(args [][]byte) (LockStatsRequest, error) {
	req := LockStatsRequest{By: LockStatsOrders[0]}
	seenTop, seenBy := false, false
	for i := 1; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return req, ErrSyntax
		}
		switch {
		case bytes.EqualFold(args[i], []byte("top")) && !seenTop:
			seenTop = true
			n, ok := parseInt(args[i+1])
			if !ok || n < 1 || n > MaxLockStatsTop {
				return req, ErrBadLockStatsTop
			}
			req.Top = int(n)
		case bytes.EqualFold(args[i], []byte("by")) && !seenBy:
			seenBy = true
			by := args[i+1]
			j := slices.IndexFunc(LockStatsOrders, func(o string) bool { return bytes.EqualFold(by, []byte(o)) })
			if j < 0 {
				return req, ErrBadLockStatsOrder
			}
			req.By = LockStatsOrders[j]
		default:
			return req, ErrSyntax
		}
	}
	return req, nil
}

// CheckClientName applies Redis's rule to a client name (CLIENT SETNAME,
// CLIENT SETINFO, HELLO ... SETNAME): printable ASCII without spaces.
func CheckClientName(name []byte) error {
	for _, b := range name {
		if b < '!' || b > '~' {
			return ErrBadClientName
		}
	}
	return nil
}
