package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// The RESP writer: append-style, so a whole pipeline is built in one reused
// buffer and sent with one write, with no allocation per command.

// appendArray appends a RESP array header "*n\r\n".
func appendArray(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// appendBulk appends one bulk string "$len\r\ndata\r\n".
func appendBulk(b, data []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(data)), 10)
	b = append(b, '\r', '\n')
	b = append(b, data...)
	return append(b, '\r', '\n')
}

// appendBulkString is appendBulk for a string argument.
func appendBulkString(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// appendBulkInt appends the decimal form of v as a bulk string.
func appendBulkInt(b []byte, v int64) []byte {
	var tmp [20]byte
	return appendBulk(b, strconv.AppendInt(tmp[:0], v, 10))
}

// appendCommand appends a whole command of string arguments; for the
// setup and admin commands, not the hot loop.
func appendCommand(b []byte, args ...string) []byte {
	b = appendArray(b, len(args))
	for _, a := range args {
		b = appendBulkString(b, a)
	}
	return b
}

// reply is one decoded RESP reply. str aliases the reader's buffer and is
// valid only until the next read.
type reply struct {
	kind byte   // '+', '-', ':', '$', '*'
	null bool   // "$-1" or "*-1"
	n    int64  // the integer, the bulk length, or the array length
	str  []byte // simple string, error text or bulk data
}

// isErr reports an error reply.
func (r reply) isErr() bool { return r.kind == '-' }

func (r reply) String() string {
	switch {
	case r.null:
		return "(nil)"
	case r.kind == ':':
		return strconv.FormatInt(r.n, 10)
	case r.kind == '*':
		return fmt.Sprintf("array(%d)", r.n)
	}
	return string(r.kind) + string(r.str)
}

// errProtocol is a reply the reader cannot parse.
var errProtocol = errors.New("loadgen: bad RESP reply")

// maxNesting bounds array nesting so a hostile peer cannot recurse us deep.
const maxNesting = 8

// respReader decodes replies from a buffered stream.
type respReader struct {
	br  *bufio.Reader
	big []byte // for a bulk larger than the buffer
}

func newRespReader(r io.Reader, size int) *respReader {
	return &respReader{br: bufio.NewReaderSize(r, size)}
}

// line returns the next line without its CRLF.
func (rr *respReader) line() ([]byte, error) {
	l, err := rr.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errProtocol, rr.br.Size())
		}
		return nil, err
	}
	if len(l) < 3 || l[len(l)-2] != '\r' {
		return nil, fmt.Errorf("%w: %q", errProtocol, l)
	}
	return l[:len(l)-2], nil
}

// parseInt parses a signed decimal without allocating.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := false
	if b[0] == '-' {
		neg, b = true, b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
		if v < 0 {
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return v, true
}

// read decodes one reply. An array's elements are read and dropped: no
// command the generator sends needs them, and skipping keeps the stream in
// step.
func (rr *respReader) read() (reply, error) { return rr.readDepth(0) }

func (rr *respReader) readDepth(depth int) (reply, error) {
	l, err := rr.line()
	if err != nil {
		return reply{}, err
	}
	r := reply{kind: l[0]}
	switch l[0] {
	case '+', '-':
		r.str = l[1:]
		return r, nil
	case ':':
		v, ok := parseInt(l[1:])
		if !ok {
			return r, fmt.Errorf("%w: bad integer %q", errProtocol, l)
		}
		r.n = v
		return r, nil
	case '$':
		v, ok := parseInt(l[1:])
		if !ok || v < -1 {
			return r, fmt.Errorf("%w: bad bulk length %q", errProtocol, l)
		}
		if v == -1 {
			r.null = true
			return r, nil
		}
		r.n = v
		r.str, err = rr.bulk(int(v))
		return r, err
	case '*':
		v, ok := parseInt(l[1:])
		if !ok || v < -1 {
			return r, fmt.Errorf("%w: bad array length %q", errProtocol, l)
		}
		if v == -1 {
			r.null = true
			return r, nil
		}
		if depth >= maxNesting {
			return r, fmt.Errorf("%w: arrays nested deeper than %d", errProtocol, maxNesting)
		}
		r.n = v
		for i := int64(0); i < v; i++ {
			if _, err := rr.readDepth(depth + 1); err != nil {
				return r, err
			}
		}
		return r, nil
	}
	return r, fmt.Errorf("%w: unknown type %q", errProtocol, l)
}

// bulk reads n bytes of bulk data and its CRLF.
func (rr *respReader) bulk(n int) ([]byte, error) {
	var data []byte
	if n+2 <= rr.br.Size() {
		p, err := rr.br.Peek(n + 2)
		if err != nil {
			return nil, err
		}
		data = p
		defer rr.br.Discard(n + 2)
	} else {
		if cap(rr.big) < n+2 {
			rr.big = make([]byte, n+2)
		}
		data = rr.big[:n+2]
		if _, err := io.ReadFull(rr.br, data); err != nil {
			return nil, err
		}
	}
	if data[n] != '\r' || data[n+1] != '\n' {
		return nil, fmt.Errorf("%w: bulk not ended by CRLF", errProtocol)
	}
	return data[:n], nil
}

// client is one connection: a reusable output buffer and a reply reader.
type client struct {
	nc  net.Conn
	out []byte
	rd  *respReader
}

func dial(addr string, timeout time.Duration) (*client, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &client{nc: nc, out: make([]byte, 0, 64<<10), rd: newRespReader(nc, 64<<10)}, nil
}

// flush sends the buffered commands with one write.
func (c *client) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	_, err := c.nc.Write(c.out)
	c.out = c.out[:0]
	return err
}

// do sends one command and returns its reply; for setup, not the hot loop.
func (c *client) do(args ...string) (reply, error) {
	c.out = appendCommand(c.out, args...)
	if err := c.flush(); err != nil {
		return reply{}, err
	}
	return c.rd.read()
}

func (c *client) Close() error { return c.nc.Close() }
