package server

import (
	"errors"
	"io"

	"github.com/leasehold/leasehold/protocol"
	"golang.org/x/sys/unix"
)

// The event loop's TLS: the loop owns the socket, non-blocking, and the
// tls.Conn reads and writes memory (tlsTransport in memory mode). A read
// drains plaintext from the tls.Conn, reading the socket into the
// transport whenever it needs more, until the socket would block; a write
// encrypts into the transport and sends the records as a plain reply is
// sent, keeping what the socket refuses in c.pending. So the loop's
// pending output, read-ahead and output limits see ciphertext and work as
// for a plain connection.

// adoptTLS makes the event loop's conn c, adopted from tc's socket, read
// and write through tc in memory.
func adoptTLS(c *conn, tc *tlsConn) {
	tc.tr.memory = true
	c.tlsConn = tc
	c.tlsCN = peerCN(tc)
	c.authenticateByCertificate()
}

// tlsRead is loopReader's Read for a TLS connection: plaintext the
// tls.Conn has, reading the socket as it needs; protocol.ErrWouldBlock
// once the socket has nothing more.
func (c *conn) tlsRead(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	t := c.tlsConn.tr
	for {
		n, err := c.tlsConn.Read(p)
		c.tlsSend() // a post-handshake reply, such as a KeyUpdate's, if any
		if n > 0 {
			return n, nil
		}
		if !errors.Is(err, errTLSWouldBlock) {
			if err == nil {
				continue // a record without application data
			}
			return 0, err
		}
		if c.drained {
			// As loopReader: the last read left room, so it took all the
			// socket had; epoll reports what comes later.
			c.drained = false
			return 0, protocol.ErrWouldBlock
		}
		if t.inBuf == nil {
			t.inBuf = make([]byte, tlsRecordRoom)
		}
		m, rerr := rawRead(c.fd, t.inBuf)
		switch {
		case rerr == unix.EINTR:
			continue
		case rerr == unix.EAGAIN:
			return 0, protocol.ErrWouldBlock
		case rerr != nil:
			t.readErr = rerr
		case m == 0:
			t.readErr = io.EOF
		default:
			t.in = t.inBuf[:m]
			c.counters.NetIn.Add(uint64(m))
			c.drained = m < len(t.inBuf)
			if c.loop.idle > 0 {
				c.lastRead = c.srv.monotonic()
			}
		}
	}
}

// tlsWrite is loopWriter's Write for a TLS connection: it encrypts p and
// sends the records.
func (c *conn) tlsWrite(p []byte) (int, error) {
	if _, err := c.tlsConn.Write(p); err != nil {
		if c.sockErr == nil {
			c.sockErr = err
		}
		return 0, err
	}
	if err := c.tlsSend(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// tlsSend sends the records the tls.Conn wrote into its transport.
func (c *conn) tlsSend() error {
	return c.tlsConn.tr.takeOut(func(records []byte) error {
		if len(records) == 0 {
			return nil
		}
		_, err := loopWriter{c}.writeRaw(records)
		return err
	})
}
