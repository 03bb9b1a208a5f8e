package glob

// maxStarGroups mirrors Redis's protection against abusive patterns: its
// recursive matcher gives up (reports no match) once it would recurse into
// the rest of the pattern after more than this many '*' groups. Match does
// not recurse, so the limit is kept only so that results stay identical to
// Redis.
const maxStarGroups = 1000

// Match reports whether key matches pattern with Redis's stringmatchlen rules
// (src/util.c, case-sensitive, as used by KEYS and SCAN ... MATCH).
//
// Pattern and key are arbitrary bytes, compared byte by byte:
//
//   - '*' matches any run of bytes, including none; consecutive stars act
//     as one.
//   - '?' matches exactly one byte.
//   - '[abc]' matches one byte from the set, '[^abc]' one byte outside it,
//     and 'a-z' inside brackets is an inclusive range; a reversed range such
//     as '[z-a]' is swapped, as Redis does. '\' escapes the next byte inside
//     brackets too. A ']' right after '[' or '[^' closes the set at once, so
//     '[]' matches nothing and '[^]' matches any byte. A '[' that is never
//     closed runs to the end of the pattern and still matches one byte.
//   - '\x' matches the byte x literally; a trailing '\' matches '\'.
//   - Any other byte matches itself.
//
// Two Redis quirks are kept on purpose, so that results stay identical:
//
//   - An empty key matches only the empty pattern: Match("*", "") is false.
//     Redis's SCAN and KEYS skip matching altogether when the pattern is
//     exactly "*", so callers that want Redis's command behaviour should do
//     the same.
//   - A pattern whose 1001st '*' group (counting runs of stars once, and
//     leaving out escaped stars and stars inside brackets) is not at the end
//     of the pattern matches no key; Redis 7 added this cut-off against
//     CVE-2022-36021.
//
// Ranges compare bytes as unsigned values, as Redis does where C's char is
// unsigned (arm64). On x86 builds Redis compares signed chars, which differs
// only for ranges that span 0x7f and 0x80, such as '[a-\xff]'.
//
// Match uses the iterative single-backtrack algorithm instead of Redis's
// recursion: every element other than '*' consumes exactly one byte, so on a
// mismatch only the most recent '*' needs to absorb one more byte. The work
// is O(len(pattern)*len(key)) whatever the pattern, and Match does not
// allocate. That bound is still a product: callers that take patterns from
// clients bound the pattern's length and count the work with MatchCost.
func Match(pattern, key []byte) bool {
	matched, _ := MatchCost(pattern, key)
	return matched
}

// MatchCost is Match that also reports the work it did, in steps: one per
// round of its loop plus one per pattern byte read to match a key byte (a
// bracket set of ten bytes is ten), so a step costs a nanosecond or two and
// steps stay below 2*(len(pattern)+1)*(len(key)+1). A caller that matches
// many keys sums the steps to bound the work of one call.
func MatchCost(pattern, key []byte) (matched bool, steps int) {
	if len(key) == 0 {
		// Redis's loop runs only while both pattern and key are left.
		return len(pattern) == 0, 1
	}
	p, k := 0, 0
	// retryP is where the pattern resumes after the most recent '*' group
	// (-1 until one is seen), and retryK is the key offset at which that
	// resumption was last tried.
	retryP, retryK := -1, 0
	stars := 0
	for k < len(key) {
		steps++
		if p < len(pattern) {
			if pattern[p] == '*' {
				for p+1 < len(pattern) && pattern[p+1] == '*' {
					p++
				}
				if p+1 == len(pattern) {
					return true, steps // a trailing '*' takes the rest of the key
				}
				stars++
				if stars > maxStarGroups {
					return false, steps
				}
				p++
				retryP, retryK = p, k
				continue
			}
			n, ok := matchByte(pattern, p, key[k])
			steps += n
			if ok {
				p += n
				k++
				continue
			}
		}
		// Mismatch, or pattern used up with key left: let the last '*'
		// take one more byte. Redis tries the rest of the pattern only
		// against non-empty suffixes of the key.
		if retryP < 0 || retryK+1 >= len(key) {
			return false, steps
		}
		retryK++
		p, k = retryP, retryK
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern), steps
}

// matchByte matches the single-byte element at pattern[p], which is not
// '*', against b. It returns how many pattern bytes the element spans
// (independent of b) and whether b matched it.
func matchByte(pattern []byte, p int, b byte) (int, bool) {
	switch pattern[p] {
	case '?':
		return 1, true
	case '\\':
		if p+1 < len(pattern) {
			return 2, pattern[p+1] == b
		}
		return 1, b == '\\'
	case '[':
		return matchClass(pattern, p, b)
	default:
		return 1, pattern[p] == b
	}
}

// matchClass matches the bracket expression opening at pattern[p] against b,
// following Redis's parse exactly: '\' escapes the next byte when one is
// left, ']' closes, 'x-y' is a range when both ends are present (reversed
// ends are swapped, and a ']' in the end position is taken as the range end),
// and running off the end of the pattern closes the set there.
func matchClass(pattern []byte, p int, b byte) (int, bool) {
	n := len(pattern)
	i := p + 1
	negate := i < n && pattern[i] == '^'
	if negate {
		i++
	}
	matched := false
	for {
		switch {
		case i+1 < n && pattern[i] == '\\':
			i++
			if pattern[i] == b {
				matched = true
			}
		case i < n && pattern[i] == ']':
			return i - p + 1, matched != negate
		case i >= n:
			return n - p, matched != negate
		case i+2 < n && pattern[i+1] == '-':
			lo, hi := pattern[i], pattern[i+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if lo <= b && b <= hi {
				matched = true
			}
			i += 2
		default:
			if pattern[i] == b {
				matched = true
			}
		}
		i++
	}
}

// Anchors returns the literal bytes every key that pattern matches begins
// with and ends with: prefix is what comes before the first '*', '?', '['
// or '\', and suffix the plain bytes after the last such element (a set
// closing with ']' included), or "" when the pattern has none. A matching
// key is at least len(prefix)+len(suffix) bytes long. Both are
// conservative: an escaped byte ends them, though it matches itself. An
// index of patterns uses them to skip the ones that cannot match a key.
func Anchors(pattern []byte) (prefix, suffix []byte) {
	end := 0
	for end < len(pattern) && !isMeta(pattern[end]) {
		end++
	}
	if end == len(pattern) {
		return pattern, nil
	}
	// Walk the elements as Match does, so that the bytes of a set are
	// never taken for plain ones.
	run := len(pattern)
	for p := end; p < len(pattern); {
		switch pattern[p] {
		case '*', '?':
			p++
			run = p
		case '\\':
			p = min(p+2, len(pattern))
			run = p
		case '[':
			n, _ := matchClass(pattern, p, 0)
			p += n
			run = p
		default:
			p++
		}
	}
	return pattern[:end], pattern[run:]
}

func isMeta(b byte) bool { return b == '*' || b == '?' || b == '[' || b == '\\' }

// Backtrack returns the most pattern bytes Match may read again for each
// byte of a key: the length of the longest part of pattern after a '*' and
// before the next one or the end (0 when pattern has no '*' or ends at its
// only one). A match costs at most (len(key)+1)*(2*Backtrack(pattern)+2) +
// 2*len(pattern) steps of MatchCost, so a bound on Backtrack bounds the work
// of matching a pattern against a name of bounded length, however hostile
// the pattern.
func Backtrack(pattern []byte) int {
	longest, part, starred := 0, 0, false
	for p := 0; p < len(pattern); {
		switch pattern[p] {
		case '*':
			p++
			starred, part = true, 0
			continue
		case '\\':
			n := min(2, len(pattern)-p)
			p += n
			part += n
		case '[':
			n, _ := matchClass(pattern, p, 0)
			p += n
			part += n
		default:
			p++
			part++
		}
		if starred {
			longest = max(longest, part)
		}
	}
	return longest
}
