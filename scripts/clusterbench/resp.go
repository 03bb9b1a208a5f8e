package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// respConn is a plain RESP connection: commands are appended to out and sent
// with one write, so a pipeline is one write; replies are read one by one.
// It is loadgen's wire pattern, without its allocation-free reader (at the
// cluster's rates the generator's CPU is not what limits).
type respConn struct {
	conn net.Conn
	rd   *bufio.Reader
	out  []byte
}

func dialRESP(addr string, timeout time.Duration) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &respConn{conn: c, rd: bufio.NewReaderSize(c, 64<<10)}, nil
}

func (c *respConn) Close() error { return c.conn.Close() }

// add appends one command.
func (c *respConn) add(args ...string) {
	c.out = append(c.out, '*')
	c.out = strconv.AppendInt(c.out, int64(len(args)), 10)
	c.out = append(c.out, '\r', '\n')
	for _, a := range args {
		c.out = append(c.out, '$')
		c.out = strconv.AppendInt(c.out, int64(len(a)), 10)
		c.out = append(c.out, '\r', '\n')
		c.out = append(c.out, a...)
		c.out = append(c.out, '\r', '\n')
	}
}

func (c *respConn) flush() error {
	_, err := c.conn.Write(c.out)
	c.out = c.out[:0]
	return err
}

// reply is one decoded reply; arrays are read and dropped (kind '*').
type reply struct {
	kind byte // '+', '-', ':', '$', '*'
	str  string
	n    int64
	null bool
}

func (r reply) isErr() bool { return r.kind == '-' }

func (r reply) String() string {
	switch {
	case r.null:
		return "(nil)"
	case r.kind == ':':
		return strconv.FormatInt(r.n, 10)
	}
	return string(r.kind) + r.str
}

func (c *respConn) read() (reply, error) {
	line, err := c.rd.ReadString('\n')
	if err != nil {
		return reply{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return reply{}, fmt.Errorf("bad reply line %q", line)
	}
	r := reply{kind: line[0]}
	body := line[1 : len(line)-2]
	switch r.kind {
	case '+', '-':
		r.str = body
	case ':':
		r.n, err = strconv.ParseInt(body, 10, 64)
	case '$':
		var n int
		if n, err = strconv.Atoi(body); err != nil || n < 0 {
			r.null = err == nil
			return r, err
		}
		buf := make([]byte, n+2)
		if _, err = io.ReadFull(c.rd, buf); err != nil {
			return r, err
		}
		r.str = string(buf[:n])
	case '*':
		var n int
		if n, err = strconv.Atoi(body); err != nil || n < 0 {
			r.null = err == nil
			return r, err
		}
		for range n {
			if _, err = c.read(); err != nil {
				return r, err
			}
		}
	default:
		return r, fmt.Errorf("bad reply type %q", line)
	}
	return r, err
}

// do sends one command and reads its reply, all within timeout.
func (c *respConn) do(timeout time.Duration, args ...string) (reply, error) {
	if err := c.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return reply{}, err
	}
	defer c.conn.SetDeadline(time.Time{})
	c.add(args...)
	if err := c.flush(); err != nil {
		return reply{}, err
	}
	return c.read()
}
