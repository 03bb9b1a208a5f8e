package server

import (
	"errors"
	"net"
	"os"
	"time"

	"github.com/leasehold/leasehold/protocol"
	"github.com/tidwall/redcon"
)

// The goroutine transport (Config.IOLoops 0, and systems without epoll):
// each connection is served by a goroutine of its own that the Server owns,
// with blocking reads through Go's netpoller. Its loop is redcon's: read,
// run, flush. A connection that subscribes gets a second goroutine, its
// message writer, since messages arrive while the first blocks in Read.

// newGoroutineConn serves nc with blocking reads on a goroutine of its own.
func newGoroutineConn(s *Server, nc net.Conn) *conn {
	c := newConn(s, nc.RemoteAddr().String(), nc.LocalAddr().String())
	c.nc = nc
	c.wr = redcon.NewWriter(lockedWriter{c})
	c.rd = protocol.NewReader(blockingReader{c}, s.cfg.Limits)
	return c
}

// serve runs the goroutine transport until the connection ends: it runs the
// commands the reader has, flushes their replies (commit, then write) once
// no further command is buffered, and then blocks for more.
func (c *conn) serve() {
	c.log.Debug().Msg("connected")
	defer func() {
		c.recoverPanic(recover())
		c.nc.Close()
		c.unsubscribeAll()
		c.releaseEphemeral()
		c.log.Debug().Uint64("commands", c.commands.Load()).Msg("disconnected")
	}()
	for {
		open := c.runCommands()
		// An empty flush would still cost a write syscall.
		if c.unflushed {
			if err := c.flush(); err != nil {
				c.log.Debug().Err(err).Msg("write failed")
				return
			}
		}
		if !open {
			return
		}
	}
}

// blockingReader is the goroutine transport's source. While replies wait to
// be flushed it reports ErrWouldBlock, so that the reader hands control back
// to serve, which flushes them before this blocks on the socket; then it
// arms the idle timeout and reads.
type blockingReader struct{ c *conn }

func (r blockingReader) Read(p []byte) (int, error) {
	c := r.c
	if c.unflushed {
		return 0, protocol.ErrWouldBlock
	}
	if t := c.srv.cfg.IdleTimeout; t > 0 {
		if c.subscriptions() > 0 {
			// As in Redis, a listening client has nothing to say: the idle
			// timeout spares it.
			c.nc.SetReadDeadline(time.Time{})
		} else {
			c.nc.SetReadDeadline(time.Now().Add(t))
		}
	}
	// Checked after the deadline is set: stopReading's deadline, set after
	// closing is closed, cannot be overwritten unseen.
	select {
	case <-c.srv.closing:
		return 0, net.ErrClosed
	default:
	}
	return c.nc.Read(p)
}

// stopReading is the server's shutdown of a goroutine-transport connection,
// from the goroutine that runs Close: a blocked Read returns at once (and
// Read never blocks again, see blockingReader), so the connection finishes
// the commands it has read, flushes their replies and closes, as at an EOF.
// A write to a client that does not read is cut short by Close at the
// shutdown's deadline, by closing the socket.
func (c *conn) stopReading() { c.nc.SetReadDeadline(time.Now()) }

// lockedWriter is the goroutine transport's socket writer, under the
// connection's replies (conn.flush, which has committed before): they and
// the message writer's frames take turns.
type lockedWriter struct{ c *conn }

func (w lockedWriter) Write(p []byte) (int, error) {
	pubsub := w.c.subscriptions() > 0 // on the goroutine that changes them
	w.c.wmu.Lock()
	defer w.c.wmu.Unlock()
	return w.c.writeSocket(p, pubsub)
}

// writeSocket writes p to the goroutine transport's socket, under the output
// buffer limit of class normal or pubsub; the caller holds wmu and has
// committed what p reports.
//
// The output buffer limits apply as far as a blocking write allows: p is
// the connection's unsent output, so a p above the hard limit closes the
// connection unwritten, and one above the soft limit must be taken by the
// client within the soft time (a write deadline), or the connection closes.
// (The event loop keeps reading a client's input while its output waits;
// here the goroutine blocks in Write meanwhile, so a client that writes
// more than the socket buffers hold before it reads a reply waits on the
// server as the server waits on it, until the idle timeout or a soft
// limit's deadline, if any. Reading while writing would take a second
// goroutine per connection, which this transport does not pay for.)
func (c *conn) writeSocket(p []byte, pubsub bool) (int, error) {
	size := int64(len(p))
	c.srv.notePeakOutput(size)
	lim := c.srv.cfg.OutputLimits.Normal
	if pubsub {
		lim = c.srv.cfg.OutputLimits.PubSub
	}
	bound, soft := overOutputLimit(lim, size, 0, 0)
	if bound != "" { // hard, or soft with no time allowed
		c.outputLimitReached(bound, size, lim, pubsub)
		c.nc.Close()
		return 0, errOutputLimit
	}
	idle := c.srv.cfg.IdleTimeout
	switch {
	case soft && (idle == 0 || lim.SoftFor < idle):
		c.nc.SetWriteDeadline(time.Now().Add(lim.SoftFor))
		c.softDeadline = true
	case idle > 0:
		// A client that stops reading is as idle as one that stops
		// sending: it must not hold a goroutine in Write for ever.
		c.nc.SetWriteDeadline(time.Now().Add(idle))
		c.softDeadline = false
	case c.softDeadline:
		c.nc.SetWriteDeadline(time.Time{})
		c.softDeadline = false
	}
	n, err := c.nc.Write(p)
	if err != nil && c.softDeadline && errors.Is(err, os.ErrDeadlineExceeded) {
		c.outputLimitReached("soft", size-int64(n), lim, pubsub)
		// As at the hard limit: the message writer stops here, and nobody
		// else would close the socket of a subscriber that sends nothing.
		c.nc.Close()
	}
	return n, err
}

// startDelivery starts the goroutine transport's message writer, owned by
// the connection: messages arrive from other goroutines while the
// connection's own goroutine waits in Read.
func (c *conn) startDelivery() {
	if c.loop != nil {
		return
	}
	c.outSignal = make(chan struct{}, 1)
	c.outStop = make(chan struct{})
	c.outDone = make(chan struct{})
	go func() {
		defer close(c.outDone)
		for {
			select {
			case <-c.outSignal:
				if err := c.writeMessages(); err != nil {
					return
				}
			case <-c.outStop:
				return
			}
		}
	}()
}

// writeMessages is the message writer's flush: like conn.flush, it commits
// before it writes, since a lock event, like a reply, may go out only once
// what it reports is as durable as the data directory's policy says. It
// holds wmu, so that an UNSUBSCRIBE reply flushed after the client left a
// channel cannot be overtaken by that channel's messages.
func (c *conn) writeMessages() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	out := c.takeOutbox()
	if len(out) == 0 {
		return nil
	}
	if err := c.srv.commitBeforeReply(); err != nil {
		return err
	}
	_, err := c.writeSocket(out, true)
	return err
}

// wakeMessageWriter tells the message writer that messages wait.
func (c *conn) wakeMessageWriter() {
	select {
	case c.outSignal <- struct{}{}:
	default:
	}
}

// stopDelivery stops the message writer and waits for it.
func (c *conn) stopDelivery() {
	if c.outStop == nil {
		return
	}
	close(c.outStop)
	<-c.outDone
	c.outStop = nil
}

// waitInline is the goroutine transport's wait: the connection's goroutine
// blocks until the grant, the timeout, the client's hang-up or the server's
// Close. A client that pipelines more commands behind its waiting command is
// not watched for hang-ups once its bytes arrive (the watch must not consume
// them); a grant made after it left is released at once, found by a check
// for the peer's FIN before the reply (Linux) or by the failed reply.
func (c *conn) waitInline(b *blockState, progress chan uint64) {
	if c.unflushed {
		c.flush() // earlier pipelined replies should not wait with us
	}
	// The idle timeout does not apply while waiting (nor may its deadline cut
	// the hang-up watch short); the next read arms it again.
	c.nc.SetReadDeadline(time.Time{})
	hangup, stopWatch := watchHangup(c.nc)
	timer := time.NewTimer(time.Duration(b.deadline - c.srv.monotonic()))
	var out waitOutcome
	gone, shutdown := false, false
wait:
	for {
		select {
		case token := <-progress:
			var done bool
			if out, done = c.resumeWait(token); done {
				break wait
			}
		case <-timer.C:
			out = c.timeoutWait()
			break wait
		case asError := <-b.unblock:
			out = c.cancelWait()
			out.unblockedErr = asError
			break wait
		case <-hangup:
			gone = true
			break wait
		case <-c.srv.closing:
			out = c.cancelWait()
			shutdown = true
			break wait
		}
	}
	timer.Stop()
	stopWatch()
	switch {
	case shutdown:
		// Told, not dropped: the client learns why its wait ended, and
		// nothing was granted (what was, meanwhile, is given back).
		c.giveBack(b, out)
		c.unpark()
		c.writeErr(protocol.ErrShutdown)
		c.flush()
		c.quit = true
		return
	case gone:
		c.abandonWait()
		c.quit = true
		return
	case out.granted && peerClosed(c.nc):
		// The watch stops at pipelined bytes; a FIN behind them still
		// means nobody will read this grant.
		c.giveBack(b, out)
		c.unpark()
		c.quit = true
		return
	}
	c.endWait(out)
	if err := c.flush(); err != nil {
		c.giveBack(b, out) // nobody to hand it to
	}
}
