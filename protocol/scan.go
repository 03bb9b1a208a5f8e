package protocol

import "strconv"

// Scanning replies already written: the server's MISCONF refusal replaces
// the replies of a round that a failed write cannot acknowledge, keeping
// the lock events among them.

// ReplaceReplies returns buf, RESP2 replies, with each reply replaced by e
// (lock event messages kept as they are), and false if buf does not parse.
func ReplaceReplies(buf []byte, e *Error) ([]byte, bool) {
	frame := e.Frame()
	var out []byte
	for len(buf) > 0 {
		n, ok := replyLen(buf)
		if !ok {
			return nil, false
		}
		if isMessage(buf[:n]) {
			out = append(out, buf[:n]...)
		} else {
			out = append(out, frame...)
		}
		buf = buf[n:]
	}
	return out, true
}

// replyLen is the length of the RESP2 value at the start of b.
func replyLen(b []byte) (int, bool) {
	line, ok := lineLen(b)
	if !ok || line < 3 {
		return 0, false
	}
	switch b[0] {
	case '+', '-', ':':
		return line, true
	case '$':
		n, err := strconv.Atoi(string(b[1 : line-2]))
		switch {
		case err != nil:
			return 0, false
		case n < 0:
			return line, true
		case line+n+2 > len(b):
			return 0, false
		}
		return line + n + 2, true
	case '*':
		n, err := strconv.Atoi(string(b[1 : line-2]))
		if err != nil {
			return 0, false
		}
		at := line
		for range max(n, 0) {
			m, ok := replyLen(b[at:])
			if !ok {
				return 0, false
			}
			at += m
		}
		return at, true
	}
	return 0, false
}

// lineLen is the length of b's first line, CRLF included.
func lineLen(b []byte) (int, bool) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return i + 2, true
		}
	}
	return 0, false
}

// isMessage reports whether a reply is a pub/sub message (an array whose
// first element is "message" or "pmessage"), which acknowledges nothing.
func isMessage(r []byte) bool {
	for _, p := range []string{"*3\r\n$7\r\nmessage\r\n", "*4\r\n$8\r\npmessage\r\n"} {
		if len(r) >= len(p) && string(r[:len(p)]) == p {
			return true
		}
	}
	return false
}
