package protocol

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"time"
)

// Scripts: Redis lock libraries take, extend and release their locks with
// short Lua scripts (compare-and-delete, compare-and-pexpire...).
// leasehold runs no Lua: it recognises each library's script, by its SHA1
// or by its text with comments and spacing set aside, and runs it as the
// lock operation it is, so that a script is one entry in cluster mode's
// log, deterministic on every replica, and a lock library's release costs
// what RELEASE does. docs/redis-compat.md says why, and lists the scripts.

// ScriptKind is the lock operation a known script performs.
type ScriptKind uint8

const (
	// ScriptUnsupported: a library's script that is no lock operation
	// leasehold has (redis-semaphore's Semaphore, on sorted sets).
	ScriptUnsupported ScriptKind = iota
	// ScriptRelease: if KEYS[1] holds ARGV[1], delete it: 1, else 0.
	ScriptRelease
	// ScriptReleaseOrMissing: ScriptRelease, but -1 when KEYS[1] does not
	// exist (redsync's "lock already expired").
	ScriptReleaseOrMissing
	// ScriptExtend: if KEYS[1] holds ARGV[1], PEXPIRE it ARGV[2]: 1, else 0.
	ScriptExtend
	// ScriptExtendAddOrReplace: ScriptExtend adding ARGV[2] to the time
	// left when ARGV[3] is "0" (redis-py's extend).
	ScriptExtendAddOrReplace
	// ScriptExtendOrAcquire: ScriptExtend, or SET KEYS[1] ARGV[1] NX PX
	// ARGV[2] when it does not exist: 1, else 0.
	ScriptExtendOrAcquire
	// ScriptObtain: SET KEYS[1] ARGV[1] NX PX ARGV[3], or if KEYS[1] holds
	// ARGV[1] already, PEXPIRE it ARGV[3]: +OK, else nil (bsm/redislock).
	ScriptObtain
	// ScriptOwnedTTL: if KEYS[1] holds ARGV[1], its PTTL, else -3.
	ScriptOwnedTTL
	// ScriptAcquireAll: if none of KEYS exists, SET each to ARGV[1] PX
	// ARGV[2]: #KEYS, else 0 (redlock).
	ScriptAcquireAll
	// ScriptExtendAll: if every one of KEYS holds ARGV[1], PX ARGV[2]
	// each: #KEYS, else 0.
	ScriptExtendAll
	// ScriptReleaseEach: delete each of KEYS that holds ARGV[1]: how many.
	ScriptReleaseEach
)

// Script is a lock library's script leasehold runs.
type Script struct {
	Library string // who sends it, and what for
	Kind    ScriptKind
	// ArgOffset is how many arguments come before the ones Kind reads:
	// @sesamecare-oss/redlock's scripts begin with a database number (which
	// their SELECT sets; leasehold has database 0 only, and ignores it).
	ArgOffset int
	SHA1      string // of Text, in lower-case hex
	Text      string
}

// ReadOnly reports whether the script only reads (EVAL_RO may run it).
func (s *Script) ReadOnly() bool { return s.Kind == ScriptOwnedTTL }

var (
	// scriptsBySHA finds a known script by the SHA1 of its exact text.
	scriptsBySHA = map[string]*Script{}
	// scriptsByShape finds one by the SHA1 of its shape (scriptShape), so
	// that a library's release that changed only spacing or comments runs.
	scriptsByShape = map[[sha1.Size]byte]*Script{}
)

func init() {
	for i := range KnownScripts {
		s := &KnownScripts[i]
		scriptsBySHA[s.SHA1] = s
		scriptsByShape[sha1.Sum([]byte(scriptShape(s.Text)))] = s
	}
}

// ScriptSHA1 is the SHA1 of a script's text in lower-case hex, as Redis
// names scripts.
func ScriptSHA1(text []byte) string {
	sum := sha1.Sum(text)
	return hex.EncodeToString(sum[:])
}

// KnownScriptBySHA finds a known script by the SHA1 (in hex, either case) of
// its exact text, without allocating; nil if none.
func KnownScriptBySHA(sha []byte) *Script {
	lower, ok := LowerSHA1(sha)
	if !ok {
		return nil
	}
	return scriptsBySHA[string(lower[:])]
}

// LowerSHA1 is a SHA1 in hex in lower case, and false if sha is not 40
// bytes long.
func LowerSHA1(sha []byte) (lower [2 * sha1.Size]byte, ok bool) {
	if len(sha) != 2*sha1.Size {
		return lower, false
	}
	for i, c := range sha {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return lower, true
}

// RecognizeScript finds the known script text is, exactly or but for its
// comments and spacing; nil if it is none of them.
func RecognizeScript(text []byte) *Script {
	if s := scriptsBySHA[ScriptSHA1(text)]; s != nil {
		return s
	}
	return scriptsByShape[sha1.Sum([]byte(scriptShape(string(text))))]
}

// scriptShape is a Lua script without its comments and with no white space
// but the one space that keeps two words apart: what two spellings of the
// same script share ("get",KEYS[1] and "get", KEYS[1] alike). The
// libraries' scripts have no "--" and no white space inside their strings,
// where this would change them.
func scriptShape(text string) string {
	var b strings.Builder
	b.Grow(len(text))
	pendingSpace := false
	for line := range strings.Lines(text) {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' {
				pendingSpace = b.Len() > 0
				continue
			}
			if pendingSpace && isWordByte(c) {
				if s := b.String(); isWordByte(s[len(s)-1]) {
					b.WriteByte(' ')
				}
			}
			pendingSpace = false
			b.WriteByte(c)
		}
		pendingSpace = b.Len() > 0
	}
	return b.String()
}

// isWordByte reports whether c may be part of a Lua name or number.
func isWordByte(c byte) bool {
	return c == '_' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// ScriptCall is a known script's call: its keys and the arguments its Kind
// reads.
type ScriptCall struct {
	Script *Script
	Keys   [][]byte
	Value  []byte        // the owner's value, ARGV[1] after the offset
	TTL    time.Duration // ARGV[2] (ScriptObtain's ARGV[3]) as milliseconds; at or below 0 for a PEXPIRE that deletes
	Add    bool          // ScriptExtendAddOrReplace: ARGV[3] is "0"
}

// Call reads req's keys and arguments as s's.
func (s *Script) Call(req EvalRequest) (ScriptCall, error) {
	call := ScriptCall{Script: s, Keys: req.Keys}
	if s.Kind == ScriptUnsupported {
		return call, UnsupportedScriptError(s.Library)
	}
	args := req.Args
	if len(args) < s.ArgOffset {
		return call, ScriptArgsError(s.Library)
	}
	args = args[s.ArgOffset:]
	need := 1 // the value
	switch s.Kind {
	case ScriptExtend, ScriptExtendOrAcquire, ScriptAcquireAll, ScriptExtendAll:
		need = 2
	case ScriptExtendAddOrReplace, ScriptObtain:
		need = 3
	}
	if len(args) < need || len(req.Keys) == 0 {
		return call, ScriptArgsError(s.Library)
	}
	call.Value = args[0]
	if need > 1 {
		ms := args[1]
		if s.Kind == ScriptObtain {
			ms = args[2]
		}
		n, ok := parseInt(ms)
		if !ok {
			return call, ErrNotInteger
		}
		if n > int64(time.Duration(1<<63-1)/time.Millisecond) || n < -int64(time.Duration(1<<63-1)/time.Millisecond) {
			return call, InvalidExpireError("pexpire")
		}
		call.TTL = time.Duration(n) * time.Millisecond
	}
	call.Add = s.Kind == ScriptExtendAddOrReplace && string(args[2]) == "0"
	return call, nil
}

// KnownScriptLibraries names the libraries whose scripts leasehold runs,
// for the error a script of none of them gets.
const KnownScriptLibraries = "redis-py's Lock, redsync, bsm/redislock, redlock 4, @sesamecare-oss/redlock and redis-semaphore's Mutex"

// ScriptCache holds the SHA1s of scripts a node was given (EVAL, SCRIPT
// LOAD) in a spelling other than a library's own, whose SHA1s every node
// knows from the start. A library that gets NOSCRIPT sends the script
// again, as it does to a Redis that restarted or to another node.
type ScriptCache struct {
	mu     sync.Mutex
	learnt map[string]*Script
}

// maxLearntScripts bounds the cache: beyond it, the oldest spellings are
// forgotten all at once (SCRIPT FLUSH's effect), and their libraries send
// them again.
const maxLearntScripts = 1024

// Recognize returns the known script text is, learning its SHA1 if it is
// another spelling of one, and its SHA1; nil if it is none.
func (sc *ScriptCache) Recognize(text []byte) (*Script, string) {
	sha := ScriptSHA1(text)
	if s := KnownScriptBySHA([]byte(sha)); s != nil {
		return s, sha
	}
	s := RecognizeScript(text)
	if s == nil {
		return nil, sha
	}
	sc.mu.Lock()
	if sc.learnt == nil || len(sc.learnt) >= maxLearntScripts {
		sc.learnt = map[string]*Script{}
	}
	sc.learnt[sha] = s
	sc.mu.Unlock()
	return s, sha
}

// Lookup finds a script by its SHA1 in hex, either case; nil if this node
// does not have it.
func (sc *ScriptCache) Lookup(sha []byte) *Script {
	if s := KnownScriptBySHA(sha); s != nil {
		return s
	}
	lower, ok := LowerSHA1(sha)
	if !ok {
		return nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.learnt[string(lower[:])]
}

// Flush forgets the learnt spellings (SCRIPT FLUSH); the libraries' own
// scripts stay known.
func (sc *ScriptCache) Flush() {
	sc.mu.Lock()
	sc.learnt = nil
	sc.mu.Unlock()
}
