package server

import (
	"container/heap"
	"errors"
	"github.com/leasehold/leasehold/internal/cmdstats"
	"io"
	"math"
	"net"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
	"github.com/tidwall/redcon"
	"golang.org/x/sys/unix"
)

// defaultIOLoops is the number of epoll event loops a server runs by default.
const defaultIOLoops = 1

// maxEpollWaitMs caps one epoll_wait, whose timeout is a 32-bit count of ms;
// a longer wait just wakes and sleeps again.
const maxEpollWaitMs = int64(time.Hour / time.Millisecond)

// ioLoop is an epoll event loop that owns a set of connections: it reads
// from a socket only when epoll says it is readable and writes replies when
// a batch of commands is done, so a request costs one read and one write, as
// in Redis, where a goroutine per connection also pays a read that finds
// nothing and a trip through the scheduler. One goroutine, owned by the
// Server, runs each loop; other goroutines talk to it only through post.
type ioLoop struct {
	srv    *Server
	epfd   int
	wakefd int           // an eventfd: post writes it to interrupt epoll_wait
	conns  map[int]*conn // by fd; touched only by the loop's goroutine
	events []unix.EpollEvent

	mu     sync.Mutex // guards tasks, exited
	tasks  []func()
	exited bool // run has returned: nothing posted will run

	waitTimers waitTimers // parked connections' deadlines
	flushLater []*conn    // served this round; their replies wait for the round's commit
	// ready are the connections that stopped at roundCommands or
	// outputPause with commands perhaps left in their reader's buffer, which
	// no epoll event will report: the next round runs them (see
	// continueLater). readySpare is the previous round's list, for reuse.
	ready, readySpare []*conn
	round             uint64  // counts the loop's rounds, for conn.servedRound
	overSoft          []*conn // connections whose unsent output is above their soft limit

	stopping  bool
	deadline  time.Time     // the shutdown's, once stopping
	idle      time.Duration // the idle timeout as the loop applies it (takeIdleTimeout); 0 for none
	lastSweep int64
	done      chan struct{}
	counters  *cmdstats.Block // its connections' commands and bytes; only the loop writes it (cmdstats.go)
}

func newIOLoop(s *Server) (*ioLoop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wakefd)}); err != nil {
		unix.Close(epfd)
		unix.Close(wakefd)
		return nil, err
	}
	l := &ioLoop{
		srv:    s,
		epfd:   epfd,
		wakefd: wakefd,
		conns:  make(map[int]*conn),
		events: make([]unix.EpollEvent, 256),
		done:   make(chan struct{}),
	}
	l.counters = s.cmdStats.LoopBlock()
	return l, nil
}

// post runs fn on the loop's goroutine, soon, and reports false when the
// loop has already returned, in which case fn never runs.
func (l *ioLoop) post(fn func()) bool {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		return false
	}
	// One wake-up for the tasks posted before the loop takes them: the
	// answers to a Raft entry's proposals arrive together, dozens at once.
	wake := len(l.tasks) == 0
	l.tasks = append(l.tasks, fn)
	l.mu.Unlock()
	if wake {
		var one = [8]byte{1}
		unix.Write(l.wakefd, one[:])
	}
	return true
}

// stop asks the loop to end its connections, by deadline at the latest
// (see shutdownConns), and return.
func (l *ioLoop) stop(deadline time.Time) {
	l.post(func() {
		l.stopping = true
		l.deadline = deadline
	})
}

// adopt hands nc's socket to the loop. The net.Conn is closed: the loop
// keeps a duplicate descriptor, out of the Go runtime's poller.
func (l *ioLoop) adopt(nc net.Conn) (*conn, error) {
	tc, _ := nc.(*tlsConn)
	if tc != nil {
		nc = tc.tr.Conn // the socket; tc reads and writes memory from now on
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, errors.New("server: event loop needs a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var dupErr error
	if err := raw.Control(func(s uintptr) { fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, dupErr
	}
	c := newConn(l.srv, nc.RemoteAddr().String(), nc.LocalAddr().String())
	nc.Close()
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	c.fd, c.loop, c.counters = fd, l, l.counters
	if tc != nil {
		adoptTLS(c, tc)
	}
	c.wr = redcon.NewWriter(loopWriter{c})
	c.rd = protocol.NewReader(loopReader{c}, c.readerLimits())
	c.lastRead = l.srv.monotonic()
	return c, nil
}

// register starts watching c; it runs on the loop.
func (l *ioLoop) register(c *conn) {
	if l.stopping {
		l.closeConn(c)
		return
	}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd)}); err != nil {
		c.log.Error().Err(err).Msg("epoll add failed")
		l.closeConn(c)
		return
	}
	l.conns[c.fd] = c
	c.watching = unix.EPOLLIN | unix.EPOLLRDHUP
	if c.tlsConn != nil {
		// The handshake's last read may have taken the first commands
		// from the socket too: no event will report them.
		l.continueLater(c)
	}
	c.log.Debug().Msg("connected")
}

func (l *ioLoop) run() {
	defer close(l.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l.takeIdleTimeout()
	for !l.stopping {
		l.round++
		timeout := l.sweepEvery()
		wake := func(deadline int64) {
			// Wake for deadline, rounded up to a whole ms.
			ms := int(min((deadline-l.srv.monotonic()+int64(time.Millisecond)-1)/int64(time.Millisecond), maxEpollWaitMs))
			if ms = max(ms, 0); timeout < 0 || ms < timeout {
				timeout = ms
			}
		}
		if len(l.waitTimers) > 0 {
			wake(l.waitTimers[0].deadline)
		}
		if next, ok := l.nextSoftDeadline(); ok {
			wake(next)
		}
		// Connections with commands left in their buffers run this round:
		// look for events without waiting.
		due := l.takeReady()
		if len(due) > 0 {
			timeout = 0
		}
		n, err := unix.EpollWait(l.epfd, l.events, timeout)
		if err != nil && err != unix.EINTR {
			l.srv.log.Error().Err(err).Msg("epoll_wait failed; event loop stops")
			break
		}
		for _, ev := range l.events[:max(n, 0)] {
			fd := int(ev.Fd)
			if fd == l.wakefd {
				l.runTasks()
				continue
			}
			if c := l.conns[fd]; c != nil {
				l.handle(c, ev.Events)
			}
		}
		l.serveDue(due)
		if len(l.waitTimers) > 0 {
			l.expireWaits()
		}
		l.flushDeferred()
		if len(l.overSoft) > 0 {
			l.checkSoftLimits()
		}
		if l.idle > 0 {
			l.sweepIdle()
		}
	}
	l.flushDeferred()
	l.mu.Lock()
	l.exited = true
	tasks := l.tasks
	l.tasks = nil
	l.mu.Unlock()
	for _, fn := range tasks {
		fn() // registrations that raced with stop: they see stopping and close
	}
	l.shutdownConns()
	unix.Close(l.epfd)
	unix.Close(l.wakefd)
}

func (l *ioLoop) runTasks() {
	var buf [8]byte
	unix.Read(l.wakefd, buf[:])
	l.mu.Lock()
	tasks := l.tasks
	l.tasks = nil
	l.mu.Unlock()
	for _, fn := range tasks {
		fn()
	}
}

// handle serves one readiness event of c: it sends what it can of the
// output the socket refused before, then runs c's commands if its output is
// below outputPause, or else only reads its input ahead.
func (l *ioLoop) handle(c *conn, events uint32) {
	if c.blocked != nil && events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		// A parked client hung up: it leaves the queue at once.
		l.closeConn(c)
		return
	}
	if c.inFlight && events&(unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		// Gone while its proposal is in flight: nobody will read the
		// replies (ioLoop.answered sees to what it was granted). A client
		// that only half-closed still gets them.
		l.closeConn(c)
		return
	}
	if events&unix.EPOLLOUT != 0 && c.pending.Len() > 0 {
		if !c.writePending() {
			l.closeConn(c)
			return
		}
		if c.pending.Len() == 0 && c.closeWhenFlushed {
			l.closeConn(c) // QUIT or a protocol error: its replies are out
			return
		}
	}
	switch {
	case c.blocked != nil || c.inFlight || c.closeWhenFlushed:
	case c.outputFull():
		if events&unix.EPOLLIN != 0 && !l.readAhead(c) {
			return
		}
	default:
		l.serveReadable(c)
		return
	}
	l.rewatchAfter(c, events)
}

// readAhead takes c's input while its commands wait for its output to
// drain, without running them: a client that writes all its commands before
// it reads a reply would otherwise wait for the server to read, while the
// server waited for it to read (Redis keeps reading too). The query buffer
// limit bounds what it holds; a client past it is closed, as Redis closes
// it. It reports false if it closed c.
func (l *ioLoop) readAhead(c *conn) bool {
	var pe *protocol.ProtocolError
	switch err := c.rd.ReadAhead(); {
	case err == nil, err == protocol.ErrWouldBlock:
	case errors.As(err, &pe):
		c.readFailed(err)
		l.closeConn(c)
		return false
	default:
		// The end of the input, or a read error: the reader reports it
		// after the commands it has, which run once the output drains.
		c.inputEnded = true
	}
	return true
}

// rewatch registers the events c needs now: writability while output waits
// for the socket (and input, read ahead, unless the client is done
// sending), only hang-ups while it is parked, input otherwise.
func (l *ioLoop) rewatch(c *conn) { l.rewatchAfter(c, 0) }

// rewatchAfter is rewatch once c was served for events. While c's
// proposal is in flight its input waits for the answer, but the input
// watch goes only once input comes (level-triggered, it would report it
// again and again): a client that waits for each answer sends nothing
// meanwhile, and keeping the watch spares two epoll_ctl calls a command.
func (l *ioLoop) rewatchAfter(c *conn, events uint32) {
	want := uint32(unix.EPOLLIN | unix.EPOLLRDHUP)
	switch {
	case c.pending.Len() > 0:
		// Not EPOLLRDHUP: a client that half-closed may still read its
		// replies, and a level-triggered RDHUP nobody consumes would spin;
		// for the same reason no EPOLLIN once the input has ended.
		want = unix.EPOLLOUT
		if c.blocked == nil && !c.inFlight && !c.closeWhenFlushed && !c.inputEnded {
			want |= unix.EPOLLIN
		}
	case c.blocked != nil:
		want = unix.EPOLLRDHUP
	case c.inFlight && (c.watching != want || events&want != 0):
		want = 0 // hang-ups only (EPOLLHUP and EPOLLERR are always reported)
	}
	if want != c.watching {
		l.watch(c, want)
	}
}

// continueLater has the next round run c's commands again: it stopped at
// roundCommands or outputPause, and may have commands in its reader's
// buffer that no epoll event will report.
func (l *ioLoop) continueLater(c *conn) {
	if !c.readyQueued {
		c.readyQueued = true
		l.ready = append(l.ready, c)
	}
}

// takeReady returns the connections continueLater queued, for this round
// to run, and starts the next round's list.
func (l *ioLoop) takeReady() []*conn {
	due := l.ready
	l.ready = l.readySpare[:0]
	for _, c := range due {
		c.readyQueued = false
	}
	l.readySpare = due
	return due
}

// serveDue runs the commands of the connections takeReady returned, unless
// one already had its turn this round, through an event, or has since
// parked or filled its output, whose end resumes it instead.
func (l *ioLoop) serveDue(due []*conn) {
	for i, c := range due {
		due[i] = nil
		if c.fd < 0 || c.servedRound == l.round || c.blocked != nil || c.inFlight || c.closeWhenFlushed || c.outputFull() {
			continue
		}
		l.serveReadable(c)
	}
}

// armWaitTimer schedules the end of c's wait.
func (l *ioLoop) armWaitTimer(c *conn, b *blockState) {
	l.waitTimers.add(c, b)
}

// progressed carries a parked connection's wait on after its Notify; it
// runs on the loop.
func (l *ioLoop) progressed(c *conn, b *blockState, token uint64) {
	if c.fd < 0 || c.blocked != b || l.stopping {
		// The wait already ended, and CancelWait or CancelAll saw to this
		// grant; or the loop is closing its connections, and closeConn's
		// abandonWait will, rather than run more of c's commands.
		return
	}
	out, done := c.resumeWait(token)
	if !done {
		return
	}
	l.waitTimers.disarm(b)
	c.endWait(out)
	l.serveReadable(c)
}

// unblock ends c's wait b, if it is still on, for CLIENT UNBLOCK; it runs
// on the loop.
func (l *ioLoop) unblock(c *conn, b *blockState, asError bool) {
	if c.fd < 0 || c.blocked != b || l.stopping {
		return // it ended on its own meanwhile, or closeConn will end it
	}
	l.waitTimers.disarm(b)
	if b.replicated != nil {
		l.endReplicatedWait(c, b, true, asError)
		return
	}
	out := c.cancelWait()
	out.unblockedErr = asError
	c.endWait(out)
	l.serveReadable(c)
}

// answered runs then, c's part of the answer to c's proposal in flight
// (conn.proposeAsync), and serves c again, beginning with the command that
// waited for it. If c closed meanwhile, nothing reaches its client: what
// the answer tied to it (EPHEMERAL leases), or a wait it parked, is let go
// at once.
func (l *ioLoop) answered(c *conn, then func([]lockfsm.Result, error), res []lockfsm.Result, err error) {
	c.inFlight = false
	then(res, err)
	c.unflushed = true
	if c.fd < 0 {
		if c.blocked != nil {
			c.abandonWait()
		}
		c.releaseEphemeral()
		return
	}
	if c.blocked != nil || c.inFlight {
		l.finishServe(c, true) // the replies so far go now
		return
	}
	if c.deferred == nil && c.rd.Buffered() == 0 && c.tlsConn == nil && c.watching&unix.EPOLLIN != 0 {
		// Nothing read waits, and input that came meanwhile would have
		// ended the input watch (rewatchAfter): a client that waited for
		// these replies has sent nothing more, and a read would only find
		// the socket empty. Input that comes is reported as any other.
		l.finishServe(c, true)
		return
	}
	l.serveReadable(c)
}

// drainOutbox writes c's queued pub/sub messages; it runs on the loop.
func (l *ioLoop) drainOutbox(c *conn) {
	if c.fd < 0 {
		return
	}
	out := c.takeOutbox()
	if len(out) == 0 {
		return
	}
	c.wr.WriteRaw(out)
	c.flush() // the messages, and any replies waiting for the round's commit
	if c.sockErr != nil {
		l.closeConn(c)
		return
	}
	if l.enforceOutputLimit(c) {
		l.rewatch(c)
	}
}

// enforceOutputLimit closes c if its unsent output has passed its class's
// limit (see OutputLimits), and reports whether it is still open. An output
// above the soft limit starts c's soft clock, which checkSoftLimits reads.
func (l *ioLoop) enforceOutputLimit(c *conn) bool {
	if c.pending.Len() == 0 {
		c.softSince = 0
		return true
	}
	size := int64(c.pending.Len())
	l.srv.notePeakOutput(size)
	lim := c.outputLimit()
	now := l.srv.monotonic()
	bound, above := overOutputLimit(lim, size, c.softSince, now)
	if bound != "" {
		c.outputLimitReached(bound, size, lim, c.subscriptions() > 0)
		l.closeConn(c)
		return false
	}
	switch {
	case !above:
		c.softSince = 0
	case c.softSince == 0:
		c.softSince = now
		if !c.softListed {
			c.softListed = true
			l.overSoft = append(l.overSoft, c)
		}
	}
	return true
}

// checkSoftLimits closes the connections that have stayed above their soft
// output limit too long; they may send and read nothing meanwhile, so no
// event of theirs would.
func (l *ioLoop) checkSoftLimits() {
	kept := l.overSoft[:0]
	for _, c := range l.overSoft {
		if c.fd >= 0 && c.softSince != 0 && l.enforceOutputLimit(c) && c.softSince != 0 {
			kept = append(kept, c)
		} else {
			c.softListed = false
		}
	}
	clear(l.overSoft[len(kept):])
	l.overSoft = kept
}

// nextSoftDeadline returns when the first soft limit of overSoft expires,
// if any runs.
func (l *ioLoop) nextSoftDeadline() (int64, bool) {
	next, ok := int64(math.MaxInt64), false
	for _, c := range l.overSoft {
		if c.fd >= 0 && c.softSince != 0 {
			next, ok = min(next, c.softSince+int64(c.outputLimit().SoftFor)), true
		}
	}
	return next, ok
}

// expireWaits ends the waits whose deadline has passed.
func (l *ioLoop) expireWaits() {
	now := l.srv.monotonic()
	for len(l.waitTimers) > 0 && l.waitTimers[0].deadline <= now {
		t := heap.Pop(&l.waitTimers).(waitTimer)
		c := t.c
		if c.fd < 0 || c.blocked != t.b {
			continue // defensive: waits that end early are disarmed
		}
		if t.b.replicated != nil {
			l.endReplicatedWait(c, t.b, false, false)
			continue
		}
		c.endWait(c.timeoutWait())
		l.serveReadable(c)
	}
}

// serveReadable runs the commands the socket has for now, up to the
// round's bounds (see runCommands), then writes the replies.
func (l *ioLoop) serveReadable(c *conn) {
	c.servedRound = l.round
	open := func() (open bool) {
		defer func() {
			if r := recover(); r != nil {
				c.recoverPanic(r)
				open = false
			}
		}()
		return c.runCommands()
	}()
	if c.unflushed && l.srv.store != nil && l.srv.store.Pending() {
		// Group commit: the replies of every connection served in this
		// round wait for one commit (one fsync under --fsync always) at the
		// end of the round, rather than one each.
		c.openAfterRound = open
		if !c.flushQueued {
			c.flushQueued = true
			l.flushLater = append(l.flushLater, c)
		}
		return
	}
	l.finishServe(c, open)
}

// flushDeferred commits the round's changes and sends the replies that
// waited for it: one commit for them all, so each connection's flush finds
// nothing left to commit (unless another loop has changed more meanwhile).
func (l *ioLoop) flushDeferred() {
	if len(l.flushLater) == 0 {
		return
	}
	l.srv.commitBeforeReply() // a failure fails the flushes below, and stops the server
	for i, c := range l.flushLater {
		l.flushLater[i] = nil
		c.flushQueued = false
		if c.fd >= 0 {
			l.finishServe(c, c.openAfterRound)
		}
	}
	l.flushLater = l.flushLater[:0]
}

// finishServe flushes c's replies (commit, then write) and decides what to
// watch for next.
func (l *ioLoop) finishServe(c *conn, open bool) {
	if c.unflushed {
		c.flush()
	}
	if c.sockErr != nil || !open && c.pending.Len() == 0 {
		l.closeConn(c)
		return
	}
	if !open {
		// QUIT or a protocol error with replies the socket has not taken:
		// send them, then close.
		c.closeWhenFlushed = true
	}
	if !l.enforceOutputLimit(c) {
		return
	}
	if open && c.yielded && !c.outputFull() {
		l.continueLater(c)
	}
	// Stop running commands while replies wait for the client, or while it
	// is parked.
	l.rewatch(c)
}

func (l *ioLoop) watch(c *conn, events uint32) {
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: events, Fd: int32(c.fd)}); err != nil {
		c.log.Error().Err(err).Msg("epoll mod failed")
		l.closeConn(c)
		return
	}
	c.watching = events
}

// takeIdleTimeout has the loop apply the server's idle timeout in force,
// at its start and on SetIdleTimeout's wake-up. Reads record their time only
// under a timeout (loopReader), so when one begins every connection's
// silence counts from now, not from a read long past.
func (l *ioLoop) takeIdleTimeout() {
	idle := l.srv.idleTimeout()
	if l.idle == 0 && idle > 0 {
		now := l.srv.monotonic()
		for _, c := range l.conns {
			c.lastRead = now
		}
	}
	l.idle = idle
}

// sweepEvery is epoll_wait's timeout for the idle sweep, in ms: often
// enough to close idle connections within a quarter of the timeout, and -1
// (no wake-up) without one.
func (l *ioLoop) sweepEvery() int {
	if l.idle <= 0 {
		return -1
	}
	return int(max(min(l.idle/4, time.Second), time.Millisecond) / time.Millisecond)
}

func (l *ioLoop) sweepIdle() {
	now := l.srv.monotonic()
	idle := int64(l.idle)
	if now-l.lastSweep < idle/4 {
		return
	}
	l.lastSweep = now
	for _, c := range l.conns {
		// As in Redis, the idle timeout spares waiting and listening clients.
		if c.blocked == nil && !c.inFlight && c.subscriptions() == 0 && now-c.lastRead >= idle {
			c.log.Debug().Msg("idle timeout")
			l.srv.cmdStats.IdleCloses.Add(1)
			l.closeConn(c)
		}
	}
}

// shutdownConns ends the loop's connections once it has stopped: a parked
// wait is answered with protocol.ErrShutdown (a grant that raced with it is
// given back), replies are flushed (committed first), and each connection
// is closed, releasing its EPHEMERAL leases, as soon as the socket has
// taken its replies, or at the shutdown's deadline regardless. No command
// runs any more: nothing reads.
func (l *ioLoop) shutdownConns() {
	for _, c := range l.conns {
		if b := c.blocked; b != nil {
			l.waitTimers.disarm(b)
			out := c.cancelWait()
			c.giveBack(b, out)
			c.unpark()
			c.writeErr(protocol.ErrShutdown)
			c.unflushed = true
		}
		if c.unflushed {
			c.flush()
		}
		if c.sockErr != nil || c.pending.Len() == 0 {
			l.closeConn(c)
		} else {
			l.watch(c, unix.EPOLLOUT)
		}
	}
	// Posts no longer wake the loop (post refuses them once it exited).
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, l.wakefd, nil)
	for len(l.conns) > 0 {
		ms := time.Until(l.deadline).Milliseconds()
		if ms <= 0 {
			break
		}
		n, err := unix.EpollWait(l.epfd, l.events, int(min(ms, maxEpollWaitMs)))
		if err != nil && err != unix.EINTR {
			break
		}
		for _, ev := range l.events[:max(n, 0)] {
			c := l.conns[int(ev.Fd)]
			if c == nil {
				continue
			}
			if ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 || !c.writePending() || c.pending.Len() == 0 {
				l.closeConn(c)
			}
		}
	}
	if n := len(l.conns); n > 0 {
		l.srv.log.Warn().Int("connections", n).Msg("shutdown timeout: closing connections whose client did not read its replies")
	}
	for _, c := range l.conns {
		l.closeConn(c)
	}
}

// closeUnregistered closes a connection the loop never took, from any
// goroutine.
func (l *ioLoop) closeUnregistered(c *conn) {
	unix.Close(c.fd)
	c.fd = -1
	l.srv.dropConn(c)
}

func (l *ioLoop) closeConn(c *conn) {
	if c.fd < 0 {
		return
	}
	if b := c.blocked; b != nil {
		// Nothing is granted to a closed connection: leave the queue, and
		// hand back what won the race.
		l.waitTimers.disarm(b)
		c.abandonWait()
	}
	if l.conns[c.fd] == c {
		delete(l.conns, c.fd)
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	}
	unix.Close(c.fd)
	c.fd = -1
	c.unsubscribeAll()
	c.releaseEphemeral()
	l.srv.applier.closed(c)
	l.srv.dropConn(c)
	c.log.Debug().Uint64("commands", c.commands.Load()).Msg("disconnected")
}

// loopReader is the event-loop transport's source: a non-blocking read.
type loopReader struct{ c *conn }

func (r loopReader) Read(p []byte) (int, error) {
	if r.c.tlsConn != nil {
		return r.c.tlsRead(p)
	}
	if r.c.drained {
		// The last read left room in the buffer, so it took all the socket
		// had: skip the read that would only say EAGAIN. epoll is level
		// triggered, so bytes that arrive later are reported again.
		r.c.drained = false
		return 0, protocol.ErrWouldBlock
	}
	for {
		n, err := rawRead(r.c.fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, protocol.ErrWouldBlock
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		if r.c.loop.idle > 0 {
			r.c.lastRead = r.c.srv.monotonic()
		}
		r.c.counters.NetIn.Add(uint64(n))
		r.c.drained = n < len(p)
		return n, nil
	}
}

// loopWriter takes redcon.Writer's flushes (from conn.flush, which has
// committed before): it writes what the socket accepts now and keeps the
// rest in c.pending for the loop to send when the socket is writable, so a
// slow reader never blocks the loop.
type loopWriter struct{ c *conn }

func (w loopWriter) Write(p []byte) (int, error) {
	if w.c.tlsConn != nil {
		return w.c.tlsWrite(p)
	}
	return w.writeRaw(p)
}

// writeRaw is Write's socket part: bytes as they go on the wire.
func (w loopWriter) writeRaw(p []byte) (int, error) {
	c := w.c
	if c.pending.Len() > 0 {
		c.pending.Append(p)
		return len(p), nil
	}
	n, err := writeNonblock(c.fd, p)
	c.counters.NetOut.Add(uint64(n))
	if err != nil {
		c.sockErr = err
		return 0, err
	}
	if n < len(p) {
		c.pending.Append(p[n:])
	}
	return len(p), nil
}

// writePending sends what it can of c.pending and reports false if the
// socket failed.
func (c *conn) writePending() bool {
	if err := c.pending.WriteTo(func(p []byte) (int, error) {
		n, err := writeNonblock(c.fd, p)
		c.counters.NetOut.Add(uint64(n))
		return n, err
	}); err != nil {
		c.sockErr = err
		return false
	}
	return true
}

func writeNonblock(fd int, p []byte) (int, error) {
	written := 0
	for written < len(p) {
		n, err := rawWrite(fd, p[written:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return written, nil
		case err != nil:
			return written, err
		}
		written += n
	}
	return written, nil
}

// rawRead and rawWrite skip the Go scheduler's syscall bookkeeping, which
// costs as much as the call itself: on a non-blocking socket neither can
// block.
func rawRead(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func rawWrite(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
