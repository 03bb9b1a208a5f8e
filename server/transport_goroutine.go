package server

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/limits"
	"github.com/leasehold/leasehold/protocol"
	"github.com/tidwall/redcon"
)

// The goroutine transport (Config.IOLoops 0, and systems without epoll):
// each connection is served by a goroutine of its own that the Server owns,
// with blocking reads through Go's netpoller. Its loop is redcon's: read,
// run, flush. A connection gets a second goroutine, its writer, once it
// subscribes (messages arrive while the first blocks in Read) or once the
// socket does not take a write whole (the first goes on reading meanwhile,
// see writeSocket); a client that reads its replies as they come costs one
// goroutine, one read and one write per command.

// newGoroutineConn serves nc with blocking reads on a goroutine of its own.
func newGoroutineConn(s *Server, nc net.Conn) *conn {
	c := newConn(s, nc.RemoteAddr().String(), nc.LocalAddr().String())
	c.nc = nc
	if tc, ok := nc.(*tlsConn); ok {
		c.sealWithTLS(tc)
	} else if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	c.outDrained.L = &c.wmu
	c.wr = redcon.NewWriter(lockedWriter{c})
	c.rd = protocol.NewReader(blockingReader{c}, c.readerLimits())
	return c
}

// serve runs the goroutine transport until the connection ends: it runs the
// commands the reader has, flushes their replies (commit, then write) once
// no further command is buffered, and then blocks for more. While its
// output the socket has refused (the writer goroutine's, see writeSocket)
// is at outputPause, it runs no command and reads the client's input ahead
// instead, as the event loop does.
func (c *conn) serve() {
	c.log.Debug().Msg("connected")
	finish := true // write what is queued before closing
	defer func() {
		if r := recover(); r != nil {
			c.recoverPanic(r)
		} else if finish {
			c.waitOutput(0)
		}
		c.nc.Close()
		c.unsubscribeAll()
		c.stopDelivery()
		c.releaseEphemeral()
		c.srv.applier.closed(c)
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
		if c.outputFull() && !c.readAheadWhileFull() {
			finish = false
			return
		}
	}
}

// readAheadWhileFull takes the client's input without running it while
// the output waits for the writer goroutine at outputPause, up to the query
// buffer limit, and returns once the output has drained below it (the
// writer wakes a Read blocked meanwhile, see blockingReader). It reports
// false if the connection must close at once: its input passed the query
// buffer limit (closed as Redis closes it, and as the event loop does), or
// its output could not be written.
func (c *conn) readAheadWhileFull() bool {
	c.readingAhead = true
	defer func() { c.readingAhead = false }()
	for c.outputFull() {
		if c.inputEnded {
			// The input ended (or failed, or the idle timeout or a
			// shutdown stopped it): the reader reports it after the
			// commands it has, which run once the output drains.
			if c.waitOutput(outputPause-1) != nil {
				return false
			}
			continue
		}
		var pe *protocol.ProtocolError
		switch err := c.rd.ReadAhead(); {
		case err == nil, err == protocol.ErrWouldBlock:
		case errors.As(err, &pe):
			c.readFailed(err)
			return false
		default:
			c.inputEnded = true
		}
		c.wmu.Lock()
		failed := c.outErr != nil
		c.wmu.Unlock()
		if failed {
			return false
		}
	}
	return true
}

// blockingReader is the goroutine transport's source. While replies wait to
// be flushed it reports ErrWouldBlock, so that the reader hands control back
// to serve, which flushes them before this blocks on the socket; then it
// arms the idle timeout and reads. While it reads ahead (the output is at
// outputPause) the writer goroutine may end its Read, once the output has
// drained, by a deadline in the past: that is ErrWouldBlock too, "look
// again", and neither an idle timeout nor a shutdown.
type blockingReader struct{ c *conn }

func (r blockingReader) Read(p []byte) (int, error) {
	c := r.c
	if c.unflushed {
		return 0, protocol.ErrWouldBlock
	}
	if t := c.srv.idleTimeout(); t > 0 {
		if c.subscriptions() > 0 {
			// As in Redis, a listening client has nothing to say: the idle
			// timeout spares it.
			c.nc.SetReadDeadline(time.Time{})
		} else {
			c.nc.SetReadDeadline(time.Now().Add(t))
		}
	} else if c.readWoken {
		c.nc.SetReadDeadline(time.Time{}) // the writer's wake-up is spent
	}
	c.readWoken = false
	if c.readingAhead {
		c.wmu.Lock()
		if c.outErr != nil || c.unsent.Load() < outputPause {
			c.wmu.Unlock()
			return 0, protocol.ErrWouldBlock
		}
		c.wakeReader = true
		c.wmu.Unlock()
	}
	// Checked after the deadline is set: stopReading's deadline, set after
	// closing is closed, cannot be overwritten unseen.
	select {
	case <-c.srv.closing:
		return 0, net.ErrClosed
	default:
	}
	n, err := c.nc.Read(p)
	if c.tlsConn == nil { // a TLS connection's socket reads count in tlsTransport.Read
		c.counters.NetIn.Add(uint64(n))
	}
	if c.readingAhead {
		c.wmu.Lock()
		c.readWoken = !c.wakeReader // the writer took the wake-up: it set a deadline
		c.wakeReader = false
		c.wmu.Unlock()
		if c.readWoken && errors.Is(err, os.ErrDeadlineExceeded) {
			if n > 0 {
				return n, nil
			}
			return 0, protocol.ErrWouldBlock
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The idle timeout's deadline, or stopReading's (the writer's
		// wake-up returned above).
		select {
		case <-c.srv.closing:
		default:
			c.srv.cmdStats.IdleCloses.Add(1)
		}
	}
	return n, err
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
// a subscriber's messages take turns (see writeSocket).
type lockedWriter struct{ c *conn }

func (w lockedWriter) Write(p []byte) (int, error) {
	pubsub := w.c.subscriptions() > 0 // on the goroutine that changes them
	w.c.wmu.Lock()
	defer w.c.wmu.Unlock()
	if err := w.c.writeSocket(p, pubsub); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeSocket sends p on the goroutine transport's socket, under the output
// buffer limit of class normal or pubsub; the caller holds wmu and has
// committed what p reports. It never blocks: with nothing queued before p
// it makes one non-blocking write, and it queues what the socket does not
// take (all of p, if output is queued already) for the writer goroutine,
// started then if it is not running (see startDelivery). So a connection's
// goroutine never waits on its client: a client that writes all its
// commands before it reads a reply is read ahead meanwhile (see serve).
//
// The output buffer limits apply to the unsent output, p included: above
// the hard limit the connection closes with p unwritten, and above the soft
// one the client must take the writer's write within the soft time (a write
// deadline), or the connection closes.
func (c *conn) writeSocket(p []byte, pubsub bool) error {
	if c.outErr != nil {
		return c.outErr
	}
	if c.tlsConn != nil {
		return c.writeSocketTLS(p, pubsub) // encrypts p, then comes back below
	}
	return c.writeSocketRaw(p, pubsub)
}

// writeSocketRaw is writeSocket's part for bytes as they go on the wire.
func (c *conn) writeSocketRaw(p []byte, pubsub bool) error {
	unsent := c.unsent.Load()
	size := unsent + int64(len(p))
	c.srv.notePeakOutput(size)
	lim := c.srv.cfg.OutputLimits.Normal
	if pubsub {
		lim = c.srv.cfg.OutputLimits.PubSub
	}
	if bound, _ := overOutputLimit(lim, size, 0, 0); bound != "" { // hard, or soft with no time allowed
		c.outputLimitReached(bound, size, lim, pubsub)
		c.outErr = errOutputLimit
		c.outDrained.Broadcast()
		c.nc.Close()
		return errOutputLimit
	}
	if unsent == 0 && c.raw != nil {
		n, err := writeNow(c.raw, p)
		c.counters.NetOut.Add(uint64(n))
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			c.outErr = err
			c.outDrained.Broadcast()
			return err
		}
		p = p[n:]
		if len(p) == 0 {
			return nil
		}
	}
	c.outQueue = append(c.outQueue, p...)
	c.outPubSub = pubsub
	if queued := c.unsent.Add(int64(len(p))); lim.Soft > 0 && queued > lim.Soft && c.writeSoftSince.IsZero() {
		// Above the soft limit from now: the writer's write in progress, if
		// any, gets the soft deadline too.
		c.writeSoftSince = time.Now()
		c.armWriteDeadline(lim)
	}
	c.startDelivery()
	c.wakeMessageWriter()
	return nil
}

// writeQueued is the writer goroutine's part of writeSocket: it writes the
// queued output, blocking, with a write deadline (the soft output limit's
// time, or the idle timeout: a client that stops reading is as idle as one
// that stops sending), and wakes the connection's goroutine once the
// output has drained below outputPause. A failed write closes the
// connection; its goroutine finds out (outErr) at its next write or look.
func (c *conn) writeQueued() error {
	for {
		c.wmu.Lock()
		out, pubsub, err := c.outQueue, c.outPubSub, c.outErr
		c.outQueue = nil
		lim := c.srv.cfg.OutputLimits.Normal
		if pubsub {
			lim = c.srv.cfg.OutputLimits.PubSub
		}
		if err == nil && len(out) > 0 {
			c.armWriteDeadline(lim)
		}
		c.wmu.Unlock()
		if err != nil || len(out) == 0 {
			return err
		}
		n, err := c.socket().Write(out)
		c.counters.NetOut.Add(uint64(n))
		c.wmu.Lock()
		left := c.unsent.Add(-int64(n))
		if c.wakeReader && left < outputPause {
			c.wakeReader = false
			c.nc.SetReadDeadline(time.Now())
		}
		if left <= lim.Soft {
			c.writeSoftSince = time.Time{}
		}
		softExpired := c.softArmed && errors.Is(err, os.ErrDeadlineExceeded)
		if err == nil && left == 0 && c.deadlineArmed {
			// writeSocket's non-blocking write must not meet it expired.
			c.nc.SetWriteDeadline(time.Time{})
			c.deadlineArmed, c.softArmed = false, false
		}
		c.outDrained.Broadcast()
		c.wmu.Unlock()
		if err != nil {
			if softExpired {
				c.outputLimitReached("soft", left, lim, pubsub)
			}
			c.log.Debug().Err(err).Msg("write failed")
			return err
		}
	}
}

// armWriteDeadline sets the writer goroutine's write deadline, under wmu:
// the soft output limit's, once the unsent output has stayed above it for
// the soft time, or the idle timeout's (a client that stops reading is as
// idle as one that stops sending), whichever comes first.
func (c *conn) armWriteDeadline(lim limits.OutputLimit) {
	var at time.Time
	if idle := c.srv.idleTimeout(); idle > 0 {
		at = time.Now().Add(idle)
	}
	soft := false
	if !c.writeSoftSince.IsZero() {
		if s := c.writeSoftSince.Add(lim.SoftFor); at.IsZero() || s.Before(at) {
			at, soft = s, true
		}
	}
	if at.IsZero() && !c.deadlineArmed {
		return
	}
	c.nc.SetWriteDeadline(at)
	c.deadlineArmed, c.softArmed = !at.IsZero(), soft
}

// failOutput ends the writer goroutine's connection after err: nothing
// more is written, and its goroutine, in Read or waitOutput, finds out.
func (c *conn) failOutput(err error) {
	c.wmu.Lock()
	if c.outErr == nil {
		c.outErr = err
	}
	c.outDrained.Broadcast()
	c.wmu.Unlock()
	c.nc.Close()
}

// waitOutput waits until the writer goroutine has at most limit bytes
// left to write, or has failed (its error).
func (c *conn) waitOutput(limit int64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for c.outErr == nil && c.unsent.Load() > limit {
		c.outDrained.Wait()
	}
	return c.outErr
}

// startDelivery starts the goroutine transport's writer goroutine, owned by
// the connection, if it is not running: it writes the output the socket
// did not take at once (see writeSocket), and the messages of a
// subscribed connection, which arrive from other goroutines while the
// connection's own goroutine waits in Read. It runs on the connection's
// goroutine, and stopDelivery stops it when the connection closes.
func (c *conn) startDelivery() {
	if c.loop != nil || c.outStop != nil {
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
				err := c.writeMessages()
				if err == nil {
					err = c.writeQueued()
				}
				if err != nil {
					c.failOutput(err)
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
	return c.writeSocket(out, true)
}

// wakeMessageWriter tells the writer goroutine that output waits.
func (c *conn) wakeMessageWriter() {
	select {
	case c.outSignal <- struct{}{}:
	default:
	}
}

// stopDelivery stops the writer goroutine and waits for it.
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
	var handoff chan []uint64 // a replicated wait's (replicated_wait.go)
	if b.replicated != nil {
		handoff = b.replicated.handoff
	}
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
		case tokens := <-handoff:
			b.replicated.forget()
			out = c.handedOverOutcome(tokens)
			break wait
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
