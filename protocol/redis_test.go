package protocol

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseSet(t *testing.T) {
	tests := []struct {
		in   string
		want SetRequest
		err  error
	}{
		{"SET k v NX PX 1500", SetRequest{TTL: 1500 * time.Millisecond}, nil},
		{"set k v px 1500 nx", SetRequest{TTL: 1500 * time.Millisecond}, nil},
		{"set k v ex 8 nx", SetRequest{TTL: 8 * time.Second}, nil},
		{"SET k v NX", SetRequest{}, nil},
		{"SET k v NX KEEPTTL", SetRequest{}, nil},
		{"SET k v NX NX PX 5", SetRequest{TTL: 5 * time.Millisecond}, nil}, // Redis takes NX twice
		{"SET k v NX PXAT 1700000000000", SetRequest{AtMillis: 1700000000000}, nil},
		{"SET k v NX EXAT 1700000000", SetRequest{AtMillis: 1700000000000}, nil},
		{"SET k v", SetRequest{}, ErrSetNeedsNX},
		{"SET k v PX 100", SetRequest{}, ErrSetNeedsNX},
		{"SET k v XX PX 100", SetRequest{}, ErrSetNeedsNX},
		{"SET k v NX XX", SetRequest{}, ErrSyntax},
		{"SET k v NX GET", SetRequest{}, ErrSetGet},
		{"SET k v NX PX 1 EX 1", SetRequest{}, ErrSyntax},
		{"SET k v NX PX 1 KEEPTTL", SetRequest{}, ErrSyntax},
		{"SET k v NX PX", SetRequest{}, ErrSyntax},
		{"SET k v NX FOO", SetRequest{}, ErrSyntax},
		{"SET k v NX PX abc", SetRequest{}, ErrNotInteger},
		{"SET k v NX PX 0", SetRequest{}, InvalidExpireError("set")},
		{"SET k v NX PX -5", SetRequest{}, InvalidExpireError("set")},
		{"SET k v NX EX 9223372036854775", SetRequest{}, InvalidExpireError("set")},
		{"SET k v PX 0", SetRequest{}, InvalidExpireError("set")}, // the value is checked first, as in Redis
	}
	for _, tt := range tests {
		got, err := ParseSet(fields(tt.in))
		if !sameError(err, tt.err) {
			t.Errorf("%s: error %v, want %v", tt.in, err, tt.err)
			continue
		}
		if err == nil && (got.TTL != tt.want.TTL || got.AtMillis != tt.want.AtMillis || string(got.Key) != "k" || string(got.Value) != "v") {
			t.Errorf("%s = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	if _, err := ParseSet([][]byte{[]byte("SET"), []byte("k"), {}, []byte("NX")}); err != ErrEmptyValue {
		t.Errorf("SET with an empty value: %v, want ErrEmptyValue", err)
	}
}

// sameError compares wire errors by their text.
func sameError(got, want error) bool {
	if got == nil || want == nil {
		return got == want
	}
	return got.Error() == want.Error()
}

func TestParseExpire(t *testing.T) {
	tests := []struct {
		in   string
		want ExpireRequest
		err  error
	}{
		{"PEXPIRE k 1500", ExpireRequest{TTL: 1500 * time.Millisecond}, nil},
		{"EXPIRE k 8", ExpireRequest{TTL: 8 * time.Second}, nil},
		{"PEXPIRE k 0", ExpireRequest{}, nil},
		{"PEXPIRE k -1", ExpireRequest{TTL: -time.Millisecond}, nil},
		{"PEXPIREAT k 1700000000000", ExpireRequest{AtMillis: 1700000000000, Absolute: true}, nil},
		{"EXPIREAT k 1700000000", ExpireRequest{AtMillis: 1700000000000, Absolute: true}, nil},
		{"PEXPIRE k x", ExpireRequest{}, ErrNotInteger},
		{"PEXPIRE k 10 NX", ExpireRequest{}, ErrExpireOptions},
		{"PEXPIRE k 10 FOO", ExpireRequest{}, UnsupportedOptionError([]byte("FOO"))},
		{"EXPIRE k 9223372036854775807", ExpireRequest{}, InvalidExpireError("expire")},
		{"PEXPIRE k 9223372036854775807", ExpireRequest{}, InvalidExpireError("pexpire")},
	}
	for _, tt := range tests {
		args := fields(tt.in)
		got, err := ParseExpire(strings.ToLower(string(args[0])), args)
		if !sameError(err, tt.err) {
			t.Errorf("%s: error %v, want %v", tt.in, err, tt.err)
			continue
		}
		if err == nil && (got.TTL != tt.want.TTL || got.AtMillis != tt.want.AtMillis || got.Absolute != tt.want.Absolute) {
			t.Errorf("%s = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseEval(t *testing.T) {
	tests := []struct {
		in         string
		keys, args int
		err        error
	}{
		{"EVAL s 0", 0, 0, nil},
		{"EVAL s 1 k a b", 1, 2, nil},
		{"EVAL s 2 k1 k2", 2, 0, nil},
		{"EVAL s 3 k1 k2", 0, 0, ErrTooManyNumKeys},
		{"EVAL s -1", 0, 0, ErrNegativeNumKeys},
		{"EVAL s x", 0, 0, ErrNotInteger},
	}
	for _, tt := range tests {
		got, err := ParseEval(fields(tt.in))
		if err != tt.err || err == nil && (len(got.Keys) != tt.keys || len(got.Args) != tt.args) {
			t.Errorf("%s = %d keys, %d args, %v; want %d, %d, %v", tt.in, len(got.Keys), len(got.Args), err, tt.keys, tt.args, tt.err)
		}
	}
	c := Lookup([]byte("evalsha"))
	if keys := c.Keys(fields("EVALSHA sha 2 a b c")); len(keys) != 2 || string(keys[1]) != "b" {
		t.Errorf("EVALSHA's keys = %q, want a and b (ACL key rules read them)", keys)
	}
}

// TestKnownScriptHashes: each known script's SHA1 is that of its text, the
// hash its library sends in EVALSHA.
func TestKnownScriptHashes(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range KnownScripts {
		sum := sha1.Sum([]byte(s.Text))
		if got := hex.EncodeToString(sum[:]); got != s.SHA1 {
			t.Errorf("%s: SHA1 of its text %s, listed as %s", s.Library, got, s.SHA1)
		}
		if seen[s.SHA1] {
			t.Errorf("%s listed twice", s.SHA1)
		}
		seen[s.SHA1] = true
		if KnownScriptBySHA([]byte(strings.ToUpper(s.SHA1))) == nil || RecognizeScript([]byte(s.Text)) == nil {
			t.Errorf("%s: not found by its SHA1 or its text", s.Library)
		}
	}
}

// TestRecognizeScriptShape: a known script respelt (spacing, comments) is
// recognised; one that does something else is not.
func TestRecognizeScriptShape(t *testing.T) {
	release := `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`
	respelt := "-- release\nif redis.call(\"get\", KEYS[1]) == ARGV[1]\n\tthen return redis.call(\"del\", KEYS[1])   -- ours\nelse return 0 end\n"
	if s := RecognizeScript([]byte(respelt)); s == nil || s.Kind != ScriptRelease {
		t.Fatalf("a respelt release: %+v", s)
	}
	// The usual release, as scripts/loadgen and many applications write it.
	tight := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	if s := RecognizeScript([]byte(tight)); s == nil || s.Kind != ScriptRelease {
		t.Fatalf("the release without spaces after commas: %+v", s)
	}
	for _, other := range []string{
		strings.Replace(release, "del", "unlink", 1),
		strings.Replace(release, "==", "~=", 1),
		strings.Replace(release, "return 0", "return 00", 1),
		strings.Replace(release, "else return", "elsereturn", 1),
		"return 1",
		"",
	} {
		if s := RecognizeScript([]byte(other)); s != nil {
			t.Errorf("%q recognised as %s", other, s.Library)
		}
	}
}

func TestScriptCall(t *testing.T) {
	find := func(lib string) *Script {
		for i := range KnownScripts {
			if KnownScripts[i].Library == lib {
				return &KnownScripts[i]
			}
		}
		t.Fatalf("no script of %s", lib)
		return nil
	}
	tests := []struct {
		lib  string
		in   string
		want ScriptCall
		err  error
	}{
		{"redis-py Lock.release", "EVALSHA x 1 k tok", ScriptCall{Value: []byte("tok")}, nil},
		{"redis-py Lock.extend", "EVALSHA x 1 k tok 2000 0", ScriptCall{Value: []byte("tok"), TTL: 2 * time.Second, Add: true}, nil},
		{"redis-py Lock.extend", "EVALSHA x 1 k tok 2000 1", ScriptCall{Value: []byte("tok"), TTL: 2 * time.Second}, nil},
		{"bsm/redislock Obtain", "EVALSHA x 1 k tokmeta 3 2000", ScriptCall{Value: []byte("tokmeta"), TTL: 2 * time.Second}, nil},
		{"@sesamecare-oss/redlock acquire", "EVALSHA x 2 a b 0 tok 1000", ScriptCall{Value: []byte("tok"), TTL: time.Second}, nil},
		{"redsync Mutex.Extend", "EVALSHA x 1 k tok", ScriptCall{}, ScriptArgsError("redsync Mutex.Extend")},
		{"redsync Mutex.Extend", "EVALSHA x 0 tok 100", ScriptCall{}, ScriptArgsError("redsync Mutex.Extend")},
		{"redsync Mutex.Extend", "EVALSHA x 1 k tok soon", ScriptCall{}, ErrNotInteger},
		{"redis-semaphore Semaphore.acquire", "EVALSHA x 1 k 3 id 100 1", ScriptCall{}, UnsupportedScriptError("redis-semaphore Semaphore.acquire")},
	}
	for _, tt := range tests {
		req, err := ParseEval(fields(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		got, err := find(tt.lib).Call(req)
		if !sameError(err, tt.err) {
			t.Errorf("%s %s: error %v, want %v", tt.lib, tt.in, err, tt.err)
			continue
		}
		if err == nil && (string(got.Value) != string(tt.want.Value) || got.TTL != tt.want.TTL || got.Add != tt.want.Add) {
			t.Errorf("%s %s = %+v, want %+v", tt.lib, tt.in, got, tt.want)
		}
	}
	var e *Error
	if !errors.As(UnknownScriptError(), &e) || e.Code != CodeErr {
		t.Fatal("UnknownScriptError is not an ERR")
	}
}

// TestScriptCache: a respelt script is learnt by its SHA1, bounded, and
// forgotten by Flush; the libraries' own stay known.
func TestScriptCache(t *testing.T) {
	var sc ScriptCache
	own := KnownScripts[0]
	respelt := own.Text + "\n-- ours\n"
	sha := ScriptSHA1([]byte(respelt))
	if sc.Lookup([]byte(sha)) != nil {
		t.Fatal("a respelt script known before it was given")
	}
	if s, got := sc.Recognize([]byte(respelt)); s == nil || got != sha || sc.Lookup([]byte(strings.ToUpper(sha))) != s {
		t.Fatalf("Recognize = %v, %q; want the script and %s, then found by it", s, got, sha)
	}
	if s, _ := sc.Recognize([]byte("return 1")); s != nil || sc.Lookup([]byte(ScriptSHA1([]byte("return 1")))) != nil {
		t.Fatal("an unknown script was learnt")
	}
	for i := range maxLearntScripts {
		sc.Recognize([]byte(own.Text + strings.Repeat(" ", i+1)))
	}
	if n := len(sc.learnt); n > maxLearntScripts {
		t.Fatalf("%d spellings learnt, more than %d", n, maxLearntScripts)
	}
	sc.Flush()
	if sc.Lookup([]byte(sha)) != nil || sc.Lookup([]byte(own.SHA1)) == nil {
		t.Fatal("Flush: a learnt spelling stays, or a library's own is forgotten")
	}
}
