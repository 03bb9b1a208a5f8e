package glob

import (
	"bytes"
	"math/rand/v2"
	"path"
	"strings"
	"testing"
)

// matchTests pins Redis's stringmatchlen results (case-sensitive). Each row
// was checked against Redis's C matcher.
var matchTests = []struct {
	name    string
	pattern string
	key     string
	want    bool
}{
	// Literals.
	{"literal/equal", "hello", "hello", true},
	{"literal/case-sensitive", "Hello", "hello", false},
	{"literal/last byte differs", "hello", "hellO", false},
	{"literal/key shorter", "hello", "hell", false},
	{"literal/key longer", "hell", "hello", false},
	{"literal/NUL byte", "a\x00b", "a\x00b", true},
	{"literal/high byte", "\xff\xfe", "\xff\xfe", true},

	// '*'.
	{"star/alone", "*", "anything", true},
	{"star/alone one byte", "*", "a", true},
	{"star/alone any bytes", "*", "\x00\xff", true},
	{"star/middle", "h*o", "hello", true},
	{"star/middle empty run", "h*o", "ho", true},
	{"star/middle no match", "h*o", "hellx", false},
	{"star/leading", "*llo", "hello", true},
	{"star/leading exact", "*b", "b", true},
	{"star/trailing", "he*", "hello", true},
	{"star/trailing empty run", "he*", "he", true},
	{"star/collapsed", "**", "x", true},
	{"star/collapsed middle", "a***b", "ab", true},
	{"star/collapsed middle run", "a***b", "axyzb", true},
	{"star/collapsed trailing", "a***", "a", true},
	{"star/several", "*a*b*c*", "xxaxxbxxcxx", true},
	{"star/several out of order", "*a*b*c*", "cba", false},
	{"star/backtrack", "*abc", "ababc", true},
	{"star/backtrack repeated", "*aab", "aaab", true},
	{"star/backtrack twice", "a*b*c", "abbbcbc", true},
	{"star/backtrack fails", "a*b*c", "abbbcb", false},
	{"star/then question", "*?", "a", true},

	// '?'.
	{"question/one byte", "h?llo", "hello", true},
	{"question/needs a byte", "h?llo", "hllo", false},
	{"question/only one", "?", "ab", false},
	{"question/three", "???", "abc", true},
	{"question/high byte", "?", "\xff", true},
	{"question/NUL byte", "?", "\x00", true},

	// Bracket sets.
	{"set/member", "[abc]", "b", true},
	{"set/not member", "[abc]", "d", false},
	{"set/in word", "h[ae]llo", "hallo", true},
	{"set/in word no match", "h[ae]llo", "hillo", false},
	{"set/one byte only", "[abc]", "ab", false},
	{"set/negated outside", "[^abc]", "d", true},
	{"set/negated inside", "[^abc]", "a", false},
	{"set/negated high byte", "[^a]", "\xff", true},
	{"set/star is literal", "[*]", "*", true},
	{"set/star is literal no match", "[*]", "a", false},
	{"set/question is literal", "[?]", "a", false},
	{"set/caret not first is literal", "[a^]", "^", true},
	{"set/empty", "[]", "a", false},
	{"set/empty then literal", "[]a]", "]", false},
	{"set/empty negated", "[^]", "x", true},
	{"set/escaped close", "[\\]]", "]", true},
	{"set/escaped caret", "[\\^a]", "^", true},
	{"set/escape breaks range dash", "[a\\-z]", "-", true},
	{"set/escape breaks range", "[a\\-z]", "m", false},
	{"set/leading dash literal", "[-a]", "-", true},

	// Ranges.
	{"range/inside", "[a-c]", "b", true},
	{"range/low end", "[a-c]", "a", true},
	{"range/high end", "[a-c]", "c", true},
	{"range/outside", "[a-c]", "d", false},
	{"range/reversed is swapped", "[z-a]", "m", true},
	{"range/reversed outside", "[c-a]", "d", false},
	{"range/negated", "[^a-c]", "d", true},
	{"range/negated inside", "[^a-c]", "b", false},
	{"range/two", "[a-cx-z]", "y", true},
	{"range/digits then star", "lock:[0-9][0-9]*", "lock:42:x", true},
	{"range/digits no match", "lock:[0-9][0-9]*", "lock:4x", false},
	{"range/high bytes", "[\x80-\xff]", "\x90", true},
	{"range/unsigned bytes", "[a-\xff]", "\xff", true},
	{"range/unsigned bytes low", "[a-\xff]", "\x00", false},
	// "a-]" is read as the range ']'..'a' (swapped), which uses up the
	// closing ']': the set then runs to the end of the pattern.
	{"range/close as range end", "[a-]", "_", true},
	{"range/close as range end dash", "[a-]", "-", false},

	// Unterminated '['.
	{"unterminated/alone", "[", "[", false},
	{"unterminated/alone any", "[", "x", false},
	{"unterminated/negated alone", "[^", "x", true},
	{"unterminated/member", "[a", "a", true},
	{"unterminated/members", "[ab", "b", true},
	{"unterminated/not member", "[ab", "c", false},
	{"unterminated/after literal", "x[ab", "xb", true},
	{"unterminated/takes rest of pattern", "[a*", "ab", false},
	{"unterminated/star inside", "[a*", "*", true},
	{"unterminated/range", "[a-c", "b", true},
	{"unterminated/trailing backslash", "[\\", "\\", true},

	// Backslash escapes.
	{"escape/star", "\\*", "*", true},
	{"escape/star not wildcard", "\\*", "a", false},
	{"escape/question", "\\?", "?", true},
	{"escape/question not wildcard", "\\?", "x", false},
	{"escape/bracket", "\\[a]", "[a]", true},
	{"escape/backslash", "\\\\", "\\", true},
	{"escape/plain byte", "\\a", "a", true},
	{"escape/after star", "*\\*", "abc*", true},
	{"escape/after star no match", "*\\*", "abc", false},
	{"escape/trailing backslash", "a\\", "a\\", true},
	{"escape/trailing backslash alone", "\\", "\\", true},
	{"escape/trailing backslash other", "a\\", "ab", false},

	// Empty pattern or key. Redis matches an empty key only against the
	// empty pattern, even when the pattern is all stars.
	{"empty/both", "", "", true},
	{"empty/pattern", "", "a", false},
	{"empty/key star", "*", "", false},
	{"empty/key stars", "**", "", false},
	{"empty/key question", "?", "", false},
	{"empty/key set", "[a]", "", false},
	{"empty/key negated set", "[^a]", "", false},
	{"empty/key backslash", "\\", "", false},
}

func TestMatch(t *testing.T) {
	for _, tt := range matchTests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Match([]byte(tt.pattern), []byte(tt.key)); got != tt.want {
				t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.key, got, tt.want)
			}
		})
	}
}

// TestMatchPathological runs patterns that made Redis's recursive matcher
// exponential (CVE-2022-36021). They must simply return; the test has no
// timing assertion, but an exponential matcher would not finish.
func TestMatchPathological(t *testing.T) {
	as := strings.Repeat("a", 10_000)
	tests := []struct {
		name    string
		pattern string
		key     string
		want    bool
	}{
		{"30 star-a then b", strings.Repeat("*a", 30) + "b", as, false},
		{"CVE-2022-36021 shape", "*a*a*a*a*a*a*a*a*a*b", as, false},
		{"30 star-a", strings.Repeat("*a", 30), as, true},
		{"30 star-a then b present", strings.Repeat("*a", 30) + "b", as + "b", true},
		{"30 star-question then b", strings.Repeat("*?", 30) + "b", as, false},
		{"30 star-set then digit", strings.Repeat("*[a-z]", 30) + "0", as, false},
		{"1000 star-a", strings.Repeat("*a", 1000), as, true},
		{"1000 star-a then b", strings.Repeat("*a", 1000) + "b", as, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Match([]byte(tt.pattern), []byte(tt.key)); got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMatchStarGroupLimit pins Redis 7's cut-off: a pattern whose 1001st
// '*' group is not its last byte matches nothing.
func TestMatchStarGroupLimit(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	starA := func(n int) string { return strings.Repeat("*a", n) }
	tests := []struct {
		name    string
		pattern string
		key     string
		want    bool
	}{
		{"1000 groups", starA(1000), a(1000), true},
		{"1001 groups", starA(1001), a(1001), false},
		{"1001 groups longer key", starA(1001), a(5000), false},
		{"1001st group trailing", starA(1000) + "*", a(1000) + "tail", true},
		{"1001st group before literal", starA(1000) + "*b", a(1000) + "b", false},
		{"1000th group before literal", starA(999) + "*b", a(999) + "b", true},
		{"runs of stars count once", strings.Repeat("**a", 1000), a(1000), true},
		{"escaped stars do not count", strings.Repeat("\\*", 2000), strings.Repeat("*", 2000), true},
		{"stars in sets do not count", strings.Repeat("[*]", 2000), strings.Repeat("*", 2000), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Match([]byte(tt.pattern), []byte(tt.key)); got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMatchAgreesWithPathMatch compares Match with path.Match on patterns
// where the two define the same language: well-formed patterns with ranges
// written low-high, over keys that are non-empty, ASCII, and free of '/'.
func TestMatchAgreesWithPathMatch(t *testing.T) {
	fixed := []string{
		"*", "a*", "*a", "a*b", "?", "a?c", "[abc]", "[^abc]", "[a-c]",
		"[^a-c]*", "*[ab]?", "\\*", "\\?a", "\\[*", "*\\\\", "a*b*c",
	}
	r := rand.New(rand.NewPCG(7, 11))
	patterns := fixed
	for range 2000 {
		patterns = append(patterns, randomSimplePattern(r))
	}
	const keyBytes = "abcd*?[\\"
	for _, pattern := range patterns {
		for range 50 {
			key := make([]byte, 1+r.IntN(8))
			for i := range key {
				key[i] = keyBytes[r.IntN(len(keyBytes))]
			}
			want, err := path.Match(pattern, string(key))
			if err != nil {
				t.Fatalf("path.Match(%q): %v (generator made a bad pattern)", pattern, err)
			}
			if got := Match([]byte(pattern), key); got != want {
				t.Fatalf("Match(%q, %q) = %v, path.Match says %v", pattern, key, got, want)
			}
		}
	}
}

// randomSimplePattern returns a pattern that path.Match accepts and reads
// the way Redis does.
func randomSimplePattern(r *rand.Rand) string {
	const letters = "abcd"
	const escapable = "abc*?[]\\"
	letter := func() byte { return letters[r.IntN(len(letters))] }
	var b []byte
	for n := r.IntN(8); n > 0; n-- {
		switch r.IntN(6) {
		case 0:
			b = append(b, '*')
		case 1:
			b = append(b, '?')
		case 2:
			b = append(b, '[')
			if r.IntN(3) == 0 {
				b = append(b, '^')
			}
			for m := 1 + r.IntN(3); m > 0; m-- {
				lo := letter()
				if r.IntN(2) == 0 {
					hi := letter()
					b = append(b, min(lo, hi), '-', max(lo, hi))
				} else {
					b = append(b, lo)
				}
			}
			b = append(b, ']')
		case 3:
			b = append(b, '\\', escapable[r.IntN(len(escapable))])
		default:
			b = append(b, letter())
		}
	}
	return string(b)
}

func TestMatchEscapedKey(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if !Match(escapeAll(all), all) {
		t.Fatal("escaped pattern of all 256 bytes does not match them")
	}
	if Match(escapeAll(all), all[1:]) {
		t.Fatal("escaped pattern matches a shorter key")
	}
}

// TestMatchCost checks that MatchCost reports the work it did within its
// documented bound, and that the work of a long hostile pattern over a long
// key shows: LOCKS ... MATCH relies on it to stop a call early.
func TestMatchCost(t *testing.T) {
	long := strings.Repeat("a", 1024)
	tests := []struct {
		name     string
		pattern  string
		key      string
		minSteps int
	}{
		{"literal", "hello", "hello", 5},
		{"empty key", "*", "", 1},
		{"trailing star", "a*", long, 1},
		{"star-a then b", strings.Repeat("*a", 30) + "b", long, 1024},
		// The shape of the report: 503 bytes, a set read at every byte.
		{"503-byte sets", "*" + strings.Repeat("[a-z]", 100) + "b!", long, 100_000},
		{"one long set", "*[" + strings.Repeat("xyz", 80) + "a]b", long, 200_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, k := []byte(tt.pattern), []byte(tt.key)
			matched, steps := MatchCost(p, k)
			if matched != Match(p, k) {
				t.Fatalf("MatchCost says %v, Match %v", matched, !matched)
			}
			if bound := 2 * (len(p) + 1) * (len(k) + 1); steps > bound {
				t.Errorf("steps = %d, above the bound %d", steps, bound)
			}
			if steps < tt.minSteps {
				t.Errorf("steps = %d, want at least %d: the work done is under-reported", steps, tt.minSteps)
			}
		})
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	pattern := []byte(strings.Repeat("*a", 30) + "[^b-c]?\\*b")
	key := bytes.Repeat([]byte("a"), 1000)
	if n := testing.AllocsPerRun(100, func() { Match(pattern, key) }); n != 0 {
		t.Fatalf("Match allocates %v times per call, want 0", n)
	}
}

func FuzzMatch(f *testing.F) {
	for _, tt := range matchTests {
		f.Add([]byte(tt.pattern), []byte(tt.key))
	}
	f.Add([]byte(strings.Repeat("*a", 30)+"b"), bytes.Repeat([]byte("a"), 200))
	f.Fuzz(func(t *testing.T, pattern, key []byte) {
		got := Match(pattern, key)
		if !Match(escapeAll(key), key) {
			t.Fatalf("Match(escapeAll(%q), %q) = false", key, key)
		}
		if len(pattern) <= 64 && len(key) <= 256 {
			var skip bool
			if want := redisRef(pattern, key, &skip, 0); got != want {
				t.Fatalf("Match(%q, %q) = %v, recursive reference says %v", pattern, key, got, want)
			}
		}
	})
}

// escapeAll backslash-escapes every byte of s, giving a pattern that
// matches exactly s.
func escapeAll(s []byte) []byte {
	out := make([]byte, 0, 2*len(s))
	for _, c := range s {
		out = append(out, '\\', c)
	}
	return out
}

// redisRef is an oracle for Match that follows the shape of Redis's
// recursive stringmatchlen_impl: one call per '*' group, trying the rest of
// the pattern at each non-empty suffix of the key, with Redis's skip flag
// (once the rest fails at every suffix, no earlier '*' can help) and its
// nesting cut-off. It parses sets on its own rather than sharing matchClass.
func redisRef(p, k []byte, skip *bool, nesting int) bool {
	if nesting > maxStarGroups {
		return false
	}
	for len(p) > 0 && len(k) > 0 {
		width := 1
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for ; len(k) > 0; k = k[1:] {
				if redisRef(p[1:], k, skip, nesting+1) {
					return true
				}
				if *skip {
					return false
				}
			}
			*skip = true
			return false
		case '?':
		case '[':
			i := 1
			negate := i < len(p) && p[i] == '^'
			if negate {
				i++
			}
			hit := false
		set:
			for {
				left := len(p) - i
				switch {
				case left >= 2 && p[i] == '\\':
					i++
					hit = hit || p[i] == k[0]
				case left > 0 && p[i] == ']':
					break set
				case left == 0:
					i-- // the set runs to the end of the pattern
					break set
				case left >= 3 && p[i+1] == '-':
					lo, hi := min(p[i], p[i+2]), max(p[i], p[i+2])
					hit = hit || (lo <= k[0] && k[0] <= hi)
					i += 2
				default:
					hit = hit || p[i] == k[0]
				}
				i++
			}
			if hit == negate {
				return false
			}
			width = i + 1
		case '\\':
			if len(p) >= 2 {
				width = 2
			}
			if p[width-1] != k[0] {
				return false
			}
		default:
			if p[0] != k[0] {
				return false
			}
		}
		p, k = p[width:], k[1:]
		if len(k) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
		}
	}
	return len(p) == 0 && len(k) == 0
}

// BenchmarkMatch measures typical key filters and pathological patterns;
// path.Match is the baseline where it accepts the same pattern.
func BenchmarkMatch(b *testing.B) {
	suffix := strings.Repeat("x", 48)
	cases := []struct {
		name     string
		pattern  string
		key      string
		baseline bool
	}{
		{"literal", "lock:orders:12345", "lock:orders:12345", true},
		{"prefix", "lock:*", "lock:" + suffix, true},
		{"infix", "*:orders:*:primary", "lock:" + suffix + ":orders:7:primary", true},
		{"set", "lock:[0-9][0-9]*[^a-c]", "lock:42" + suffix, true},
		{"pathological/1k", strings.Repeat("*a", 30) + "b", strings.Repeat("a", 1_000), true},
		{"pathological/10k", strings.Repeat("*a", 30) + "b", strings.Repeat("a", 10_000), true},
	}
	for _, c := range cases {
		pattern, key := []byte(c.pattern), []byte(c.key)
		b.Run(c.name+"/glob", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Match(pattern, key)
			}
		})
		if c.baseline {
			b.Run(c.name+"/path.Match", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_, _ = path.Match(c.pattern, c.key)
				}
			})
		}
	}
}

func TestAnchors(t *testing.T) {
	tests := []struct{ pattern, prefix, suffix string }{
		{"", "", ""},
		{"abc", "abc", ""},
		{"__lock__:jobs:*", "__lock__:jobs:", ""},
		{"__lock__:*:daily", "__lock__:", ":daily"},
		{"*", "", ""},
		{"*x", "", "x"},
		{"a?b", "a", "b"},
		{"a*b*cd", "a", "cd"},
		{"a[xy]z", "a", "z"},
		{"a[x]y]z", "a", "y]z"}, // the set closes at the first ']'
		{"a[]]z", "a", "]z"},    // "[]" is an empty set
		{"a[^]]z", "a", "]z"},
		{"a[\\]]z", "a", "z"}, // an escaped ']' does not close
		{"a[xyz", "a", ""},    // an open set runs to the end
		{"a[x\\]y", "a", ""},  // still open after an escaped ']'
		{"a[x-]z", "a", ""},   // "x-]" is a range, so the set is still open
		{"a\\*b", "a", "b"},
		{"ab\\", "ab", ""},
		{"a\\", "a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			p, s := Anchors([]byte(tt.pattern))
			if string(p) != tt.prefix || string(s) != tt.suffix {
				t.Fatalf("Anchors(%q) = %q, %q; want %q, %q", tt.pattern, p, s, tt.prefix, tt.suffix)
			}
		})
	}
}

// TestAnchorsHoldForEveryMatch checks Anchors' promise on random patterns,
// sets, escapes and open sets included: every key Match accepts begins with
// the prefix, ends with the suffix, and is long enough for both.
func TestAnchorsHoldForEveryMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	const patternBytes = "ab*?[]^-\\"
	const keyBytes = "ab]^-\\"
	patterns := []string{"a[x]y]z", "a[]]z", "a[\\]]z", "a[x-]z", "a[x\\]y"}
	for range 5000 {
		b := make([]byte, r.IntN(9))
		for i := range b {
			b[i] = patternBytes[r.IntN(len(patternBytes))]
		}
		patterns = append(patterns, string(b))
	}
	matches, anchored := 0, 0
	for _, pattern := range patterns {
		prefix, suffix := Anchors([]byte(pattern))
		for range 200 {
			key := make([]byte, 1+r.IntN(8))
			for i := range key {
				key[i] = keyBytes[r.IntN(len(keyBytes))]
			}
			if !Match([]byte(pattern), key) {
				continue
			}
			matches++
			if len(prefix)+len(suffix) > 0 {
				anchored++
			}
			if !bytes.HasPrefix(key, prefix) || !bytes.HasSuffix(key, suffix) || len(key) < len(prefix)+len(suffix) {
				t.Fatalf("Match(%q, %q), but Anchors gives %q, %q", pattern, key, prefix, suffix)
			}
		}
	}
	if matches < 10000 || anchored < 1000 {
		t.Fatalf("only %d matches, %d with an anchor: the generator tests too little", matches, anchored)
	}
}

func TestBacktrack(t *testing.T) {
	tests := []struct {
		pattern string
		want    int
	}{
		{"", 0},
		{"abc", 0},
		{"abc?[xy]", 0},
		{"__lock__:jobs:*", 0},
		{"__lock__:*:daily", 6},
		{"*a*bcd*ef", 3},
		{"*[a-z]b", 6},
		{"*[a*b]c", 6}, // a '*' in a set is not a star
		{"*\\*ab", 4},  // nor an escaped one
		{"a**bc", 2},
	}
	for _, tt := range tests {
		if got := Backtrack([]byte(tt.pattern)); got != tt.want {
			t.Errorf("Backtrack(%q) = %d, want %d", tt.pattern, got, tt.want)
		}
	}
}

// TestBacktrackBoundsMatchCost checks Backtrack's promise against MatchCost
// on hostile patterns over long keys and on random ones.
func TestBacktrackBoundsMatchCost(t *testing.T) {
	long := strings.Repeat("a", 1024)
	cases := [][2]string{
		{"*" + strings.Repeat("[a-z]", 50) + "b", long},
		{"*" + strings.Repeat("?", 60), long},
		{strings.Repeat("*a", 30) + "b", long},
		{"*aaaa*aaab*" + strings.Repeat("a", 40) + "c", long},
		{"x*" + strings.Repeat("a", 100), long},
	}
	r := rand.New(rand.NewPCG(9, 13))
	const patternBytes = "ab*?[]^-\\"
	for range 20000 {
		p := make([]byte, r.IntN(12))
		for i := range p {
			p[i] = patternBytes[r.IntN(len(patternBytes))]
		}
		k := make([]byte, r.IntN(40))
		for i := range k {
			k[i] = "ab]^-\\"[r.IntN(6)]
		}
		cases = append(cases, [2]string{string(p), string(k)})
	}
	for _, c := range cases {
		p, k := []byte(c[0]), []byte(c[1])
		_, steps := MatchCost(p, k)
		if bound := (len(k)+1)*(2*Backtrack(p)+2) + 2*len(p); steps > bound {
			t.Fatalf("MatchCost(%q, %d-byte key) = %d steps, above the bound %d", p, len(k), steps, bound)
		}
	}
}
