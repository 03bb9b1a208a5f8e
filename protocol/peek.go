package protocol

// PeekArgs looks at up to max whole RESP arrays at the start of b, consuming
// nothing, and calls fn with each one's command name and first argument
// (nil when it has none). It returns how many bytes the arrays it reported
// span.
//
// It is a hint for prefetching, not a parser: it stops at the first thing it
// cannot take in at a glance (an inline command, an incomplete array, a
// header of more than nine digits or with leading zeros, anything
// malformed), and the Reader judges
// those bytes as usual when it gets to them. What it does report agrees with
// what the Reader returns for the same bytes, unless the Reader refuses them
// under its ReaderLimits (which PeekArgs does not know), and then the
// connection is closing anyway. Use it on Reader.Lookahead.
func PeekArgs(b []byte, max int, fn func(name, arg []byte)) int {
	off := 0
	for range max {
		next, name, arg, ok := peekArray(b, off)
		if !ok {
			break
		}
		fn(name, arg)
		off = next
	}
	return off
}

// peekArray reads the array of bulk strings at b[off:].
func peekArray(b []byte, off int) (next int, name, arg []byte, ok bool) {
	count, off, ok := peekHeader(b, off, '*')
	if !ok || count < 1 {
		return 0, nil, nil, false
	}
	for i := range count {
		n, p, ok := peekHeader(b, off, '$')
		if !ok || n+2 > len(b)-p || b[p+n] != '\r' || b[p+n+1] != '\n' {
			return 0, nil, nil, false
		}
		switch i {
		case 0:
			name = b[p : p+n : p+n]
		case 1:
			arg = b[p : p+n : p+n]
		}
		off = p + n + 2
	}
	return off, name, arg, true
}

// peekHeader reads "<prefix><1 to 9 digits>\r\n" at b[off:]: small enough
// that n+2 cannot overflow an int anywhere.
func peekHeader(b []byte, off int, prefix byte) (n, next int, ok bool) {
	if off >= len(b) || b[off] != prefix {
		return 0, 0, false
	}
	i := off + 1
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i-off > 9 {
			return 0, 0, false
		}
		n = n*10 + int(b[i]-'0')
	}
	if i == off+1 || len(b)-i < 2 || b[i] != '\r' || b[i+1] != '\n' {
		return 0, 0, false
	}
	if b[off+1] == '0' && i > off+2 {
		return 0, 0, false // leading zeros: the Reader refuses them, as Redis does
	}
	return n, i + 2, true
}
