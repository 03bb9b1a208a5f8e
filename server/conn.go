package server

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/protocol"
	"github.com/rs/zerolog"
	"github.com/tidwall/redcon"
)

// conn is one client connection, served by one goroutine: read a command,
// run it, buffer the reply; replies are flushed only when the reader is about
// to wait for more input, so a pipeline is answered in one write.
type conn struct {
	srv      *Server
	id       uint64
	nc       net.Conn
	rd       *protocol.Reader
	wr       *redcon.Writer
	log      zerolog.Logger
	commands atomic.Uint64 // read by INFO from other goroutines

	// Owned by the serving goroutine.
	name, libName, libVer string
	quit                  bool // reply, flush, then close
	unflushed             bool // replies are waiting in wr
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		srv: s,
		id:  s.nextConnID.Add(1),
		nc:  nc,
		wr:  redcon.NewWriter(nc),
	}
	c.log = s.log.With().Uint64("conn", c.id).Str("remote", nc.RemoteAddr().String()).Logger()
	c.rd = protocol.NewReader(flushBeforeRead{c}, s.cfg.Limits)
	return c
}

// flushBeforeRead is the reader's source: before blocking on the socket it
// flushes buffered replies, and it arms the idle timeout.
type flushBeforeRead struct{ c *conn }

func (f flushBeforeRead) Read(p []byte) (int, error) {
	c := f.c
	if c.unflushed {
		// An empty Flush would still cost a write syscall.
		c.unflushed = false
		if err := c.wr.Flush(); err != nil {
			return 0, err
		}
	}
	if t := c.srv.cfg.IdleTimeout; t > 0 {
		c.nc.SetReadDeadline(time.Now().Add(t))
	}
	return c.nc.Read(p)
}

func (c *conn) serve() {
	c.log.Debug().Msg("connected")
	defer func() {
		if r := recover(); r != nil {
			c.srv.stats.panics.Add(1)
			c.log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("handler panicked; closing its connection")
		}
		c.nc.Close()
		c.log.Debug().Uint64("commands", c.commands.Load()).Msg("disconnected")
	}()
	for !c.quit {
		args, err := c.rd.ReadCommand()
		if err != nil {
			c.readFailed(err)
			return
		}
		c.commands.Add(1)
		c.dispatch(args)
		c.unflushed = true
	}
	c.wr.Flush()
}

func (c *conn) readFailed(err error) {
	var pe *protocol.ProtocolError
	switch {
	case errors.As(err, &pe):
		c.srv.stats.protocolErrors.Add(1)
		c.log.Info().Str("error", pe.Error()).Msg("protocol error; closing connection")
		text, _ := protocol.Reply(pe)
		c.wr.WriteError(text)
		c.wr.Flush()
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Debug().Msg("idle timeout")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
	default:
		c.log.Debug().Err(err).Msg("read failed")
	}
}

// dispatch runs one command and buffers its reply.
func (c *conn) dispatch(args [][]byte) {
	i := protocol.LookupIndex(args[0])
	if i < 0 {
		c.writeErr(protocol.UnknownCommandError(args))
		return
	}
	cmd := &protocol.Commands[i]
	if err := cmd.CheckArity(len(args)); err != nil {
		c.writeErr(err)
		return
	}
	if err := c.checkKeys(cmd, args); err != nil {
		c.writeErr(err)
		return
	}
	if err := c.srv.handlers[i](c, args); err != nil {
		c.writeErr(err)
	}
}

// checkKeys applies the lock table's key rules to every key argument the
// command table declares, so that every lock command, not only those that
// store a key, refuses an empty or overlong name.
func (c *conn) checkKeys(cmd *protocol.Command, args [][]byte) error {
	if cmd.FirstKey <= 0 {
		return nil
	}
	last := cmd.LastKey
	if last < 0 {
		last += len(args)
	}
	for k := cmd.FirstKey; k <= last && k < len(args); k += max(cmd.Step, 1) {
		if err := c.srv.table.CheckKey(args[k]); err != nil {
			return err
		}
	}
	return nil
}

// writeErr replies with err mapped to its wire code; errors nobody mapped
// are logged, since the client only sees "internal error".
func (c *conn) writeErr(err error) {
	text, known := protocol.Reply(err)
	if !known {
		c.log.Error().Err(err).Msg("unmapped error")
	}
	c.wr.WriteError(text)
}
