package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
)

// ReaderLimits bounds what one client can make the server buffer. Zero values
// are invalid; use DefaultReaderLimits().
type ReaderLimits struct {
	// MaxInlineLen is the longest inline command line and the longest '*' or
	// '$' header line, in bytes (Redis: 64 KiB, PROTO_INLINE_MAX_SIZE).
	MaxInlineLen int
	// MaxMultibulk is the largest '*' count accepted. Redis before 7.0
	// refused counts above 1024*1024; Redis 7 takes up to INT_MAX from an
	// authenticated client. The count allocates nothing up front: the query
	// buffer limit bounds what a command's arguments occupy.
	MaxMultibulk int
	// MaxBulkLen is the largest '$' length accepted (Redis: proto-max-bulk-len).
	MaxBulkLen int64
	// MaxQueryBuffer is the most bytes one pending (incomplete) RESP array may
	// occupy, its arguments and framing included (Redis:
	// client-query-buffer-limit). Inline commands are bounded by MaxInlineLen
	// instead, which is why it may not exceed this.
	MaxQueryBuffer int64
	// PreAuth holds a new Reader to Redis's limits for a client that has
	// not authenticated, PreAuthMaxMultibulk and PreAuthMaxBulkLen, until
	// Authenticated is called, so that a stranger cannot make the server
	// allocate. A server that requires a password sets it.
	PreAuth bool
}

// Redis's limits for a client that has not authenticated (networking.c):
// above them the client gets "unauthenticated multibulk length" or
// "unauthenticated bulk length" and is disconnected.
const (
	PreAuthMaxMultibulk       = 10
	PreAuthMaxBulkLen   int64 = 16384
	// PreAuthMaxReadAhead bounds the input ReadAhead buffers for a client
	// that has not authenticated, in place of MaxQueryBuffer: a stranger
	// pipelining commands it does not read the replies of cannot make the
	// server hold more. Redis has no such bound; honest clients send AUTH
	// and wait for its reply.
	PreAuthMaxReadAhead int64 = 1 << 20
)

// DefaultReaderLimits returns limits close to Redis's for a normal client
// (see MaxMultibulk for the one that differs).
func DefaultReaderLimits() ReaderLimits {
	return ReaderLimits{
		MaxInlineLen:   64 << 10,
		MaxMultibulk:   1 << 20,
		MaxBulkLen:     512 << 20,
		MaxQueryBuffer: 1 << 30,
	}
}

// Validate reports the first limit that is out of range. MaxBulkLen may
// exceed MaxQueryBuffer (such a bulk is then refused by the buffer limit), but
// MaxInlineLen may not: an inline line must fit in the query buffer.
func (l ReaderLimits) Validate() error {
	switch {
	case l.MaxInlineLen <= 0:
		return fmt.Errorf("protocol: MaxInlineLen must be positive, got %d", l.MaxInlineLen)
	case l.MaxMultibulk <= 0:
		return fmt.Errorf("protocol: MaxMultibulk must be positive, got %d", l.MaxMultibulk)
	case l.MaxBulkLen <= 0:
		return fmt.Errorf("protocol: MaxBulkLen must be positive, got %d", l.MaxBulkLen)
	case l.MaxQueryBuffer <= 0:
		return fmt.Errorf("protocol: MaxQueryBuffer must be positive, got %d", l.MaxQueryBuffer)
	case uint64(l.MaxQueryBuffer) >= math.MaxInt:
		// The whole pending command plus one byte must be addressable by an
		// int index (this only bites on 32-bit platforms).
		return fmt.Errorf("protocol: MaxQueryBuffer must be below %d on this platform, got %d", math.MaxInt, l.MaxQueryBuffer)
	case int64(l.MaxInlineLen) > l.MaxQueryBuffer:
		return fmt.Errorf("protocol: MaxInlineLen (%d) must not exceed MaxQueryBuffer (%d)", l.MaxInlineLen, l.MaxQueryBuffer)
	}
	return nil
}

// ErrWouldBlock is what a non-blocking source returns from Read when it has no
// bytes now. ReadCommand passes it on and keeps its place: call it again when
// the source is readable. It is how an event loop drives the reader.
var ErrWouldBlock = errors.New("protocol: would block")

// ProtocolError is malformed framing; the server answers "-ERR " + Error() and
// closes the connection.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

// Messages are Redis's own (networking.c) so clients and tests written against
// Redis see the same text; the last two have no Redis counterpart because Redis
// neither checks the CRLF after bulk data nor reports its buffer limit to the
// client.
const (
	msgTooBigInline   = "too big inline request"
	msgUnbalanced     = "unbalanced quotes in request"
	msgBadMultibulk   = "invalid multibulk length"
	msgTooBigMbulk    = "too big mbulk count string"
	msgBadBulkLen     = "invalid bulk length"
	msgTooBigBulk     = "too big bulk count string"
	msgQueryLimit     = "query buffer limit exceeded"
	msgBulkNotCRLF    = "expected CRLF after bulk data"
	msgExpectedDollar = "expected '$', got '%s'"
	msgUnauthMbulk    = "unauthenticated multibulk length"
	msgUnauthBulk     = "unauthenticated bulk length"
)

const (
	// readerBufSize is the initial buffer and the size buffers shrink back to.
	readerBufSize = 16 << 10
	// readerKeepBuf is the largest buffer kept while the client is idle: after
	// a huge command the memory goes back to the GC, as Redis trims idle
	// query buffers, instead of staying pinned by every connection.
	readerKeepBuf = 1 << 20
	// readerArgsCap is what is preallocated and kept for the argument slices;
	// commands with more args grow them as the args actually arrive.
	readerArgsCap = 64
	// readerKeepArgs is the largest argument slice capacity kept between commands.
	readerKeepArgs = 4096
	// readerMaxEmptyReads bounds the retries of a Read that returns 0, nil.
	readerMaxEmptyReads = 100
)

type readerState uint8

const (
	stateIdle       readerState = iota // between commands: the next byte picks inline or RESP
	stateInline                        // looking for the '\n' ending an inline line at pos
	stateCount                         // looking for the '\r' ending the "*<n>" line at pos
	stateBulkHeader                    // looking for the '\r' ending a "$<len>" line at pos
	stateBulkData                      // waiting for blen bytes and CRLF at pos
)

// argSpan locates an argument as offsets from the start of its command, so it
// stays right when the buffer is compacted or grown under a pending command.
type argSpan struct{ start, end int }

// Reader reads commands from a client connection: RESP arrays of bulk strings
// and inline (telnet) commands, with Redis's parsing rules and error messages.
//
// It is a resumable state machine over one buffer rather than a recursive
// parser: when a command is incomplete it remembers how far it got (the
// element being parsed, where the line-end search stopped, how many bulks are
// left), reads more, and carries on from there. So input split at any byte
// boundary costs the same as input read whole, and nothing is re-scanned from
// the start of the command. Memory follows the bytes that actually arrived,
// never a length or count the client claims: the buffer grows by doubling only
// when full, and argument slices grow by append.
//
// The buffer holds the pending command from its first byte. Before each Read,
// the unread tail is moved to the front, so every byte is moved at most once
// by compaction and the buffer grows only for a command that does not fit,
// or for input read ahead (ReadAhead).
//
// A Reader is not safe for concurrent use; the connection's goroutine owns it.
type Reader struct {
	rd     io.Reader
	limits ReaderLimits
	window int // limits.MaxInlineLen+1: bytes searched for a line end before the line is too long

	// The '*' count and '$' length in force: limits' own, or the tighter
	// pre-auth ones until Authenticated (preAuth).
	maxMultibulk int
	maxBulkLen   int64
	maxAhead     int64 // ReadAhead's bound: MaxQueryBuffer, or PreAuthMaxReadAhead
	preAuth      bool

	buf  []byte
	base int64 // the stream offset of buf[0]: bytes dropped from the front so far
	cmd  int   // start of the pending command in buf
	end  int   // end of the buffered bytes in buf

	state readerState
	pos   int   // start of the line or bulk data being parsed
	scan  int   // where the line-end search resumes, so trickled lines cost O(n), not O(n²)
	left  int   // bulks still expected by the current array
	blen  int64 // length of the bulk whose data is awaited

	spans []argSpan // the pending command's arguments
	args  [][]byte  // returned to the caller; rebuilt from spans, reused between calls

	err     error // sticky: invalid limits or a protocol error
	rerr    error // from rd; reported once the buffered commands are used up
	blocked bool  // rd said ErrWouldBlock on the last fill
}

// NewReader returns a Reader that reads from rd, which is typically a
// net.Conn. Invalid limits are not corrected: every ReadCommand then returns
// the error from limits.Validate, so check limits when loading configuration.
func NewReader(rd io.Reader, limits ReaderLimits) *Reader {
	r := &Reader{
		rd:     rd,
		limits: limits,
		buf:    make([]byte, readerBufSize),
		spans:  make([]argSpan, 0, readerArgsCap),
		args:   make([][]byte, 0, readerArgsCap),
	}
	if err := limits.Validate(); err != nil {
		r.err = err
		return r
	}
	r.window = limits.MaxInlineLen + 1
	r.maxMultibulk, r.maxBulkLen, r.maxAhead = limits.MaxMultibulk, limits.MaxBulkLen, limits.MaxQueryBuffer
	if limits.PreAuth {
		r.preAuth = true
		r.maxMultibulk = min(r.maxMultibulk, PreAuthMaxMultibulk)
		r.maxBulkLen = min(r.maxBulkLen, PreAuthMaxBulkLen)
		r.maxAhead = min(r.maxAhead, PreAuthMaxReadAhead)
	}
	return r
}

// Authenticated lifts the pre-auth limits (ReaderLimits.PreAuth) from the
// next command on: the client has authenticated.
func (r *Reader) Authenticated() {
	r.preAuth = false
	r.maxMultibulk, r.maxBulkLen, r.maxAhead = r.limits.MaxMultibulk, r.limits.MaxBulkLen, r.limits.MaxQueryBuffer
}

// ReadCommand returns the next non-empty command's arguments (args[0] is the
// command name, case untouched). It blocks in rd.Read until a whole command is
// buffered; commands already buffered are returned without reading.
//
// The slices alias the reader's buffer and are valid only until the next call.
//
// Errors: io errors from rd as they are (io.EOF at a clean boundary,
// io.ErrUnexpectedEOF if EOF arrives mid-command), or a *ProtocolError for
// malformed or oversize input, after which the Reader must not be used again
// (it keeps returning the same error).
func (r *Reader) ReadCommand() ([][]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		done, err := r.parse()
		if err != nil {
			r.err = err
			return nil, err
		}
		if done {
			return r.args, nil
		}
		if r.rerr != nil {
			if r.rerr == io.EOF && r.cmd < r.end {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, r.rerr
		}
		if err := r.fill(); err != nil {
			r.err = err
			return nil, err
		}
		if r.blocked {
			r.blocked = false
			return nil, ErrWouldBlock
		}
	}
}

// ReadAhead reads once from rd into the buffer without parsing, for a
// caller that may not run commands now (a server whose replies wait for the
// client to read them) but must keep taking the client's input, or a client
// that writes everything before it reads would wait on the server for ever
// while the server waits on it. ReadCommand later returns the commands as if
// they had been read then.
//
// It returns ErrWouldBlock when the source has nothing now, nil after a read,
// and once the buffered input (the pending command and every complete one
// behind it) exceeds MaxQueryBuffer (PreAuthMaxReadAhead before
// Authenticated, with ReaderLimits.PreAuth), the query buffer limit's
// *ProtocolError, after which the Reader must not be used again: the whole
// buffer is bounded as Redis's client-query-buffer-limit bounds its query
// buffer. A read error, io.EOF included, is returned as it is and kept for
// ReadCommand to report after the buffered commands.
func (r *Reader) ReadAhead() error {
	if r.err != nil {
		return r.err
	}
	if r.rerr != nil {
		return r.rerr
	}
	if int64(r.end-r.cmd) > r.maxAhead {
		r.err = errReaderQueryLimit()
		return r.err
	}
	// Room to read into, without fill's compaction before every read: that
	// would move all the input read ahead so far each time, quadratic in a
	// client that writes megabytes. Compact only what frees at least as much
	// as it moves (or when the buffer cannot grow), else grow: each byte is
	// then moved a bounded number of times.
	if r.cmd == r.end || r.end == len(r.buf) && (r.cmd >= len(r.buf)/2 || int64(len(r.buf)) > r.limits.MaxQueryBuffer) {
		r.compact()
	}
	if r.end == len(r.buf) {
		if err := r.grow(); err != nil {
			r.err = err
			return err
		}
	}
	n := r.end
	r.readSource()
	if r.blocked {
		r.blocked = false
		return ErrWouldBlock
	}
	if r.rerr != nil {
		return r.rerr
	}
	if r.end == n {
		return ErrWouldBlock
	}
	return nil
}

// Buffered returns the number of input bytes read but not yet returned as
// commands.
func (r *Reader) Buffered() int { return r.end - r.cmd }

// Consumed returns the number of input bytes returned as commands (or
// skipped, as blank lines are) since the connection opened.
func (r *Reader) Consumed() int64 { return r.base + int64(r.cmd) }

// Lookahead returns the bytes buffered after the command ReadCommand last
// returned, which may hold whole commands the client pipelined behind it,
// and the stream offset where they start (a count of bytes since the
// connection opened). It returns nil in the middle of a command. The slice is
// valid only until the next ReadCommand; see PeekArgs.
func (r *Reader) Lookahead() ([]byte, int64) {
	if r.err != nil || r.state != stateIdle {
		return nil, 0
	}
	return r.buf[r.cmd:r.end], r.base + int64(r.cmd)
}

// parse advances the state machine over the buffered bytes. It returns true
// with r.args set when a command is complete, false when it needs more bytes,
// or a *ProtocolError.
func (r *Reader) parse() (bool, error) {
	for {
		switch r.state {
		case stateIdle:
			if r.cmd == r.end {
				return false, nil
			}
			r.pos, r.scan = r.cmd, r.cmd
			r.spans = r.spans[:0]
			if r.buf[r.cmd] == '*' {
				r.state = stateCount
			} else {
				r.state = stateInline
			}

		case stateInline:
			// Inline lines skip the query buffer checks: they are bounded by
			// the window, which Validate keeps within MaxQueryBuffer.
			i, found := r.findLineEnd('\n')
			if !found {
				if r.scan-r.pos == r.window {
					return false, &ProtocolError{Msg: msgTooBigInline}
				}
				return false, nil
			}
			e := i
			if e > r.pos && r.buf[e-1] == '\r' {
				e--
			}
			if !r.splitInline(r.pos, e) {
				return false, &ProtocolError{Msg: msgUnbalanced}
			}
			r.state = stateIdle
			if len(r.spans) == 0 {
				r.cmd = i + 1 // blank line: Redis ignores it
				continue
			}
			r.finish(i + 1)
			return true, nil

		case stateCount:
			n, next, ok, err := r.header('*', msgBadMultibulk, msgTooBigMbulk)
			if !ok {
				return false, err
			}
			if n > int64(r.maxMultibulk) {
				if r.preAuth && n <= int64(r.limits.MaxMultibulk) {
					return false, r.fail(next, msgUnauthMbulk)
				}
				return false, r.fail(next, msgBadMultibulk)
			}
			if r.over(next) {
				return false, errReaderQueryLimit()
			}
			if n <= 0 { // "*0" and "*-1": Redis ignores them
				r.cmd = next
				r.state = stateIdle
				continue
			}
			r.left = int(n)
			r.pos, r.scan = next, next
			r.state = stateBulkHeader

		case stateBulkHeader:
			n, next, ok, err := r.header('$', msgBadBulkLen, msgTooBigBulk)
			if !ok {
				return false, err
			}
			if n < 0 || n > r.maxBulkLen {
				if r.preAuth && n >= 0 && n <= r.limits.MaxBulkLen {
					return false, r.fail(next, msgUnauthBulk)
				}
				return false, r.fail(next, msgBadBulkLen)
			}
			r.blen = n
			r.pos = next
			r.state = stateBulkData

		case stateBulkData:
			// int64 because blen may not fit an int on 32-bit platforms.
			if int64(r.end-r.pos) < r.blen+2 {
				return false, r.needMore()
			}
			e := r.pos + int(r.blen)
			next := e + 2
			if r.buf[e] != '\r' || r.buf[e+1] != '\n' {
				return false, r.fail(next, msgBulkNotCRLF)
			}
			if r.over(next) {
				return false, errReaderQueryLimit()
			}
			r.spans = append(r.spans, argSpan{r.pos - r.cmd, e - r.cmd})
			r.pos, r.scan = next, next
			if r.left--; r.left > 0 {
				r.state = stateBulkHeader
				continue
			}
			r.state = stateIdle
			r.finish(next)
			return true, nil
		}
	}
}

// header parses the "*<n>" or "$<len>" line at r.pos and returns the number
// and the end of the line. When ok is false, err is nil if the line is not
// complete yet, else a *ProtocolError: bad for a malformed line, tooBig for a
// line longer than the window.
func (r *Reader) header(prefix byte, bad, tooBig string) (n int64, next int, ok bool, err error) {
	if r.scan == r.pos {
		if n, next, ok := r.shortHeader(prefix); ok {
			return n, next, true, nil
		}
	}
	i, found := r.findLineEnd('\r')
	if !found {
		if r.scan-r.pos == r.window {
			return 0, 0, false, r.fail(r.pos+r.window, tooBig)
		}
		return 0, 0, false, r.needMore()
	}
	if i+1 == r.end { // the '\n' has not arrived
		return 0, 0, false, r.needMore()
	}
	next = i + 2
	// Redis checks the '$' only once the whole line is there, so a long line
	// without it is "too big", not "expected '$'". ('*' was checked by
	// stateIdle.)
	if c := r.buf[r.pos]; c != prefix {
		if r.over(next) {
			return 0, 0, false, errReaderQueryLimit()
		}
		return 0, 0, false, &ProtocolError{Msg: fmt.Sprintf(msgExpectedDollar, printableErrByte(c))}
	}
	if r.buf[i+1] != '\n' {
		return 0, 0, false, r.fail(next, bad)
	}
	if n, ok = parseRESPInt(r.buf[r.pos+1 : i]); !ok {
		return 0, 0, false, r.fail(next, bad)
	}
	return n, next, true, nil
}

// shortHeader is the fast path of header for the common case, a complete
// line of a prefix, up to 18 digits without a leading zero, and CRLF: it
// saves the general line search, which costs more than the line. For
// anything else it reports false and header takes the general path, which
// decides exactly as if shortHeader did not exist.
func (r *Reader) shortHeader(prefix byte) (int64, int, bool) {
	b := r.buf[r.pos:r.end]
	if len(b) < 4 || b[0] != prefix || b[1] < '0' || b[1] > '9' {
		return 0, 0, false
	}
	n := int64(b[1] - '0')
	i := 2
	if n != 0 {
		// 18 digits cannot overflow an int64.
		for ; i < len(b) && i <= 18 && '0' <= b[i] && b[i] <= '9'; i++ {
			n = n*10 + int64(b[i]-'0')
		}
	}
	if i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' || i >= r.window {
		return 0, 0, false
	}
	return n, r.pos + i + 2, true
}

// findLineEnd searches for c in the line starting at r.pos, within the window
// and the buffered bytes, resuming where the previous search stopped. It
// leaves r.scan at the match, or at the end of what it searched.
func (r *Reader) findLineEnd(c byte) (int, bool) {
	lim := r.end
	if lim-r.pos > r.window {
		lim = r.pos + r.window
	}
	if i := bytes.IndexByte(r.buf[r.scan:lim], c); i >= 0 {
		r.scan += i
		return r.scan, true
	}
	r.scan = lim
	return 0, false
}

// Within a RESP array, every decision is taken as if the limit were checked
// byte by byte: a decision that needs bytes beyond MaxQueryBuffer of the
// command becomes "query buffer limit exceeded". That keeps the outcome the
// same however the input is split into reads, which the fuzz test checks.

// over reports whether the command would exceed the query buffer limit if it
// extended to next.
func (r *Reader) over(next int) bool {
	return int64(next-r.cmd) > r.limits.MaxQueryBuffer
}

// fail returns the error for a decision that needs the bytes up to next: the
// limit error if those bytes exceed the query buffer limit, else msg.
func (r *Reader) fail(next int, msg string) error {
	if r.over(next) {
		return errReaderQueryLimit()
	}
	return &ProtocolError{Msg: msg}
}

// errReaderQueryLimit is a new error each time, so that no caller can
// change the message another connection sees.
func errReaderQueryLimit() error { return &ProtocolError{Msg: msgQueryLimit} }

// needMore is called when a RESP array is incomplete: all buffered bytes
// belong to it, so if they already exceed the limit it can never complete.
func (r *Reader) needMore() error {
	if r.over(r.end) {
		return errReaderQueryLimit()
	}
	return nil
}

// finish exposes the completed command, which ends at next, as r.args.
func (r *Reader) finish(next int) {
	if cap(r.args) > readerKeepArgs && len(r.spans) <= readerArgsCap {
		// A past command with many args would otherwise pin its slice.
		r.args = make([][]byte, 0, readerArgsCap)
		r.spans = append(make([]argSpan, 0, readerArgsCap), r.spans...)
	}
	r.args = r.args[:0]
	base := r.buf[r.cmd:next]
	for _, s := range r.spans {
		// Full slice expressions so that a caller's append cannot overwrite
		// the next argument.
		r.args = append(r.args, base[s.start:s.end:s.end])
	}
	r.cmd = next
}

// fill makes room in the buffer and reads once from rd. A read error is kept
// for ReadCommand to report after the bytes read with it are parsed.
func (r *Reader) fill() error {
	r.compact()
	if r.end == len(r.buf) {
		if err := r.grow(); err != nil {
			return err
		}
	}
	r.readSource()
	return nil
}

// compact drops the bytes before the pending command: the unread tail moves
// to the front, or, with nothing unread, the buffer starts over (shrinking
// back if a huge command grew it).
func (r *Reader) compact() {
	if r.cmd == r.end {
		if len(r.buf) > readerKeepBuf {
			r.buf = make([]byte, readerBufSize)
		}
		r.base += int64(r.end)
		r.cmd, r.end, r.pos, r.scan = 0, 0, 0, 0
	} else if r.cmd > 0 {
		r.base += int64(r.cmd)
		n := copy(r.buf, r.buf[r.cmd:r.end])
		r.pos -= r.cmd
		r.scan -= r.cmd
		r.cmd, r.end = 0, n
	}
}

// grow doubles the full buffer, up to MaxQueryBuffer+1 bytes.
func (r *Reader) grow() error {
	// A full buffer holds the pending command, which parse has already
	// refused if it exceeds MaxQueryBuffer, or input read ahead, which
	// ReadAhead refuses past MaxQueryBuffer: so the buffer never needs
	// more than MaxQueryBuffer+1 bytes.
	limit := r.limits.MaxQueryBuffer + 1
	size := int64(len(r.buf)) * 2
	if size > limit {
		size = limit
	}
	if size <= int64(len(r.buf)) {
		return errReaderQueryLimit() // unreachable; avoids a zero-length Read loop
	}
	buf := make([]byte, size)
	copy(buf, r.buf[:r.end])
	r.buf = buf
	return nil
}

// readSource reads once from rd into the free end of the buffer.
func (r *Reader) readSource() {
	for range readerMaxEmptyReads {
		n, err := r.rd.Read(r.buf[r.end:])
		if n < 0 || n > len(r.buf)-r.end {
			// A broken io.Reader must not make the parser index out of range.
			r.rerr = fmt.Errorf("protocol: reader returned invalid count %d", n)
			return
		}
		r.end += n
		if err == ErrWouldBlock {
			r.blocked = n == 0
			return
		}
		if err != nil {
			r.rerr = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.rerr = io.ErrNoProgress
}

// splitInline splits the line buf[s:e] into arguments the way Redis's
// sdssplitargs does, appending their spans. It unescapes in place, which is
// safe because an argument is never longer than its source text. It reports
// false for unbalanced quotes.
//
// Unlike sdssplitargs, which stops at a NUL byte because it works on C
// strings, a NUL here is an ordinary byte.
func (r *Reader) splitInline(s, e int) bool {
	b := r.buf
	p := s
	for {
		for p < e && inlineIsSpace(b[p]) {
			p++
		}
		if p == e {
			return true
		}
		start, w := p, p
		inDouble, inSingle := false, false
	token:
		for {
			switch {
			case inDouble:
				if p == e {
					return false // unterminated quotes
				}
				switch c := b[p]; {
				case c == '\\' && p+3 < e && b[p+1] == 'x' && inlineIsHex(b[p+2]) && inlineIsHex(b[p+3]):
					b[w] = inlineUnhex(b[p+2])<<4 | inlineUnhex(b[p+3])
					w++
					p += 4
				case c == '\\' && p+1 < e:
					b[w] = inlineUnescape(b[p+1])
					w++
					p += 2
				case c == '"':
					// A closing quote must be followed by a space or nothing.
					if p+1 < e && !inlineIsSpace(b[p+1]) {
						return false
					}
					p++
					break token
				default:
					b[w] = c
					w++
					p++
				}
			case inSingle:
				if p == e {
					return false
				}
				switch c := b[p]; {
				case c == '\\' && p+1 < e && b[p+1] == '\'':
					b[w] = '\''
					w++
					p += 2
				case c == '\'':
					if p+1 < e && !inlineIsSpace(b[p+1]) {
						return false
					}
					p++
					break token
				default:
					b[w] = c
					w++
					p++
				}
			default:
				if p == e {
					break token
				}
				switch c := b[p]; c {
				case ' ', '\n', '\r', '\t':
					// Unlike isspace, '\v' and '\f' are part of the token,
					// as in sdssplitargs.
					p++
					break token
				case '"':
					inDouble = true
					p++
				case '\'':
					inSingle = true
					p++
				default:
					b[w] = c
					w++
					p++
				}
			}
		}
		r.spans = append(r.spans, argSpan{start - r.cmd, w - r.cmd})
	}
}

// inlineIsSpace is C's isspace in the "C" locale, which sdssplitargs uses to skip
// blanks and to check what follows a closing quote.
func inlineIsSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func inlineIsHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func inlineUnhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

// inlineUnescape maps the byte after a backslash inside double quotes; any other
// byte stands for itself, so \" and \\ need no case of their own.
func inlineUnescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

// parseRESPInt parses a decimal exactly as Redis's string2ll: an optional '-'
// and digits, no '+', no spaces, no leading zeros (except "0" itself), and
// nothing outside int64, so that an overflowing length is refused rather than
// wrapped into something accepted.
func parseRESPInt(b []byte) (int64, bool) {
	// Redis also refuses 21 bytes or more (LONG_STR_SIZE); such a number
	// overflows anyway, and the check keeps the loop short.
	if len(b) == 0 || len(b) >= 21 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (math.MaxUint64-9)/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true // -(1<<63) wraps to itself, which is right
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// printableErrByte renders a byte for an error message: itself if printable,
// else \xHH, so that a control byte such as '\r' cannot corrupt the reply
// line that carries the message.
func printableErrByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return string(rune(c))
	}
	return fmt.Sprintf(`\x%02x`, c)
}
