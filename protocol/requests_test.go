package protocol

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/tidwall/redcon"
)

// cmdArgs splits a command line on spaces into arguments; `""` stands for an
// empty argument.
func cmdArgs(line string) [][]byte {
	var args [][]byte
	for _, f := range strings.Fields(line) {
		if f == `""` {
			f = ""
		}
		args = append(args, []byte(f))
	}
	return args
}

// requestSentinels are the parse errors that callers may compare with errors.Is.
var requestSentinels = []error{ErrSyntax, ErrNotInteger, ErrBadToken, ErrBadCursor, ErrEmptyOwner,
	ErrBadLockDelay, ErrBadWait, ErrBadPriority, ErrBadLimit, ErrBadNumKeys, ErrPatternTooLong, ErrTooManyPairs, ErrBadHoldersCount}

// checkParseError fails unless got is the wire error want: the same reply
// text, and the very sentinel when want is one.
func checkParseError(t *testing.T, got, want error) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("err = %v, want nil", got)
		}
		return
	}
	if got == nil {
		t.Fatalf("err = nil, want %q", want.Error())
	}
	var we *Error
	if !errors.As(got, &we) {
		t.Fatalf("err = %T %v, want a *protocol.Error", got, got)
	}
	if got.Error() != want.Error() {
		t.Fatalf("err = %q, want %q", got.Error(), want.Error())
	}
	for _, s := range requestSentinels {
		if want == s && !errors.Is(got, s) {
			t.Fatalf("errors.Is(%v, sentinel %q) = false", got, s.Error())
		}
	}
}

func TestParseCreate(t *testing.T) {
	tests := []struct {
		name string
		line string
		want CreateRequest
		err  error
	}{
		{"key only", "CREATE k", CreateRequest{Key: []byte("k")}, nil},
		{"TTL", "CREATE k TTL 1500", CreateRequest{Key: []byte("k"), DefaultTTL: 1500 * time.Millisecond}, nil},
		{"ttl lower case", "create k ttl 1", CreateRequest{Key: []byte("k"), DefaultTTL: time.Millisecond}, nil},
		{"Ttl mixed case", "CREATE k Ttl 30000", CreateRequest{Key: []byte("k"), DefaultTTL: 30 * time.Second}, nil},
		{"largest ttl a Duration holds", "CREATE k TTL 9223372036854",
			CreateRequest{Key: []byte("k"), DefaultTTL: 9223372036854 * time.Millisecond}, nil},

		{"LOCKDELAY", "CREATE k LOCKDELAY 15000", CreateRequest{Key: []byte("k"), LockDelay: 15 * time.Second, LockDelaySet: true}, nil},
		{"LOCKDELAY 0 opts out", "CREATE k lockdelay 0", CreateRequest{Key: []byte("k"), LockDelaySet: true}, nil},
		{"both, either order", "CREATE k LOCKDELAY 1 TTL 2",
			CreateRequest{Key: []byte("k"), DefaultTTL: 2 * time.Millisecond, LockDelay: time.Millisecond, LockDelaySet: true}, nil},
		{"LOCKDELAY negative", "CREATE k LOCKDELAY -1", CreateRequest{}, ErrBadLockDelay},
		{"LOCKDELAY overflows Duration", "CREATE k LOCKDELAY 9223372036855", CreateRequest{}, ErrBadLockDelay},
		{"LOCKDELAY not a number", "CREATE k LOCKDELAY soon", CreateRequest{}, ErrNotInteger},
		{"repeated LOCKDELAY", "CREATE k LOCKDELAY 1 LOCKDELAY 2", CreateRequest{}, ErrSyntax},
		{"LOCKDELAY without value", "CREATE k LOCKDELAY", CreateRequest{}, ErrSyntax},
		{"unknown option", "CREATE k EX 10", CreateRequest{}, ErrSyntax},
		{"ttl without option name", "CREATE k 10", CreateRequest{}, ErrSyntax},
		{"repeated TTL", "CREATE k TTL 10 TTL 20", CreateRequest{}, ErrSyntax},
		{"repeated ttl other case", "CREATE k TTL 10 ttl 10", CreateRequest{}, ErrSyntax},
		{"TTL without value", "CREATE k TTL", CreateRequest{}, ErrSyntax},
		{"trailing unknown option", "CREATE k TTL 10 FOO", CreateRequest{}, ErrSyntax},
		{"ttl not a number", "CREATE k TTL x", CreateRequest{}, ErrNotInteger},
		{"ttl fractional", "CREATE k TTL 1.5", CreateRequest{}, ErrNotInteger},
		{"ttl plus sign", "CREATE k TTL +5", CreateRequest{}, ErrNotInteger},
		{"ttl leading zero", "CREATE k TTL 010", CreateRequest{}, ErrNotInteger},
		{"ttl empty", `CREATE k TTL ""`, CreateRequest{}, ErrNotInteger},
		{"ttl beyond int64", "CREATE k TTL 9223372036854775808", CreateRequest{}, ErrNotInteger},
		{"ttl zero", "CREATE k TTL 0", CreateRequest{}, InvalidExpireError("create")},
		{"ttl negative", "CREATE k TTL -5", CreateRequest{}, InvalidExpireError("create")},
		{"ttl overflows Duration", "CREATE k TTL 9223372036854775807", CreateRequest{}, InvalidExpireError("create")},
		{"ttl just past Duration", "CREATE k TTL 9223372036855", CreateRequest{}, InvalidExpireError("create")},

		{"LIMIT", "CREATE k LIMIT 3", CreateRequest{Key: []byte("k"), Limit: 3}, nil},
		{"limit lower case", "create k limit 1", CreateRequest{Key: []byte("k"), Limit: 1}, nil},
		{"largest LIMIT", "CREATE k LIMIT 65536", CreateRequest{Key: []byte("k"), Limit: locker.MaxLimit}, nil},
		{"LIMIT among the others", "CREATE k TTL 5 LIMIT 2 LOCKDELAY 0",
			CreateRequest{Key: []byte("k"), DefaultTTL: 5 * time.Millisecond, LockDelaySet: true, Limit: 2}, nil},
		{"LIMIT zero", "CREATE k LIMIT 0", CreateRequest{}, ErrBadLimit},
		{"LIMIT negative", "CREATE k LIMIT -1", CreateRequest{}, ErrBadLimit},
		{"LIMIT just past MaxLimit", "CREATE k LIMIT 65537", CreateRequest{}, ErrBadLimit},
		{"LIMIT beyond int32", "CREATE k LIMIT 9223372036854775807", CreateRequest{}, ErrBadLimit},
		{"LIMIT not a number", "CREATE k LIMIT many", CreateRequest{}, ErrNotInteger},
		{"LIMIT fractional", "CREATE k LIMIT 1.5", CreateRequest{}, ErrNotInteger},
		{"LIMIT beyond int64", "CREATE k LIMIT 9223372036854775808", CreateRequest{}, ErrNotInteger},
		{"LIMIT without value", "CREATE k LIMIT", CreateRequest{}, ErrSyntax},
		{"repeated LIMIT", "CREATE k LIMIT 2 LIMIT 3", CreateRequest{}, ErrSyntax},
		{"repeated LIMIT same value other case", "CREATE k LIMIT 2 limit 2", CreateRequest{}, ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCreate(cmdArgs(tt.line))
			checkParseError(t, err, tt.err)
			if tt.err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := InvalidExpireError("create").Error(); got != "ERR invalid expire time in 'create' command" {
		t.Fatalf("InvalidExpireError text = %q", got)
	}
	if got := ErrBadLimit.Error(); got != "ERR LIMIT must be between 1 and 65536" {
		t.Fatalf("ErrBadLimit text = %q", got)
	}
}

func TestParseAcquire(t *testing.T) {
	k := []byte("k")
	tests := []struct {
		name string
		line string
		want AcquireRequest
		err  error
	}{
		{"key only", "ACQUIRE k", AcquireRequest{Key: k}, nil},
		{"wait and priority", "ACQUIRE k 100 WAIT 5000 PRIORITY -3",
			AcquireRequest{Key: k, TTL: 100 * time.Millisecond, Wait: 5 * time.Second, Priority: -3}, nil},
		{"ephemeral among options", "ACQUIRE k 100 EPHEMERAL OWNER me wait 1",
			AcquireRequest{Key: k, TTL: 100 * time.Millisecond, Ephemeral: true, Owner: []byte("me"), Wait: time.Millisecond}, nil},
		{"ephemeral last", "ACQUIRE k ephemeral", AcquireRequest{Key: k, Ephemeral: true}, nil},
		{"repeated ephemeral", "ACQUIRE k 1 EPHEMERAL EPHEMERAL", AcquireRequest{}, ErrSyntax},
		{"wait negative", "ACQUIRE k 1 WAIT -1", AcquireRequest{}, ErrBadWait},
		{"wait not a number", "ACQUIRE k 1 WAIT x", AcquireRequest{}, ErrNotInteger},
		{"wait without value", "ACQUIRE k 1 WAIT", AcquireRequest{}, ErrSyntax},
		{"priority too big", "ACQUIRE k 1 PRIORITY 2147483648", AcquireRequest{}, ErrBadPriority},
		{"priority smallest", "ACQUIRE k 1 PRIORITY -2147483648", AcquireRequest{Key: k, TTL: time.Millisecond, Priority: -2147483648}, nil},
		{"repeated priority", "ACQUIRE k 1 PRIORITY 1 PRIORITY 2", AcquireRequest{}, ErrSyntax},
		{"ttl", "ACQUIRE k 30000", AcquireRequest{Key: k, TTL: 30 * time.Second}, nil},
		{"owner", "ACQUIRE k OWNER me", AcquireRequest{Key: k, Owner: []byte("me")}, nil},
		{"ttl and owner", "ACQUIRE k 5 OWNER me", AcquireRequest{Key: k, TTL: 5 * time.Millisecond, Owner: []byte("me")}, nil},
		{"owner lower case", "acquire k 5 owner me", AcquireRequest{Key: k, TTL: 5 * time.Millisecond, Owner: []byte("me")}, nil},
		{"owner mixed case", "ACQUIRE k OwNeR me", AcquireRequest{Key: k, Owner: []byte("me")}, nil},
		{"owner that looks like a number", "ACQUIRE k OWNER 42", AcquireRequest{Key: k, Owner: []byte("42")}, nil},
		{"largest ttl a Duration holds", "ACQUIRE k 9223372036854",
			AcquireRequest{Key: k, TTL: 9223372036854 * time.Millisecond}, nil},

		{"misspelt option where the ttl would be", "ACQUIRE k OWNR x", AcquireRequest{}, ErrSyntax},
		{"misspelt option after ttl", "ACQUIRE k 5 OWNR x", AcquireRequest{}, ErrSyntax},
		{"TTL is not an ACQUIRE option", "ACQUIRE k TTL 5", AcquireRequest{}, ErrSyntax},
		{"OWNER without value", "ACQUIRE k OWNER", AcquireRequest{}, ErrSyntax},
		{"OWNER without value after ttl", "ACQUIRE k 5 OWNER", AcquireRequest{}, ErrSyntax},
		{"repeated OWNER", "ACQUIRE k OWNER a OWNER b", AcquireRequest{}, ErrSyntax},
		{"repeated OWNER other case", "ACQUIRE k 5 OWNER a owner a", AcquireRequest{}, ErrSyntax},
		{"two ttls", "ACQUIRE k 5 6", AcquireRequest{}, ErrSyntax},
		{"ttl after owner", "ACQUIRE k OWNER a 5", AcquireRequest{}, ErrSyntax},
		{"empty argument where the ttl would be", `ACQUIRE k ""`, AcquireRequest{}, ErrSyntax},
		{"empty owner", `ACQUIRE k OWNER ""`, AcquireRequest{}, ErrEmptyOwner},
		{"empty owner after ttl", `ACQUIRE k 5 OWNER ""`, AcquireRequest{}, ErrEmptyOwner},
		{"ttl fractional", "ACQUIRE k 1.5", AcquireRequest{}, ErrNotInteger},
		{"ttl leading zero", "ACQUIRE k 01", AcquireRequest{}, ErrNotInteger},
		{"ttl minus only", "ACQUIRE k -", AcquireRequest{}, ErrNotInteger},
		{"ttl with letters", "ACQUIRE k 10s", AcquireRequest{}, ErrNotInteger},
		{"ttl beyond int64", "ACQUIRE k 9223372036854775808", AcquireRequest{}, ErrNotInteger},
		{"ttl zero", "ACQUIRE k 0", AcquireRequest{}, InvalidExpireError("acquire")},
		{"ttl negative", "ACQUIRE k -1", AcquireRequest{}, InvalidExpireError("acquire")},
		{"ttl most negative", "ACQUIRE k -9223372036854775808", AcquireRequest{}, InvalidExpireError("acquire")},
		{"ttl overflows Duration", "ACQUIRE k 9223372036854775807", AcquireRequest{}, InvalidExpireError("acquire")},
		{"ttl just past Duration", "ACQUIRE k 9223372036855", AcquireRequest{}, InvalidExpireError("acquire")},

		{"shared alone", "ACQUIRE k SHARED", AcquireRequest{Key: k, Shared: true}, nil},
		{"shared lower case after ttl", "ACQUIRE k 100 shared", AcquireRequest{Key: k, TTL: 100 * time.Millisecond, Shared: true}, nil},
		{"shared then ephemeral", "ACQUIRE k 100 SHARED EPHEMERAL",
			AcquireRequest{Key: k, TTL: 100 * time.Millisecond, Shared: true, Ephemeral: true}, nil},
		{"ephemeral then shared", "ACQUIRE k Ephemeral Shared", AcquireRequest{Key: k, Shared: true, Ephemeral: true}, nil},
		{"shared among valued options", "ACQUIRE k 1 OWNER me SHARED WAIT 2 EPHEMERAL PRIORITY 3",
			AcquireRequest{Key: k, TTL: time.Millisecond, Owner: []byte("me"), Wait: 2 * time.Millisecond, Priority: 3, Shared: true, Ephemeral: true}, nil},
		{"owner named shared", "ACQUIRE k OWNER shared", AcquireRequest{Key: k, Owner: []byte("shared")}, nil},
		{"repeated shared", "ACQUIRE k SHARED SHARED", AcquireRequest{}, ErrSyntax},
		{"repeated shared other case", "ACQUIRE k 1 shared EPHEMERAL Shared", AcquireRequest{}, ErrSyntax},
		{"repeated shared followed by a value", "ACQUIRE k SHARED SHARED 1", AcquireRequest{}, ErrSyntax},
		{"shared given a value", "ACQUIRE k SHARED 1", AcquireRequest{}, ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAcquire(cmdArgs(tt.line))
			checkParseError(t, err, tt.err)
			if tt.err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := InvalidExpireError("acquire").Error(); got != "ERR invalid expire time in 'acquire' command" {
		t.Fatalf("InvalidExpireError text = %q", got)
	}
}

func TestParseMAcquire(t *testing.T) {
	ks := func(keys ...string) [][]byte {
		out := make([][]byte, len(keys))
		for i, k := range keys {
			out[i] = []byte(k)
		}
		return out
	}
	ms := time.Millisecond
	// numkeys at the limit, and one past it with enough keys present.
	maxKeys := make([]string, MaxMultiKeys+1)
	for i := range maxKeys {
		maxKeys[i] = "k" + strconv.Itoa(i)
	}
	atLimit := strings.Join(maxKeys[:MaxMultiKeys], " ")
	pastLimit := strings.Join(maxKeys, " ")

	tests := []struct {
		name string
		line string
		want MAcquireRequest
		err  error
	}{
		{"one key", "MACQUIRE 100 1 a", MAcquireRequest{Keys: ks("a"), TTL: 100 * ms}, nil},
		{"three keys", "MACQUIRE 30000 3 a b c", MAcquireRequest{Keys: ks("a", "b", "c"), TTL: 30 * time.Second}, nil},
		{"lower case", "macquire 5 2 a b", MAcquireRequest{Keys: ks("a", "b"), TTL: 5 * ms}, nil},
		{"every option after the keys", "MACQUIRE 100 2 a b OWNER me WAIT 5000 PRIORITY -3 SHARED EPHEMERAL",
			MAcquireRequest{Keys: ks("a", "b"), TTL: 100 * ms, Owner: []byte("me"), Wait: 5 * time.Second,
				Priority: -3, Shared: true, Ephemeral: true}, nil},
		{"options in another order and case", "MACQUIRE 1 1 a ephemeral shared priority 2147483647 wait 0 owner x",
			MAcquireRequest{Keys: ks("a"), TTL: ms, Owner: []byte("x"), Priority: math.MaxInt32, Shared: true, Ephemeral: true}, nil},
		{"shared only", "MACQUIRE 1 2 a b SHARED", MAcquireRequest{Keys: ks("a", "b"), TTL: ms, Shared: true}, nil},
		{"keys named like options are keys", "MACQUIRE 1 3 SHARED OWNER 5", MAcquireRequest{Keys: ks("SHARED", "OWNER", "5"), TTL: ms}, nil},
		{"numkeys decides where the keys end", "MACQUIRE 1 1 a shared", MAcquireRequest{Keys: ks("a"), TTL: ms, Shared: true}, nil},
		{"repeated key is the lock table's to reject", "MACQUIRE 1 2 a a", MAcquireRequest{Keys: ks("a", "a"), TTL: ms}, nil},
		{"empty key is the lock table's to reject", `MACQUIRE 1 1 ""`, MAcquireRequest{Keys: ks(""), TTL: ms}, nil},
		{"largest ttl a Duration holds", "MACQUIRE 9223372036854 1 a",
			MAcquireRequest{Keys: ks("a"), TTL: 9223372036854 * ms}, nil},
		{"numkeys at MaxMultiKeys", "MACQUIRE 1 1000 " + atLimit + " EPHEMERAL",
			MAcquireRequest{Keys: ks(maxKeys[:MaxMultiKeys]...), TTL: ms, Ephemeral: true}, nil},

		{"ttl zero", "MACQUIRE 0 1 a", MAcquireRequest{}, InvalidExpireError("macquire")},
		{"ttl negative", "MACQUIRE -1 1 a", MAcquireRequest{}, InvalidExpireError("macquire")},
		{"ttl overflows Duration", "MACQUIRE 9223372036855 1 a", MAcquireRequest{}, InvalidExpireError("macquire")},
		{"ttl not a number", "MACQUIRE x 1 a", MAcquireRequest{}, ErrNotInteger},
		{"ttl fractional", "MACQUIRE 1.5 1 a", MAcquireRequest{}, ErrNotInteger},
		{"ttl empty", `MACQUIRE "" 1 a`, MAcquireRequest{}, ErrNotInteger},
		{"ttl is not optional", "MACQUIRE 1 a b", MAcquireRequest{}, ErrNotInteger},
		{"ttl checked before numkeys", "MACQUIRE 0 x a", MAcquireRequest{}, InvalidExpireError("macquire")},

		{"numkeys not a number", "MACQUIRE 1 x a", MAcquireRequest{}, ErrNotInteger},
		{"numkeys leading zero", "MACQUIRE 1 01 a", MAcquireRequest{}, ErrNotInteger},
		{"numkeys plus sign", "MACQUIRE 1 +1 a", MAcquireRequest{}, ErrNotInteger},
		{"numkeys beyond int64", "MACQUIRE 1 9223372036854775808 a", MAcquireRequest{}, ErrNotInteger},
		{"numkeys zero", "MACQUIRE 1 0 a", MAcquireRequest{}, ErrBadNumKeys},
		{"numkeys negative", "MACQUIRE 1 -1 a", MAcquireRequest{}, ErrBadNumKeys},
		{"numkeys most negative", "MACQUIRE 1 -9223372036854775808 a", MAcquireRequest{}, ErrBadNumKeys},
		{"numkeys past MaxMultiKeys", "MACQUIRE 1 1001 " + pastLimit, MAcquireRequest{}, ErrBadNumKeys},
		{"numkeys largest int64", "MACQUIRE 1 9223372036854775807 a", MAcquireRequest{}, ErrBadNumKeys},
		{"numkeys more than the keys", "MACQUIRE 1 3 a b", MAcquireRequest{}, ErrSyntax},
		{"numkeys one more than the keys", "MACQUIRE 1 2 a", MAcquireRequest{}, ErrSyntax},
		{"numkeys fewer than the keys", "MACQUIRE 1 1 a b", MAcquireRequest{}, ErrSyntax},

		{"ttl among the options", "MACQUIRE 1 1 a 5", MAcquireRequest{}, ErrSyntax},
		{"unknown option", "MACQUIRE 1 1 a NX", MAcquireRequest{}, ErrSyntax},
		{"OWNER without value", "MACQUIRE 1 1 a OWNER", MAcquireRequest{}, ErrSyntax},
		{"empty owner", `MACQUIRE 1 1 a OWNER ""`, MAcquireRequest{}, ErrEmptyOwner},
		{"repeated OWNER", "MACQUIRE 1 1 a OWNER x owner y", MAcquireRequest{}, ErrSyntax},
		{"wait negative", "MACQUIRE 1 1 a WAIT -1", MAcquireRequest{}, ErrBadWait},
		{"wait not a number", "MACQUIRE 1 1 a WAIT x", MAcquireRequest{}, ErrNotInteger},
		{"priority too big", "MACQUIRE 1 1 a PRIORITY 2147483648", MAcquireRequest{}, ErrBadPriority},
		{"repeated shared", "MACQUIRE 1 2 a b SHARED SHARED", MAcquireRequest{}, ErrSyntax},
		{"repeated ephemeral", "MACQUIRE 1 1 a EPHEMERAL shared ephemeral", MAcquireRequest{}, ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := cmdArgs(tt.line)
			got, err := ParseMAcquire(args)
			checkParseError(t, err, tt.err)
			if tt.err != nil {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			// The keys are the arguments after numkeys, not copies.
			for i, k := range got.Keys {
				if len(k) > 0 && &k[0] != &args[3+i][0] {
					t.Fatalf("Keys[%d] does not alias args[%d]", i, 3+i)
				}
			}
		})
	}
	if got := InvalidExpireError("macquire").Error(); got != "ERR invalid expire time in 'macquire' command" {
		t.Fatalf("InvalidExpireError text = %q", got)
	}
	if got := ErrBadNumKeys.Error(); got != "ERR numkeys must be between 1 and 1000" {
		t.Fatalf("ErrBadNumKeys text = %q", got)
	}
}

func TestParseMRelease(t *testing.T) {
	type pair struct {
		key string
		tok uint64
	}
	tests := []struct {
		name string
		args []string
		want []pair
		err  error
	}{
		{"one lease", []string{"MRELEASE", "a", "7"}, []pair{{"a", 7}}, nil},
		{"three leases", []string{"MRELEASE", "a", "1", "b", "0", "c", "18446744073709551615"},
			[]pair{{"a", 1}, {"b", 0}, {"c", math.MaxUint64}}, nil},
		{"lower case", []string{"mrelease", "a", "1"}, []pair{{"a", 1}}, nil},
		{"key that looks like a token", []string{"MRELEASE", "5", "6"}, []pair{{"5", 6}}, nil},
		{"same key twice", []string{"MRELEASE", "a", "1", "a", "2"}, []pair{{"a", 1}, {"a", 2}}, nil},
		{"empty key is the lock table's to reject", []string{"MRELEASE", "", "1"}, []pair{{"", 1}}, nil},

		{"key without token", []string{"MRELEASE", "a", "1", "b"}, nil, ArityError("mrelease")},
		{"three without tokens", []string{"MRELEASE", "a", "b", "c"}, nil, ArityError("mrelease")},
		{"pairing checked before tokens", []string{"MRELEASE", "a", "x", "b"}, nil, ArityError("mrelease")},
		{"bad token in a later pair", []string{"MRELEASE", "a", "1", "b", "x"}, nil, ErrBadToken},
		{"keys and tokens swapped", []string{"MRELEASE", "1", "a"}, nil, ErrBadToken},
		{"one pair too many", append([]string{"MRELEASE"}, manyPairs(MaxMultiKeys+1)...), nil, ErrTooManyPairs},
		// Refused before a token is read: the pairs are not even looked at.
		{"far too many pairs", append(append([]string{"MRELEASE"}, manyPairs(10_000)...), "k", "x"), nil, ErrTooManyPairs},
	}
	var most []pair
	for i := range MaxMultiKeys {
		most = append(most, pair{"k" + strconv.Itoa(i), uint64(i)})
	}
	tests = append(tests, struct {
		name string
		args []string
		want []pair
		err  error
	}{"most pairs", append([]string{"MRELEASE"}, manyPairs(MaxMultiKeys)...), most, nil})
	for _, tok := range badTokens {
		tests = append(tests, struct {
			name string
			args []string
			want []pair
			err  error
		}{"bad token " + tok.name, []string{"MRELEASE", "a", "1", "b", tok.arg}, nil, ErrBadToken})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := make([][]byte, len(tt.args))
			for i, a := range tt.args {
				args[i] = []byte(a)
			}
			got, err := ParseMRelease(args)
			checkParseError(t, err, tt.err)
			if tt.err != nil {
				return
			}
			want := MReleaseRequest{Keys: [][]byte{}, Tokens: []uint64{}}
			for _, p := range tt.want {
				want.Keys = append(want.Keys, []byte(p.key))
				want.Tokens = append(want.Tokens, p.tok)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			for i, k := range got.Keys {
				if len(k) > 0 && &k[0] != &args[1+2*i][0] {
					t.Fatalf("Keys[%d] does not alias args[%d]", i, 1+2*i)
				}
			}
		})
	}
	if got := ArityError("mrelease").Error(); got != "ERR wrong number of arguments for 'mrelease' command" {
		t.Fatalf("ArityError text = %q", got)
	}
}

// manyPairs returns n key/token pairs k0 0 k1 1 ...
func manyPairs(n int) []string {
	args := make([]string, 0, 2*n)
	for i := range n {
		args = append(args, "k"+strconv.Itoa(i), strconv.Itoa(i))
	}
	return args
}

// badTokens are arguments that are not a uint64 in canonical decimal form.
var badTokens = []struct{ name, arg string }{
	{"negative", "-1"},
	{"fractional", "1.5"},
	{"overflows uint64", "18446744073709551616"},
	{"far beyond uint64", "99999999999999999999"},
	{"21 digits", "100000000000000000000"},
	{"empty", ""},
	{"leading zero", "01"},
	{"plus sign", "+1"},
	{"minus zero", "-0"},
	{"hex", "0x10"},
	{"letters", "abc"},
	{"leading space", " 1"},
	{"trailing space", "1 "},
	{"trailing NUL", "1\x00"},
}

func TestParseToken(t *testing.T) {
	for _, cmd := range []string{"VERIFY", "RELEASE"} {
		t.Run(cmd, func(t *testing.T) {
			valid := []struct {
				arg  string
				want uint64
			}{
				{"0", 0},
				{"1", 1},
				{"42", 42},
				{"9223372036854775808", 1 << 63},
				{"18446744073709551615", math.MaxUint64},
			}
			for _, tt := range valid {
				t.Run(tt.arg, func(t *testing.T) {
					got, err := ParseToken([][]byte{[]byte(cmd), []byte("k"), []byte(tt.arg)})
					checkParseError(t, err, nil)
					want := TokenRequest{Key: []byte("k"), Token: tt.want}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("got %+v, want %+v", got, want)
					}
				})
			}
			for _, tt := range badTokens {
				t.Run(tt.name, func(t *testing.T) {
					_, err := ParseToken([][]byte{[]byte(cmd), []byte("k"), []byte(tt.arg)})
					checkParseError(t, err, ErrBadToken)
				})
			}
		})
	}
}

func TestParseExtend(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want ExtendRequest
		err  error
	}{
		{"valid", []string{"EXTEND", "k", "7", "1000"}, ExtendRequest{Key: []byte("k"), Token: 7, TTL: time.Second}, nil},
		{"lower case", []string{"extend", "k", "0", "1"}, ExtendRequest{Key: []byte("k"), Token: 0, TTL: time.Millisecond}, nil},
		{"largest token", []string{"EXTEND", "k", "18446744073709551615", "1"},
			ExtendRequest{Key: []byte("k"), Token: math.MaxUint64, TTL: time.Millisecond}, nil},
		{"largest ttl a Duration holds", []string{"EXTEND", "k", "1", "9223372036854"},
			ExtendRequest{Key: []byte("k"), Token: 1, TTL: 9223372036854 * time.Millisecond}, nil},

		{"token checked before ttl", []string{"EXTEND", "k", "x", "0"}, ExtendRequest{}, ErrBadToken},
		{"ttl not a number", []string{"EXTEND", "k", "1", "x"}, ExtendRequest{}, ErrNotInteger},
		{"ttl fractional", []string{"EXTEND", "k", "1", "1.5"}, ExtendRequest{}, ErrNotInteger},
		{"ttl empty", []string{"EXTEND", "k", "1", ""}, ExtendRequest{}, ErrNotInteger},
		{"ttl zero", []string{"EXTEND", "k", "1", "0"}, ExtendRequest{}, InvalidExpireError("extend")},
		{"ttl negative", []string{"EXTEND", "k", "1", "-1"}, ExtendRequest{}, InvalidExpireError("extend")},
		{"ttl overflows Duration", []string{"EXTEND", "k", "1", "9223372036854775807"}, ExtendRequest{}, InvalidExpireError("extend")},
	}
	for _, tok := range badTokens {
		tests = append(tests, struct {
			name string
			args []string
			want ExtendRequest
			err  error
		}{"bad token " + tok.name, []string{"EXTEND", "k", tok.arg, "1000"}, ExtendRequest{}, ErrBadToken})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := make([][]byte, len(tt.args))
			for i, a := range tt.args {
				args[i] = []byte(a)
			}
			got, err := ParseExtend(args)
			checkParseError(t, err, tt.err)
			if tt.err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := InvalidExpireError("extend").Error(); got != "ERR invalid expire time in 'extend' command" {
		t.Fatalf("InvalidExpireError text = %q", got)
	}
}

func TestParseLocks(t *testing.T) {
	tests := []struct {
		name string
		line string
		want LocksRequest
		err  error
	}{
		{"cursor only", "LOCKS 0", LocksRequest{Cursor: 0, Count: DefaultLocksCount}, nil},
		// Without a cursor, the first page: a cursor is a number, never
		// MATCH or COUNT, so an option in its place starts the options.
		{"no arguments", "LOCKS", LocksRequest{Count: DefaultLocksCount}, nil},
		{"MATCH without a cursor", "LOCKS MATCH jobs:*", LocksRequest{Match: []byte("jobs:*"), Count: DefaultLocksCount}, nil},
		{"count without a cursor", "locks count 3 match a", LocksRequest{Match: []byte("a"), Count: 3}, nil},
		{"MATCH without a cursor nor value", "LOCKS MATCH", LocksRequest{}, ErrSyntax},
		{"cursor after the options", "LOCKS COUNT 3 0", LocksRequest{}, ErrSyntax},
		{"match and count", "LOCKS 42 MATCH a* COUNT 5", LocksRequest{Cursor: 42, Match: []byte("a*"), Count: 5}, nil},
		{"lower case options", "locks 0 match a count 1", LocksRequest{Match: []byte("a"), Count: 1}, nil},
		{"mixed case, count first", "LOCKS 0 Count 7 Match x", LocksRequest{Match: []byte("x"), Count: 7}, nil},
		{"largest count", "LOCKS 0 COUNT 100000", LocksRequest{Count: 100000}, nil},
		{"largest cursor", "LOCKS 18446744073709551615", LocksRequest{Cursor: math.MaxUint64, Count: DefaultLocksCount}, nil},

		{"cursor negative", "LOCKS -1", LocksRequest{}, ErrBadCursor},
		{"cursor not a number", "LOCKS x", LocksRequest{}, ErrBadCursor},
		{"cursor leading zero", "LOCKS 01", LocksRequest{}, ErrBadCursor},
		{"cursor empty", `LOCKS ""`, LocksRequest{}, ErrBadCursor},
		{"cursor overflows uint64", "LOCKS 18446744073709551616", LocksRequest{}, ErrBadCursor},
		{"count zero", "LOCKS 0 COUNT 0", LocksRequest{}, ErrSyntax},
		{"count negative", "LOCKS 0 COUNT -1", LocksRequest{}, ErrSyntax},
		{"count above the limit", "LOCKS 0 COUNT 100001", LocksRequest{}, ErrSyntax},
		{"count not a number", "LOCKS 0 COUNT x", LocksRequest{}, ErrNotInteger},
		{"count fractional", "LOCKS 0 COUNT 1.5", LocksRequest{}, ErrNotInteger},
		{"count beyond int64", "LOCKS 0 COUNT 9223372036854775808", LocksRequest{}, ErrNotInteger},
		{"COUNT without value", "LOCKS 0 COUNT", LocksRequest{}, ErrSyntax},
		{"MATCH without value", "LOCKS 0 MATCH", LocksRequest{}, ErrSyntax},
		{"option without value after a pair", "LOCKS 0 MATCH a COUNT", LocksRequest{}, ErrSyntax},
		{"unknown option", "LOCKS 0 TYPE string", LocksRequest{}, ErrSyntax},
		// ErrSyntax's doc, CREATE and ACQUIRE treat a repeated option as a
		// syntax error; LOCKS must too.
		{"repeated MATCH", "LOCKS 0 MATCH a MATCH b", LocksRequest{}, ErrSyntax},
		{"repeated COUNT", "LOCKS 0 COUNT 5 count 6", LocksRequest{}, ErrSyntax},
		{"longest pattern", "LOCKS 0 MATCH " + strings.Repeat("*a", MaxPatternLen/2),
			LocksRequest{Match: []byte(strings.Repeat("*a", MaxPatternLen/2)), Count: DefaultLocksCount}, nil},
		// The report's 503-byte pattern, refused before any name is matched.
		{"pattern too long", "LOCKS 0 MATCH " + strings.Repeat("*[a-z]", 83) + "?????", LocksRequest{}, ErrPatternTooLong},
		{"pattern one byte too long", "LOCKS 0 MATCH " + strings.Repeat("a", MaxPatternLen+1), LocksRequest{}, ErrPatternTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLocks(cmdArgs(tt.line))
			checkParseError(t, err, tt.err)
			if tt.err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseInt(t *testing.T) {
	valid := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1", 1},
		{"-1", -1},
		{"10", 10},
		{"1234567890", 1234567890},
		{"9223372036854775807", math.MaxInt64},
		{"-9223372036854775808", math.MinInt64},
	}
	for _, tt := range valid {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseInt([]byte(tt.in))
			if !ok || got != tt.want {
				t.Fatalf("ParseInt(%q) = %d, %v, want %d, true", tt.in, got, ok, tt.want)
			}
		})
	}
	invalid := []string{
		"+1", " 1", "1 ", "01", "00", "-01", "-0", "", "-", "--1", "1-",
		"9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616",
		"1e3", "1.0", "0x1", "abc", "1\x00", "\t1",
	}
	for _, in := range invalid {
		t.Run("reject "+in, func(t *testing.T) {
			if got, ok := ParseInt([]byte(in)); ok {
				t.Fatalf("ParseInt(%q) = %d, true, want rejected", in, got)
			}
		})
	}
}

// Replies.

// respBulks is the RESP encoding of an array of bulk strings.
func respBulks(items ...string) string {
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(items)) + "\r\n")
	for _, it := range items {
		b.WriteString("$" + strconv.Itoa(len(it)) + "\r\n" + it + "\r\n")
	}
	return b.String()
}

// written runs write against a redcon.Writer and returns the flushed bytes.
func written(t *testing.T, write func(w *redcon.Writer)) string {
	t.Helper()
	var buf bytes.Buffer
	w := redcon.NewWriter(&buf)
	write(w)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// statusReply is the RESP encoding of STATUS's reply listing every holder:
// pairs, the field/value pairs before holders-total, as bulk strings, then
// holders-total, the holders field and an array of the entries, each encoded
// by holderEntry.
func statusReply(pairs []string, holders ...string) string {
	return cutStatusReply(pairs, len(holders), holders...)
}

// cutStatusReply is statusReply of a lock with total holders, of which the
// reply lists those given.
func cutStatusReply(pairs []string, total int, holders ...string) string {
	pairs = append(pairs[:len(pairs):len(pairs)], "holders-total", strconv.Itoa(total))
	_, body, _ := strings.Cut(respBulks(pairs...), "\r\n") // without the count
	return "*" + strconv.Itoa(len(pairs)+2) + "\r\n" + body + "$7\r\nholders\r\n" +
		"*" + strconv.Itoa(len(holders)) + "\r\n" + strings.Join(holders, "")
}

// holderEntry is the RESP encoding of one entry of STATUS's holders.
func holderEntry(token, owner, ttl string) string {
	return respBulks("token", token, "owner", owner, "ttl", ttl)
}

func TestWriteStatus(t *testing.T) {
	// Spelled out once, to pin the encoding the helpers reproduce.
	const heldLiteral = "*28\r\n" +
		"$5\r\nstate\r\n$4\r\nheld\r\n" +
		"$5\r\ntoken\r\n$1\r\n7\r\n" +
		"$5\r\nowner\r\n$2\r\nme\r\n" +
		"$3\r\nttl\r\n$1\r\n2\r\n" +
		"$10\r\nlast-token\r\n$1\r\n7\r\n" +
		"$11\r\ndefault-ttl\r\n$1\r\n0\r\n" +
		"$7\r\ncreated\r\n$1\r\n0\r\n" +
		"$10\r\nlock-delay\r\n$1\r\n0\r\n" +
		"$10\r\ndelay-left\r\n$1\r\n0\r\n" +
		"$7\r\nwaiters\r\n$1\r\n0\r\n" +
		"$5\r\nlimit\r\n$1\r\n0\r\n" +
		"$4\r\nmode\r\n$9\r\nexclusive\r\n" +
		"$13\r\nholders-total\r\n$1\r\n1\r\n" +
		"$7\r\nholders\r\n*1\r\n" +
		"*6\r\n$5\r\ntoken\r\n$1\r\n7\r\n$5\r\nowner\r\n$2\r\nme\r\n$3\r\nttl\r\n$1\r\n2\r\n"
	if got := statusReply([]string{"state", "held", "token", "7", "owner", "me", "ttl", "2",
		"last-token", "7", "default-ttl", "0", "created", "0", "lock-delay", "0", "delay-left", "0", "waiters", "0",
		"limit", "0", "mode", "exclusive"}, holderEntry("7", "me", "2")); got != heldLiteral {
		t.Fatalf("statusReply = %q, want %q", got, heldLiteral)
	}
	wantFields := []string{"state", "token", "owner", "ttl", "last-token", "default-ttl", "created", "lock-delay", "delay-left", "waiters",
		"limit", "mode", "holders-total", "holders"}
	if !reflect.DeepEqual(StatusFields, wantFields) {
		t.Fatalf("StatusFields = %q, want %q", StatusFields, wantFields)
	}
	if want := []string{"token", "owner", "ttl"}; !reflect.DeepEqual(HolderFields, want) {
		t.Fatalf("HolderFields = %q, want %q", HolderFields, want)
	}

	tests := []struct {
		name string
		st   locker.Status
		want string
	}{
		{"held, 1500µs rounds up", locker.Status{Held: true, Token: 7, Owner: "me", TTL: 1500 * time.Microsecond, LastToken: 7,
			Holders: []locker.Holder{{Token: 7, Owner: "me", TTL: 1500 * time.Microsecond}}, HoldersTotal: 1},
			heldLiteral},
		{"held, 1ns left still shows 1", locker.Status{Held: true, Token: 3, TTL: time.Nanosecond, LastToken: 3,
			DefaultTTL: 30 * time.Second, Created: true, Holders: []locker.Holder{{Token: 3, TTL: time.Nanosecond}}, HoldersTotal: 1},
			statusReply([]string{"state", "held", "token", "3", "owner", "", "ttl", "1",
				"last-token", "3", "default-ttl", "30000", "created", "1", "lock-delay", "0", "delay-left", "0", "waiters", "0",
				"limit", "0", "mode", "exclusive"}, holderEntry("3", "", "1"))},
		{"held, whole millis", locker.Status{Held: true, Token: math.MaxUint64, Owner: "o", TTL: 30 * time.Second,
			LastToken: math.MaxUint64, DefaultTTL: 1500 * time.Microsecond, Waiters: 12,
			Holders: []locker.Holder{{Token: math.MaxUint64, Owner: "o", TTL: 30 * time.Second}}, HoldersTotal: 1},
			statusReply([]string{"state", "held", "token", "18446744073709551615", "owner", "o", "ttl", "30000",
				"last-token", "18446744073709551615", "default-ttl", "2", "created", "0", "lock-delay", "0", "delay-left", "0", "waiters", "12",
				"limit", "0", "mode", "exclusive"}, holderEntry("18446744073709551615", "o", "30000"))},
		{"shared, two holders", locker.Status{Held: true, Shared: true, LastToken: 12, Waiters: 1, HoldersTotal: 2,
			Holders: []locker.Holder{
				{Token: 11, Owner: "reader-1", TTL: 1500 * time.Microsecond, Shared: true},
				{Token: 12, TTL: 30 * time.Second, Shared: true},
			}},
			statusReply([]string{"state", "held", "token", "0", "owner", "", "ttl", "0",
				"last-token", "12", "default-ttl", "0", "created", "0", "lock-delay", "0", "delay-left", "0", "waiters", "1",
				"limit", "0", "mode", "shared"},
				holderEntry("11", "reader-1", "2"), holderEntry("12", "", "30000"))},
		{"semaphore, two of three permits", locker.Status{Held: true, Limit: 3, LastToken: 5, Created: true, DefaultTTL: time.Second, HoldersTotal: 2,
			Holders: []locker.Holder{
				{Token: 4, Owner: "a", TTL: time.Second},
				{Token: 5, Owner: "b", TTL: time.Nanosecond},
			}},
			statusReply([]string{"state", "held", "token", "0", "owner", "", "ttl", "0",
				"last-token", "5", "default-ttl", "1000", "created", "1", "lock-delay", "0", "delay-left", "0", "waiters", "0",
				"limit", "3", "mode", "permits"},
				holderEntry("4", "a", "1000"), holderEntry("5", "b", "1"))},
		{"semaphore, every permit", locker.Status{Held: true, Limit: 1, LastToken: 1, Created: true, Waiters: 2,
			Holders: []locker.Holder{{Token: 1, TTL: time.Minute}}, HoldersTotal: 1},
			statusReply([]string{"state", "held", "token", "0", "owner", "", "ttl", "0",
				"last-token", "1", "default-ttl", "0", "created", "1", "lock-delay", "0", "delay-left", "0", "waiters", "2",
				"limit", "1", "mode", "permits"}, holderEntry("1", "", "60000"))},
		{"semaphore, list cut", locker.Status{Held: true, Limit: locker.MaxLimit, LastToken: 65536, Created: true, HoldersTotal: 65536,
			Holders: []locker.Holder{{Token: 1, Owner: "a", TTL: time.Second}, {Token: 2, TTL: time.Second}}},
			cutStatusReply([]string{"state", "held", "token", "0", "owner", "", "ttl", "0",
				"last-token", "65536", "default-ttl", "0", "created", "1", "lock-delay", "0", "delay-left", "0", "waiters", "0",
				"limit", "65536", "mode", "permits"}, 65536,
				holderEntry("1", "a", "1000"), holderEntry("2", "", "1000"))},
		{"semaphore, free", locker.Status{Limit: locker.MaxLimit, LastToken: 9, Created: true},
			statusReply([]string{"state", "free", "token", "0", "owner", "", "ttl", "0",
				"last-token", "9", "default-ttl", "0", "created", "1", "lock-delay", "0", "delay-left", "0", "waiters", "0",
				"limit", "65536", "mode", ""})},
		{"free", locker.Status{LastToken: 9, DefaultTTL: 2500 * time.Millisecond, Created: true},
			statusReply([]string{"state", "free", "token", "0", "owner", "", "ttl", "0",
				"last-token", "9", "default-ttl", "2500", "created", "1", "lock-delay", "0", "delay-left", "0", "waiters", "0",
				"limit", "0", "mode", ""})},
		{"in its lock-delay", locker.Status{Delayed: true, LastToken: 5, LockDelay: 15 * time.Second, DelayLeft: 1200 * time.Microsecond},
			statusReply([]string{"state", "delayed", "token", "0", "owner", "", "ttl", "0",
				"last-token", "5", "default-ttl", "0", "created", "0", "lock-delay", "15000", "delay-left", "2", "waiters", "0",
				"limit", "0", "mode", ""})},
		{"semaphore in its lock-delay", locker.Status{Delayed: true, Limit: 2, LastToken: 5, LockDelay: time.Second, DelayLeft: time.Nanosecond},
			statusReply([]string{"state", "delayed", "token", "0", "owner", "", "ttl", "0",
				"last-token", "5", "default-ttl", "0", "created", "0", "lock-delay", "1000", "delay-left", "1", "waiters", "0",
				"limit", "2", "mode", ""})},
		{"zero value", locker.Status{},
			statusReply([]string{"state", "free", "token", "0", "owner", "", "ttl", "0",
				"last-token", "0", "default-ttl", "0", "created", "0", "lock-delay", "0", "delay-left", "0", "waiters", "0",
				"limit", "0", "mode", ""})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := written(t, func(w *redcon.Writer) { WriteStatus(w, tt.st, nil) })
			if got != tt.want {
				t.Fatalf("WriteStatus(%+v)\n got %q\nwant %q", tt.st, got, tt.want)
			}
		})
	}
}

func TestWriteScan(t *testing.T) {
	tests := []struct {
		name  string
		next  uint64
		names []string
		want  string
	}{
		{"done, empty", 0, nil, "*2\r\n$1\r\n0\r\n*0\r\n"},
		{"more to come", 42, []string{"a", "bc"}, "*2\r\n$2\r\n42\r\n*2\r\n$1\r\na\r\n$2\r\nbc\r\n"},
		{"largest cursor, empty name", math.MaxUint64, []string{""},
			"*2\r\n$20\r\n18446744073709551615\r\n*1\r\n$0\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := written(t, func(w *redcon.Writer) { WriteScan(w, tt.next, tt.names) })
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriteTokenAndBool(t *testing.T) {
	tests := []struct {
		name  string
		write func(w *redcon.Writer)
		want  string
	}{
		{"token granted", func(w *redcon.Writer) { WriteToken(w, 7, true) }, ":7\r\n"},
		{"token zero granted", func(w *redcon.Writer) { WriteToken(w, 0, true) }, ":0\r\n"},
		{"largest token", func(w *redcon.Writer) { WriteToken(w, math.MaxUint64, true) }, ":18446744073709551615\r\n"},
		{"not granted is nil", func(w *redcon.Writer) { WriteToken(w, 7, false) }, "$-1\r\n"},
		{"true", func(w *redcon.Writer) { WriteBool(w, true) }, ":1\r\n"},
		{"false", func(w *redcon.Writer) { WriteBool(w, false) }, ":0\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := written(t, tt.write); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriteTokens(t *testing.T) {
	tests := []struct {
		name   string
		tokens []uint64
		want   string
	}{
		{"not granted is a nil array", nil, "*-1\r\n"},
		{"empty but granted is an empty array", []uint64{}, "*0\r\n"},
		{"one", []uint64{7}, "*1\r\n:7\r\n"},
		{"in the order given", []uint64{9, 0, math.MaxUint64, 3},
			"*4\r\n:9\r\n:0\r\n:18446744073709551615\r\n:3\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := written(t, func(w *redcon.Writer) { WriteTokens(w, tt.tokens) }); got != tt.want {
				t.Fatalf("WriteTokens(%v) = %q, want %q", tt.tokens, got, tt.want)
			}
		})
	}
}

func TestCheckSubscribePattern(t *testing.T) {
	tests := []struct {
		pattern string
		want    int
		err     error
	}{
		{"__lock__:jobs:*", 0, nil},
		{"__lock__:*:daily", 6, nil},
		{"__lock__:*" + strings.Repeat("a", MaxPatternBacktrack), MaxPatternBacktrack, nil},
		{"__lock__:*" + strings.Repeat("a", MaxPatternBacktrack+1), 0, ErrPatternBacktrack},
		{"*" + strings.Repeat("[a-z]", 13), 0, ErrPatternBacktrack},
		{strings.Repeat("a", MaxPatternLen+1), 0, ErrPatternTooLong},
	}
	for _, tt := range tests {
		got, err := CheckSubscribePattern([]byte(tt.pattern))
		if got != tt.want || err != tt.err {
			t.Errorf("CheckSubscribePattern(%q) = %d, %v; want %d, %v", tt.pattern, got, err, tt.want, tt.err)
		}
	}
}
