package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
	"github.com/redis/go-redis/v9"
)

// doer is what *redis.Client and *redis.Conn both offer.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// reply is one command's answer, checked fluently in the style of tile38's
// tests: do(t, rdb, "ACQUIRE", "k", 1000).Token(), do(...).Err("INUSE").
type reply struct {
	t    testing.TB
	args []any
	val  any
	err  error
}

func do(t testing.TB, rdb doer, args ...any) reply {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := rdb.Do(c, args...).Result()
	return reply{t: t, args: args, val: v, err: err}
}

func (r reply) String() string {
	return fmt.Sprintf("%v -> (%T) %#v, err %v", r.args, r.val, r.val, r.err)
}

// Int asserts an integer reply and returns it.
func (r reply) Int() int64 {
	r.t.Helper()
	n, ok := r.val.(int64)
	if r.err != nil || !ok {
		r.t.Fatalf("want an integer: %s", r)
	}
	return n
}

// Is asserts the integer reply want (1 or 0 for the boolean commands).
func (r reply) Is(want int64) {
	r.t.Helper()
	if got := r.Int(); got != want {
		r.t.Fatalf("want :%d: %s", want, r)
	}
}

// Token asserts a granted fencing token and returns it.
func (r reply) Token() uint64 {
	r.t.Helper()
	n := r.Int()
	if n <= 0 {
		r.t.Fatalf("want a positive token: %s", r)
	}
	return uint64(n)
}

// Nil asserts a nil bulk reply.
func (r reply) Nil() {
	r.t.Helper()
	if !errors.Is(r.err, redis.Nil) {
		r.t.Fatalf("want nil: %s", r)
	}
}

// OK asserts +OK.
func (r reply) OK() { r.t.Helper(); r.Str("OK") }

// Str asserts a string (status or bulk) reply equal to want.
func (r reply) Str(want string) {
	r.t.Helper()
	if s, ok := r.val.(string); r.err != nil || !ok || s != want {
		r.t.Fatalf("want %q: %s", want, r)
	}
}

// Text asserts a string reply and returns it.
func (r reply) Text() string {
	r.t.Helper()
	s, ok := r.val.(string)
	if r.err != nil || !ok {
		r.t.Fatalf("want a string: %s", r)
	}
	return s
}

// Slice asserts an array reply and returns it.
func (r reply) Slice() []any {
	r.t.Helper()
	s, ok := r.val.([]any)
	if r.err != nil || !ok {
		r.t.Fatalf("want an array: %s", r)
	}
	return s
}

// Fields asserts a flat field/value array (STATUS, CONFIG GET) and returns
// it as a map, checking that no field repeats. STATUS's nested holders
// become a string listing "token/owner" of each; holders() has them whole.
func (r reply) Fields() map[string]string {
	r.t.Helper()
	s := r.Slice()
	if len(s)%2 != 0 {
		r.t.Fatalf("odd number of elements: %s", r)
	}
	m := make(map[string]string, len(s)/2)
	for i := 0; i < len(s); i += 2 {
		k, ok1 := s[i].(string)
		v, ok2 := s[i+1].(string)
		if k == "holders" {
			v, ok2 = holderList(r.t, s[i+1]), true
		}
		if !ok1 || !ok2 {
			r.t.Fatalf("element %d is not a string pair: %s", i, r)
		}
		if _, dup := m[k]; dup {
			r.t.Fatalf("field %q repeats: %s", k, r)
		}
		m[k] = v
	}
	return m
}

// Err asserts an error reply starting with want (a code word such as
// "INUSE", or Redis's whole text) and returns its text. No error may leak a
// Go package prefix.
func (r reply) Err(want string) string {
	r.t.Helper()
	var re redis.Error
	if r.err == nil || errors.Is(r.err, redis.Nil) || !errors.As(r.err, &re) {
		r.t.Fatalf("want error %q: %s", want, r)
	}
	msg := r.err.Error()
	if !strings.HasPrefix(msg, want) {
		r.t.Fatalf("want error starting %q: %s", want, r)
	}
	for _, leak := range []string{"locker:", "protocol:", "server:"} {
		if strings.Contains(msg, leak) {
			r.t.Fatalf("error leaks a package prefix %q: %s", leak, r)
		}
	}
	return msg
}

// status is STATUS's reply as a map; nil for an unknown lock.
func status(t testing.TB, rdb doer, key string) map[string]string {
	t.Helper()
	r := do(t, rdb, "STATUS", key)
	if errors.Is(r.err, redis.Nil) {
		return nil
	}
	m := r.Fields()
	if len(m) != len(protocol.StatusFields) {
		t.Fatalf("STATUS %s has %d fields, want %d: %v", key, len(m), len(protocol.StatusFields), m)
	}
	return m
}

// holderList renders STATUS's holders as "token/owner" words, in order.
func holderList(t testing.TB, v any) string {
	t.Helper()
	var words []string
	for _, h := range holdersOf(t, v) {
		words = append(words, h["token"]+"/"+h["owner"])
	}
	return strings.Join(words, " ")
}

// holdersOf checks the shape of STATUS's holders and returns them.
func holdersOf(t testing.TB, v any) []map[string]string {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("holders is %#v, not an array", v)
	}
	var out []map[string]string
	for _, e := range list {
		fields, ok := e.([]any)
		if !ok || len(fields) != 2*len(protocol.HolderFields) {
			t.Fatalf("holder entry %#v", e)
		}
		h := map[string]string{}
		for i := 0; i < len(fields); i += 2 {
			k, _ := fields[i].(string)
			v, ok := fields[i+1].(string)
			if k != protocol.HolderFields[i/2] || !ok {
				t.Fatalf("holder entry %#v", e)
			}
			h[k] = v
		}
		out = append(out, h)
	}
	return out
}

// holders returns STATUS's holders of key.
func holders(t testing.TB, rdb doer, key string) []map[string]string {
	t.Helper()
	st := do(t, rdb, "STATUS", key).Slice()
	return holdersOf(t, st[len(st)-1])
}

func wantStatus(t testing.TB, got map[string]string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("STATUS %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

// stickyConn is one connection of a go-redis client, so that a test can tell
// that errors left it open (its CLIENT ID stays the same).
func stickyConn(t testing.TB, rdb *redis.Client) *redis.Conn {
	t.Helper()
	cn := rdb.Conn()
	t.Cleanup(func() { cn.Close() })
	return cn
}

func manualServer(t *testing.T, opts ...option) (*testServer, *locker.ManualClock) {
	t.Helper()
	clock := &locker.ManualClock{}
	ts := startServer(t, append([]option{withManualClock(clock)}, opts...)...)
	return ts, clock
}

func requireCreate(c *Config) { c.Locker.RequireCreate = true }

func TestCommandErrors(t *testing.T) {
	ts := startServer(t)
	cn := stickyConn(t, ts.client())
	id := do(t, cn, "CLIENT", "ID").Int()
	maxTTL := DefaultConfig().Locker.MaxTTL.Milliseconds()
	ttlRange := fmt.Sprintf("ERR ttl out of range: must be between 1 and %d ms", maxTTL)
	longKey := strings.Repeat("k", DefaultConfig().Locker.MaxKeyLen+1)
	// A lock for the token commands to find.
	tok := do(t, cn, "ACQUIRE", "held", 60000).Token()

	for _, tc := range []struct {
		args []any
		want string
	}{
		// Arity, for every lock command.
		{[]any{"ACQUIRE"}, "ERR wrong number of arguments for 'acquire' command"},
		{[]any{"create"}, "ERR wrong number of arguments for 'create' command"},
		{[]any{"VERIFY", "k"}, "ERR wrong number of arguments for 'verify' command"},
		{[]any{"VERIFY", "k", 1, 2}, "ERR wrong number of arguments for 'verify' command"},
		{[]any{"RELEASE", "k"}, "ERR wrong number of arguments for 'release' command"},
		{[]any{"EXTEND", "k", 1}, "ERR wrong number of arguments for 'extend' command"},
		{[]any{"EXTEND", "k", 1, 1000, 1}, "ERR wrong number of arguments for 'extend' command"},
		{[]any{"STATUS"}, "ERR wrong number of arguments for 'status' command"},
		{[]any{"STATUS", "a", "b"}, "ERR wrong number of arguments for 'status' command"},
		{[]any{"DELETE"}, "ERR wrong number of arguments for 'delete' command"},
		{[]any{"EcHo"}, "ERR wrong number of arguments for 'echo' command"},

		// Unknown commands quote their first arguments as Redis does.
		{[]any{"foo"}, "ERR unknown command 'foo', with args beginning with: "},
		{[]any{"foo", "a", "b c"}, "ERR unknown command 'foo', with args beginning with: 'a' 'b c' "},
		{[]any{"HGET", "h", "k"}, "ERR unknown command 'HGET', with args beginning with: 'h' 'k' "},
		{[]any{"acquirex", "k"}, "ERR unknown command 'acquirex'"},
		{[]any{"foo\r\nbar", "x\ny"}, "ERR unknown command 'foo??bar', with args beginning with: 'x?y' "},

		// ACQUIRE's ttl and options.
		{[]any{"ACQUIRE", "k", "12x"}, "ERR value is not an integer or out of range"},
		{[]any{"ACQUIRE", "k", "99999999999999999999"}, "ERR value is not an integer or out of range"},
		{[]any{"ACQUIRE", "k", "+5"}, "ERR syntax error"},
		{[]any{"ACQUIRE", "k", "01000"}, "ERR value is not an integer or out of range"},
		{[]any{"ACQUIRE", "k", 0}, "ERR invalid expire time in 'acquire' command"},
		{[]any{"ACQUIRE", "k", -5}, "ERR invalid expire time in 'acquire' command"},
		{[]any{"ACQUIRE", "k", "9223372036854775807"}, "ERR invalid expire time in 'acquire' command"},
		{[]any{"ACQUIRE", "k", maxTTL + 1}, ttlRange},
		{[]any{"ACQUIRE", "k", 1000, 1000}, "ERR syntax error"},
		{[]any{"ACQUIRE", "k", "OWNER"}, "ERR syntax error"},
		{[]any{"ACQUIRE", "k", 1000, "OWNER"}, "ERR syntax error"},
		{[]any{"ACQUIRE", "k", 1000, "OWNER", "a", "OWNER", "b"}, "ERR syntax error"},
		{[]any{"ACQUIRE", "k", 1000, "FOO", "bar"}, "ERR syntax error"},
		{[]any{"ACQUIRE", "k", "OWNER", "a", 1000}, "ERR syntax error"},
		{[]any{"ACQUIRE", "k", 1000, "OWNER", ""}, "ERR OWNER must not be empty"},
		{[]any{"ACQUIRE", "k", 1000, "OWNER", longKey}, "ERR owner too long"},
		{[]any{"ACQUIRE", "fresh"}, "ERR no ttl given and the lock has no default ttl"},
		{[]any{"ACQUIRE", "fresh", "OWNER", "me"}, "ERR no ttl given and the lock has no default ttl"},
		{[]any{"ACQUIRE", "", 1000}, "ERR empty key"},
		{[]any{"ACQUIRE", longKey, 1000}, "ERR key too long"},

		// CREATE's options.
		{[]any{"CREATE", "c", "TTL"}, "ERR syntax error"},
		{[]any{"CREATE", "c", "FOO", 1}, "ERR syntax error"},
		{[]any{"CREATE", "c", "TTL", 1, "TTL", 2}, "ERR syntax error"},
		{[]any{"CREATE", "c", "TTL", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"CREATE", "c", "TTL", 0}, "ERR invalid expire time in 'create' command"},
		{[]any{"CREATE", "c", "TTL", -1}, "ERR invalid expire time in 'create' command"},
		{[]any{"CREATE", "c", "TTL", maxTTL + 1}, ttlRange},
		{[]any{"CREATE", ""}, "ERR empty key"},
		{[]any{"CREATE", longKey}, "ERR key too long"},

		// Tokens.
		{[]any{"VERIFY", "held", "abc"}, "ERR invalid token: must be an unsigned 64-bit integer"},
		{[]any{"VERIFY", "held", -1}, "ERR invalid token: must be an unsigned 64-bit integer"},
		{[]any{"VERIFY", "held", "18446744073709551616"}, "ERR invalid token: must be an unsigned 64-bit integer"},
		{[]any{"VERIFY", "held", ""}, "ERR invalid token: must be an unsigned 64-bit integer"},
		{[]any{"RELEASE", "held", "1.5"}, "ERR invalid token: must be an unsigned 64-bit integer"},
		{[]any{"RELEASE", "held", " 1"}, "ERR invalid token: must be an unsigned 64-bit integer"},
		{[]any{"EXTEND", "held", "x", 1000}, "ERR invalid token: must be an unsigned 64-bit integer"},
		{[]any{"EXTEND", "held", tok, 0}, "ERR invalid expire time in 'extend' command"},
		{[]any{"EXTEND", "held", tok, "ten"}, "ERR value is not an integer or out of range"},
		{[]any{"EXTEND", "held", tok, maxTTL + 1}, ttlRange},

		// DELETE of a live lease, naming the lock.
		{[]any{"DELETE", "held"}, `INUSE lock is held "held"`},

		// LOCKS.
		{[]any{"LOCKS", "x"}, "ERR invalid cursor"},
		{[]any{"LOCKS", -1}, "ERR invalid cursor"},
		{[]any{"LOCKS", 0, "COUNT", 0}, "ERR syntax error"},
		{[]any{"LOCKS", 0, "COUNT", -3}, "ERR syntax error"},
		{[]any{"LOCKS", 0, "COUNT", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"LOCKS", 0, "MATCH"}, "ERR syntax error"},
		{[]any{"LOCKS", 0, "BOGUS", 1}, "ERR syntax error"},
		{[]any{"LOCKS", 0, "COUNT", 1, "COUNT", 2}, "ERR syntax error"},
		{[]any{"LOCKS", 0, "MATCH", "a", "MATCH", "b"}, "ERR syntax error"},
	} {
		name := strings.TrimSuffix(fmt.Sprintln(tc.args...), "\n")
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			do(t, cn, tc.args...).Err(tc.want)
			// The connection carries on after the error.
			do(t, cn, "PING").Str("PONG")
		})
	}

	// None of the refused ACQUIREs took a lease or left a lock behind.
	for _, key := range []string{"k", "fresh", "c"} {
		if st := status(t, cn, key); st != nil {
			t.Errorf("STATUS %q = %v after refused commands, want nil", key, st)
		}
	}
	do(t, cn, "VERIFY", "held", tok).Is(1)
	if got := do(t, cn, "CLIENT", "ID").Int(); got != id {
		t.Fatalf("CLIENT ID changed from %d to %d: an error closed the connection", id, got)
	}
	if got := infoField(t, cn, "stats", "total_protocol_errors"); got != "0" {
		t.Fatalf("total_protocol_errors = %s, want 0", got)
	}
}

// TestKeyErrorsEveryLockCommand checks docs/commands.md's "Key errors (every
// lock command)" for the commands that take a key but no ttl.
func TestKeyErrorsEveryLockCommand(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	longKey := strings.Repeat("k", DefaultConfig().Locker.MaxKeyLen+1)
	for _, key := range []struct{ name, key, want string }{
		{"empty", "", "ERR empty key"},
		{"too long", longKey, "ERR key too long"},
	} {
		for _, args := range [][]any{
			{"VERIFY", key.key, 1},
			{"RELEASE", key.key, 1},
			{"EXTEND", key.key, 1, 1000},
			{"STATUS", key.key},
			{"DELETE", key.key},
		} {
			t.Run(fmt.Sprint(args[0], " ", key.name), func(t *testing.T) {
				r := do(t, rdb, args...)
				r.Err(key.want)
			})
		}
	}
}

func TestAcquireReleaseVerify(t *testing.T) {
	ts, _ := manualServer(t)
	rdb := ts.client()

	t1 := do(t, rdb, "ACQUIRE", "k", 1000).Token()
	do(t, rdb, "ACQUIRE", "k", 1000).Nil()
	do(t, rdb, "ACQUIRE", "k", 1000, "OWNER", "other").Nil()
	do(t, rdb, "VERIFY", "k", t1).Is(1)
	do(t, rdb, "VERIFY", "k", t1+1).Is(0)
	do(t, rdb, "VERIFY", "k", t1-1).Is(0)
	do(t, rdb, "VERIFY", "k", uint64(1<<64-1)).Is(0)
	do(t, rdb, "VERIFY", "nope", t1).Is(0)
	do(t, rdb, "RELEASE", "k", t1+1).Is(0)
	do(t, rdb, "RELEASE", "nope", t1).Is(0)
	do(t, rdb, "RELEASE", "k", t1).Is(1)
	do(t, rdb, "RELEASE", "k", t1).Is(0)
	do(t, rdb, "VERIFY", "k", t1).Is(0)
	// An implicitly created lock is gone once free.
	if st := status(t, rdb, "k"); st != nil {
		t.Fatalf("STATUS after release of an implicit lock = %v, want nil", st)
	}

	t2 := do(t, rdb, "ACQUIRE", "k", 1000).Token()
	if t2 <= t1 {
		t.Fatalf("token after release %d <= %d", t2, t1)
	}
	// The old token neither verifies nor releases the new holder.
	do(t, rdb, "VERIFY", "k", t1).Is(0)
	do(t, rdb, "RELEASE", "k", t1).Is(0)
	do(t, rdb, "VERIFY", "k", t2).Is(1)

	// Keys are binary-safe and case-sensitive.
	do(t, rdb, "ACQUIRE", "K", 1000).Token()
	bin := "a\x00b\r\n\xff"
	tb := do(t, rdb, "ACQUIRE", bin, 1000).Token()
	do(t, rdb, "VERIFY", bin, tb).Is(1)
	do(t, rdb, "VERIFY", "a", tb).Is(0)
	// The longest allowed key and owner.
	maxKey := strings.Repeat("m", DefaultConfig().Locker.MaxKeyLen)
	tm := do(t, rdb, "ACQUIRE", maxKey, 1000, "OWNER", maxKey).Token()
	do(t, rdb, "VERIFY", maxKey, tm).Is(1)
	wantStatus(t, status(t, rdb, maxKey), map[string]string{"owner": maxKey})
	// Command names and option words are case-insensitive.
	tl := do(t, rdb, "aCqUiRe", "lower", 1000, "owner", "x").Token()
	do(t, rdb, "verify", "lower", tl).Is(1)
	do(t, rdb, "release", "lower", tl).Is(1)
}

func TestAcquireExpiry(t *testing.T) {
	ts, clock := manualServer(t)
	rdb := ts.client()

	t1 := do(t, rdb, "ACQUIRE", "k", 1000).Token()
	clock.Advance(999 * time.Millisecond)
	do(t, rdb, "VERIFY", "k", t1).Is(1)
	do(t, rdb, "ACQUIRE", "k", 1000).Nil()
	clock.Advance(time.Millisecond) // exactly at the deadline: expired
	// Expiry is lazy as well as reaped: no waiting for the ticker.
	do(t, rdb, "VERIFY", "k", t1).Is(0)
	do(t, rdb, "EXTEND", "k", t1, 1000).Is(0)
	do(t, rdb, "RELEASE", "k", t1).Is(0)
	if st := status(t, rdb, "k"); st != nil {
		t.Fatalf("STATUS of an expired implicit lock = %v, want nil", st)
	}

	t2 := do(t, rdb, "ACQUIRE", "k", 1000).Token()
	if t2 <= t1 {
		t.Fatalf("token after expiry %d <= %d", t2, t1)
	}
	clock.Advance(2 * time.Second)
	// A new holder may take it before anyone looked at the old one.
	t3 := do(t, rdb, "ACQUIRE", "k", 500, "OWNER", "b").Token()
	if t3 <= t2 {
		t.Fatalf("token after expiry %d <= %d", t3, t2)
	}
	do(t, rdb, "RELEASE", "k", t2).Is(0) // stale token, newer holder
	do(t, rdb, "VERIFY", "k", t3).Is(1)

	// A created lock survives expiry, free.
	do(t, rdb, "CREATE", "c").Is(1)
	tc := do(t, rdb, "ACQUIRE", "c", 100).Token()
	clock.Advance(100 * time.Millisecond)
	do(t, rdb, "VERIFY", "c", tc).Is(0)
	wantStatus(t, status(t, rdb, "c"), map[string]string{
		"state": "free", "token": "0", "ttl": "0", "last-token": u(tc), "created": "1",
	})
}

func TestAcquireOwner(t *testing.T) {
	ts, clock := manualServer(t)
	rdb := ts.client()

	t1 := do(t, rdb, "ACQUIRE", "k", 1000, "OWNER", "alice").Token()
	clock.Advance(600 * time.Millisecond)
	// The same owner gets the same token back, its lease renewed.
	if got := do(t, rdb, "ACQUIRE", "k", 2000, "OWNER", "alice").Token(); got != t1 {
		t.Fatalf("re-ACQUIRE by the owner = %d, want %d", got, t1)
	}
	wantStatus(t, status(t, rdb, "k"), map[string]string{"token": u(t1), "owner": "alice", "ttl": "2000"})
	clock.Advance(600 * time.Millisecond) // past the first deadline, within the renewed one
	do(t, rdb, "VERIFY", "k", t1).Is(1)
	// Anyone else waits.
	do(t, rdb, "ACQUIRE", "k", 1000, "OWNER", "bob").Nil()
	do(t, rdb, "ACQUIRE", "k", 1000, "OWNER", "ALICE").Nil()
	do(t, rdb, "ACQUIRE", "k", 1000).Nil()
	// The renewed lease ends 2000 ms after the renewal.
	clock.Advance(1400 * time.Millisecond)
	do(t, rdb, "VERIFY", "k", t1).Is(0)
	// Once expired, the same owner gets a new token.
	t2 := do(t, rdb, "ACQUIRE", "k", 1000, "OWNER", "alice").Token()
	if t2 <= t1 {
		t.Fatalf("new lease of the same owner: token %d <= %d", t2, t1)
	}

	// An anonymous lease is not renewed by an anonymous ACQUIRE.
	do(t, rdb, "ACQUIRE", "anon", 1000).Token()
	do(t, rdb, "ACQUIRE", "anon", 1000).Nil()
	// Nor is it taken over by an owner.
	do(t, rdb, "ACQUIRE", "anon", 1000, "OWNER", "alice").Nil()
}

func TestCreate(t *testing.T) {
	ts, clock := manualServer(t)
	rdb := ts.client()

	do(t, rdb, "CREATE", "c").Is(1)
	do(t, rdb, "CREATE", "c").Is(0)
	do(t, rdb, "CREATE", "c", "TTL", 5000).Is(0)
	wantStatus(t, status(t, rdb, "c"), map[string]string{"state": "free", "default-ttl": "0", "created": "1"})
	do(t, rdb, "ACQUIRE", "c").Err("ERR no ttl given and the lock has no default ttl")
	tc := do(t, rdb, "ACQUIRE", "c", 300).Token()
	do(t, rdb, "RELEASE", "c", tc).Is(1)
	// A created lock stays when free.
	wantStatus(t, status(t, rdb, "c"), map[string]string{"state": "free", "last-token": u(tc), "created": "1"})

	// The default ttl applies when ACQUIRE gives none.
	do(t, rdb, "CREATE", "d", "ttl", 2000).Is(1)
	td := do(t, rdb, "ACQUIRE", "d").Token()
	wantStatus(t, status(t, rdb, "d"), map[string]string{"state": "held", "ttl": "2000", "default-ttl": "2000"})
	clock.Advance(2 * time.Second)
	do(t, rdb, "VERIFY", "d", td).Is(0)
	// A given ttl overrides it.
	td2 := do(t, rdb, "ACQUIRE", "d", 100).Token()
	wantStatus(t, status(t, rdb, "d"), map[string]string{"ttl": "100", "default-ttl": "2000"})
	do(t, rdb, "RELEASE", "d", td2).Is(1)
	// OWNER alone uses the default too.
	do(t, rdb, "ACQUIRE", "d", "OWNER", "o").Token()
	wantStatus(t, status(t, rdb, "d"), map[string]string{"ttl": "2000", "owner": "o"})

	// An implicitly created lock is adopted: CREATE says 1 and sets its default.
	ti := do(t, rdb, "ACQUIRE", "i", 1000).Token()
	wantStatus(t, status(t, rdb, "i"), map[string]string{"created": "0", "default-ttl": "0"})
	do(t, rdb, "CREATE", "i", "TTL", 3000).Is(1)
	do(t, rdb, "CREATE", "i").Is(0)
	wantStatus(t, status(t, rdb, "i"), map[string]string{"state": "held", "token": u(ti), "created": "1", "default-ttl": "3000"})
	do(t, rdb, "VERIFY", "i", ti).Is(1) // adoption does not touch the lease
	do(t, rdb, "RELEASE", "i", ti).Is(1)
	wantStatus(t, status(t, rdb, "i"), map[string]string{"state": "free", "created": "1"})
}

func TestRequireCreate(t *testing.T) {
	ts := startServer(t, requireCreate)
	rdb := ts.client()

	msg := do(t, rdb, "ACQUIRE", "nope", 1000).Err("NOLOCK ")
	if !strings.Contains(msg, "nope") {
		t.Fatalf("NOLOCK error %q does not name the key", msg)
	}
	do(t, rdb, "ACQUIRE", "nope", "OWNER", "x").Err("NOLOCK ")
	if st := status(t, rdb, "nope"); st != nil {
		t.Fatalf("refused ACQUIRE left a lock: %v", st)
	}
	do(t, rdb, "VERIFY", "nope", 1).Is(0)

	do(t, rdb, "CREATE", "yes").Is(1)
	tok := do(t, rdb, "ACQUIRE", "yes", 1000).Token()
	do(t, rdb, "RELEASE", "yes", tok).Is(1)
	wantStatus(t, status(t, rdb, "yes"), map[string]string{"state": "free", "created": "1"})
	do(t, rdb, "DELETE", "yes").Is(1)
	do(t, rdb, "ACQUIRE", "yes", 1000).Err(`NOLOCK no such lock "yes"`)
	if got := infoField(t, rdb, "locks", "require_create"); got != "1" {
		t.Fatalf("INFO require_create = %s", got)
	}
}

func TestExtend(t *testing.T) {
	ts, clock := manualServer(t)
	rdb := ts.client()

	tok := do(t, rdb, "ACQUIRE", "k", 1000).Token()
	clock.Advance(900 * time.Millisecond)
	do(t, rdb, "EXTEND", "k", tok, 1000).Is(1)
	wantStatus(t, status(t, rdb, "k"), map[string]string{"ttl": "1000", "token": u(tok)})
	clock.Advance(900 * time.Millisecond)
	do(t, rdb, "VERIFY", "k", tok).Is(1)
	// EXTEND sets the deadline to now+ttl; it can shorten too.
	do(t, rdb, "EXTEND", "k", tok, 1).Is(1)
	wantStatus(t, status(t, rdb, "k"), map[string]string{"ttl": "1"})
	clock.Advance(time.Millisecond)
	do(t, rdb, "VERIFY", "k", tok).Is(0)
	do(t, rdb, "EXTEND", "k", tok, 1000).Is(0) // expired: too late
	do(t, rdb, "EXTEND", "nope", tok, 1000).Is(0)

	t2 := do(t, rdb, "ACQUIRE", "k", 1000).Token()
	do(t, rdb, "EXTEND", "k", tok, 1000).Is(0) // a stale token extends nothing
	do(t, rdb, "EXTEND", "k", t2+1, 1000).Is(0)
	do(t, rdb, "EXTEND", "k", t2, DefaultConfig().Locker.MaxTTL.Milliseconds()).Is(1)
}

func TestStatus(t *testing.T) {
	ts, clock := manualServer(t)
	rdb := ts.client()

	do(t, rdb, "STATUS", "nope").Nil()

	do(t, rdb, "CREATE", "c", "TTL", 5000).Is(1)
	// Field order is fixed, as HGETALL's.
	fields := do(t, rdb, "STATUS", "c").Slice()
	var names []string
	for i := 0; i < len(fields); i += 2 {
		names = append(names, fields[i].(string))
	}
	if want := []string{"state", "token", "owner", "ttl", "last-token", "default-ttl", "created", "lock-delay", "delay-left", "waiters", "limit", "mode", "holders-total", "holders"}; !slices.Equal(names, want) {
		t.Fatalf("STATUS fields %v, want %v", names, want)
	}
	wantStatus(t, status(t, rdb, "c"), map[string]string{
		"state": "free", "token": "0", "owner": "", "ttl": "0",
		"last-token": "0", "default-ttl": "5000", "created": "1",
	})

	tok := do(t, rdb, "ACQUIRE", "c", "OWNER", "me").Token()
	clock.Advance(1500 * time.Microsecond)
	// 4998.5 ms left: rounded up.
	wantStatus(t, status(t, rdb, "c"), map[string]string{
		"state": "held", "token": u(tok), "owner": "me", "ttl": "4999",
		"last-token": u(tok), "default-ttl": "5000", "created": "1",
	})
	clock.Advance(4998*time.Millisecond + 499*time.Microsecond)
	// 1 µs left still shows as 1 ms: a held lease never shows ttl 0.
	wantStatus(t, status(t, rdb, "c"), map[string]string{"state": "held", "ttl": "1"})
	do(t, rdb, "RELEASE", "c", tok).Is(1)
	wantStatus(t, status(t, rdb, "c"), map[string]string{
		"state": "free", "token": "0", "owner": "", "ttl": "0",
		"last-token": u(tok), "default-ttl": "5000", "created": "1",
	})

	ti := do(t, rdb, "ACQUIRE", "i", 250).Token()
	wantStatus(t, status(t, rdb, "i"), map[string]string{
		"state": "held", "token": u(ti), "owner": "", "ttl": "250",
		"last-token": u(ti), "default-ttl": "0", "created": "0",
	})
	clock.Advance(250 * time.Millisecond)
	do(t, rdb, "STATUS", "i").Nil()
}

func TestDelete(t *testing.T) {
	ts, clock := manualServer(t)
	rdb := ts.client()

	do(t, rdb, "DELETE", "nope").Is(0)
	do(t, rdb, "CREATE", "c", "TTL", 1000).Is(1)
	t1 := do(t, rdb, "ACQUIRE", "c").Token()
	msg := do(t, rdb, "DELETE", "c").Err("INUSE ")
	if !strings.Contains(msg, `"c"`) {
		t.Errorf("INUSE error %q does not name the key", msg)
	}
	do(t, rdb, "VERIFY", "c", t1).Is(1) // the refused DELETE left the lease alone
	do(t, rdb, "RELEASE", "c", t1).Is(1)
	do(t, rdb, "DELETE", "c").Is(1)
	do(t, rdb, "DELETE", "c").Is(0)
	do(t, rdb, "STATUS", "c").Nil()

	// Tokens keep growing across DELETE and re-CREATE.
	do(t, rdb, "CREATE", "c").Is(1)
	wantStatus(t, status(t, rdb, "c"), map[string]string{"default-ttl": "0", "created": "1"})
	t2 := do(t, rdb, "ACQUIRE", "c", 1000).Token()
	if t2 <= t1 {
		t.Fatalf("token after DELETE and CREATE %d <= %d", t2, t1)
	}
	do(t, rdb, "RELEASE", "c", t1).Is(0)

	// An implicit lock is INUSE while held; DELETE works once it expired.
	ti := do(t, rdb, "ACQUIRE", "i", 1000).Token()
	do(t, rdb, "DELETE", "i").Err("INUSE ")
	clock.Advance(time.Second)
	do(t, rdb, "DELETE", "i").Is(0) // expired and gone already
	do(t, rdb, "VERIFY", "i", ti).Is(0)

	// A created lock whose lease expired is free and can be deleted.
	do(t, rdb, "CREATE", "e").Is(1)
	do(t, rdb, "ACQUIRE", "e", 10).Token()
	clock.Advance(10 * time.Millisecond)
	do(t, rdb, "DELETE", "e").Is(1)
}

func TestTokensOnlyGrow(t *testing.T) {
	ts, clock := manualServer(t)
	rdb := ts.client()

	var last uint64
	next := func(how string, tok uint64) {
		t.Helper()
		if tok <= last {
			t.Fatalf("after %s: token %d <= previous %d", how, tok, last)
		}
		last = tok
	}
	for round := range 20 {
		// release of an implicit lock (removed when free)
		tok := do(t, rdb, "ACQUIRE", "k", 1000).Token()
		next("acquire", tok)
		do(t, rdb, "RELEASE", "k", tok).Is(1)
		// expiry
		tok = do(t, rdb, "ACQUIRE", "k", 10).Token()
		next("release", tok)
		clock.Advance(10 * time.Millisecond)
		// adopt, release, DELETE, re-CREATE
		tok = do(t, rdb, "ACQUIRE", "k", 1000, "OWNER", "o").Token()
		next("expiry", tok)
		do(t, rdb, "CREATE", "k").Is(1)
		do(t, rdb, "RELEASE", "k", tok).Is(1)
		do(t, rdb, "DELETE", "k").Is(1)
		do(t, rdb, "CREATE", "k", "TTL", 1000).Is(1)
		tok = do(t, rdb, "ACQUIRE", "k").Token()
		next(fmt.Sprintf("round %d: DELETE and re-CREATE", round), tok)
		clock.Advance(time.Second)
		do(t, rdb, "DELETE", "k").Is(1)
	}
}

// scanAll walks LOCKS from cursor 0 to the end and returns every name seen,
// checking that no call returns more than count names.
func scanAll(t testing.TB, rdb doer, count int, match string) []string {
	t.Helper()
	var all []string
	cursor := "0"
	for calls := 0; ; calls++ {
		if calls > 100000 {
			t.Fatalf("LOCKS did not finish after %d calls", calls)
		}
		args := []any{"LOCKS", cursor}
		if match != "" {
			args = append(args, "MATCH", match)
		}
		if count > 0 {
			args = append(args, "COUNT", count)
		}
		r := do(t, rdb, args...)
		s := r.Slice()
		if len(s) != 2 {
			t.Fatalf("LOCKS reply is not [cursor, names]: %s", r)
		}
		cur, ok1 := s[0].(string)
		names, ok2 := s[1].([]any)
		if !ok1 || !ok2 {
			t.Fatalf("LOCKS reply is not [cursor, names]: %s", r)
		}
		if max := count; max == 0 && len(names) > 10 || max > 0 && len(names) > max {
			t.Fatalf("LOCKS COUNT %d returned %d names", count, len(names))
		}
		for _, n := range names {
			all = append(all, n.(string))
		}
		if cur == "0" {
			return all
		}
		if _, err := strconv.ParseUint(cur, 10, 64); err != nil {
			t.Fatalf("LOCKS cursor %q is not a number", cur)
		}
		cursor = cur
	}
}

// wantOnce checks that got holds every name of want exactly once, and nothing else.
func wantOnce(t testing.TB, got []string, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, n := range got {
		seen[n]++
	}
	for _, n := range want {
		if seen[n] != 1 {
			t.Errorf("%q seen %d times, want once", n, seen[n])
		}
		delete(seen, n)
	}
	for n, c := range seen {
		t.Errorf("%q seen %d times, want never", n, c)
	}
	if len(got) != len(want) {
		t.Errorf("got %d names, want %d", len(got), len(want))
	}
}

func TestLocks(t *testing.T) {
	ts, clock := manualServer(t)
	rdb := ts.client()
	c := ctx(t)

	// Nothing yet.
	do(t, rdb, "LOCKS", 0).Slice()
	if got := scanAll(t, rdb, 0, ""); len(got) != 0 {
		t.Fatalf("LOCKS on an empty table = %v", got)
	}

	// 2000 locks: half created, half held implicitly.
	const n = 2000
	var names []string
	pipe := rdb.Pipeline()
	for i := range n {
		name := fmt.Sprintf("lock:%04d", i)
		names = append(names, name)
		if i%2 == 0 {
			pipe.Do(c, "CREATE", name)
		} else {
			pipe.Do(c, "ACQUIRE", name, 60000)
		}
	}
	cmds, err := pipe.Exec(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if v, err := cmd.(*redis.Cmd).Int64(); err != nil || v <= 0 {
			t.Fatalf("%v = %d, %v", cmd.Args(), v, err)
		}
	}

	t.Run("count 37", func(t *testing.T) { wantOnce(t, scanAll(t, rdb, 37, ""), names) })
	t.Run("count 1", func(t *testing.T) { wantOnce(t, scanAll(t, rdb, 1, ""), names) })
	t.Run("default count", func(t *testing.T) { wantOnce(t, scanAll(t, rdb, 0, ""), names) })
	t.Run("count larger than the table", func(t *testing.T) {
		wantOnce(t, scanAll(t, rdb, 100000, ""), names)
	})

	for _, tc := range []struct {
		match string
		want  func(name string) bool
	}{
		{"*", func(string) bool { return true }},
		{"lock:1*", func(n string) bool { return strings.HasPrefix(n, "lock:1") }},
		{"lock:00?5", func(n string) bool { return len(n) == 9 && n[:7] == "lock:00" && n[8] == '5' }},
		{"lock:[0-1][0-9]0[05]", func(n string) bool { return n[5] <= '1' && n[7] == '0' && (n[8] == '0' || n[8] == '5') }},
		{"*9", func(n string) bool { return strings.HasSuffix(n, "9") }},
		{"LOCK:*", func(string) bool { return false }},
		{"nomatch*", func(string) bool { return false }},
	} {
		t.Run("match "+tc.match, func(t *testing.T) {
			var want []string
			for _, name := range names {
				if tc.want(name) {
					want = append(want, name)
				}
			}
			wantOnce(t, scanAll(t, rdb, 37, tc.match), want)
		})
	}

	// Released implicit locks and expired ones are gone; created ones stay.
	for i := 1; i < 200; i += 2 {
		do(t, rdb, "RELEASE", names[i], do(t, rdb, "STATUS", names[i]).Fields()["token"]).Is(1)
	}
	for i := 0; i < 200; i += 2 {
		do(t, rdb, "DELETE", names[i]).Is(1)
	}
	do(t, rdb, "ACQUIRE", "short", 5).Token()
	wantOnce(t, scanAll(t, rdb, 37, ""), append(slices.Clone(names[200:]), "short"))
	clock.Advance(5 * time.Millisecond)
	wantOnce(t, scanAll(t, rdb, 37, ""), names[200:])
	clock.Advance(time.Minute) // every implicit lease expires
	var created []string
	for i := 200; i < n; i += 2 {
		created = append(created, names[i])
	}
	wantOnce(t, scanAll(t, rdb, 37, ""), created)
}

// infoField returns one field of an INFO section.
func infoField(t testing.TB, rdb doer, section, field string) string {
	t.Helper()
	m := infoMap(t, rdb, section)
	v, ok := m[field]
	if !ok {
		t.Fatalf("INFO %s has no %s: %v", section, field, m)
	}
	return v
}

func infoMap(t testing.TB, rdb doer, section string) map[string]string {
	t.Helper()
	text := do(t, rdb, "INFO", section).Text()
	m := map[string]string{}
	for _, line := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}
