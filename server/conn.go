package server

import (
	"errors"
	"github.com/leasehold/leasehold/internal/cmdstats"
	"io"
	"math"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/acl"
	"github.com/leasehold/leasehold/internal/outbuf"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
	"github.com/rs/zerolog"
	"github.com/tidwall/redcon"
)

// conn is one client connection. Its commands run one at a time, either on a
// goroutine of its own (blocking reads) or on the event loop that owns it
// (non-blocking reads, see ioLoop): read a command, run it, buffer the reply.
// Replies are flushed (flush: commit, then write) once no further command is
// buffered, so a pipeline is answered with one write, or earlier once they
// reach outputPause, so a pipeline of large replies is not built whole.
type conn struct {
	srv           *Server
	id            uint64
	counters      *cmdstats.Block // the block its commands and bytes count in (internal/cmdstats)
	tally         cmdstats.Tally  // its commands not yet added to counters; owned by whoever runs them
	remote, local string
	rd            *protocol.Reader
	wr            *redcon.Writer
	log           zerolog.Logger
	commands      atomic.Uint64            // read by INFO from other goroutines
	userShared    atomic.Pointer[acl.User] // user, for other goroutines (reload, client listings)

	// One of the two transports.
	nc   net.Conn // goroutine transport
	fd   int      // event-loop transport: a non-blocking socket owned by loop
	loop *ioLoop

	// TLS (tls.go): tlsConn is the connection's TLS, nil for a plain one;
	// the event loop reads and writes through it in memory, the goroutine
	// transport seals its replies with it (writeSocketTLS). tlsCN is the
	// verified client certificate's common name, "" for none.
	tlsConn *tlsConn
	tlsCN   string

	// Owned by whoever runs the connection's commands.
	name, libName, libVer string
	user                  *acl.User                  // the user c authenticated as, nil before (auth.go, acl.go)
	usersSeen             *acl.Store                 // the store user came from; a reload replaces it (acl.go)
	quit                  bool                       // reply, flush, then close
	unflushed             bool                       // replies are waiting in wr
	scratch               commandScratch             // room for a lock command's commands and results (applier.go)
	proposals             proposalBatch              // cluster mode: the round's changes, not yet proposed (cluster_batch.go)
	linearized            bool                       // cluster mode: this round's reads have had their leader check
	staleReads            bool                       // cluster mode: READONLY, reads skip the leader check
	clientID              []byte                     // cluster mode: the Client of its proposals' tags, once it has proposed
	proposalSeq           uint64                     // cluster mode: the Seq of its last proposal's tag
	inFlight              bool                       // cluster mode, event loop: a proposal of c's is in flight; no command runs until its answer
	deferred              [][]byte                   // cluster mode, event loop: a command read that runs once the proposal in flight is answered
	linearizeErr          error                      // cluster mode, event loop: why the leader check made for deferred failed
	linearizedTo          int64                      // cluster mode, event loop: the input received when the last leader check began
	waitSeq               uint64                     // cluster mode: numbers its waits (replicated_wait.go)
	pending               outbuf.Buf                 // event loop: reply bytes the socket has not taken yet
	sockErr               error                      // a write failed, or the commit before it, or the client spoke HTTP: write nothing more
	lastRead              int64                      // event loop: monotonic ns of the last read, for the idle timeout
	drained               bool                       // event loop: the last read emptied the socket
	closeWhenFlushed      bool                       // event loop: close once pending is written (QUIT, protocol error)
	flushQueued           bool                       // event loop: in the loop's flushLater
	openAfterRound        bool                       // event loop: runCommands' verdict, for the deferred flush
	yielded               bool                       // runCommands stopped at a round's bound or outputPause, with commands perhaps left
	ranSlow               bool                       // the command dispatch just ran is not flagged fast
	readyQueued           bool                       // event loop: in the loop's ready list
	servedRound           uint64                     // event loop: the last round that ran its commands
	inputEnded            bool                       // reading ahead met the end of the input (or a read error)
	readingAhead          bool                       // goroutine transport: the output is at outputPause, commands wait (see readAheadWhileFull)
	readWoken             bool                       // goroutine transport: the writer goroutine ended a Read by a past deadline
	softSince             int64                      // event loop: monotonic ns since its unsent output is above its soft limit; 0 if not
	softListed            bool                       // event loop: in the loop's overSoft
	blocked               *blockState                // parked in ACQUIRE ... WAIT
	parkedAt              int64                      // monotonic ns the command being dispatched parked at; 0 if it did not (slowlog.go)
	clockAt               int64                      // monotonic ns the last command of this round ended at, 0 for none (dispatch)
	dispatching           dispatchNote               // the command being dispatched, for a proposal it queues (cluster_batch.go)
	parked                atomic.Pointer[blockState] // blocked, for CLIENT UNBLOCK on other goroutines
	prefetchedTo          int64                      // stream offset up to which pipelined commands' keys were prefetched
	ephemeral             map[lease]struct{}         // the EPHEMERAL leases tied to this connection (see ephemeralTies)
	owesCommit            bool                       // a change was made since the last flush (misconf.go)
	sub                   *subscription              // pub/sub channels and patterns, when listening
	scope, ownerBuf       []byte                     // ownerScope's cache, scopedOwner's buffer (ownership.go)
	eventView             atomic.Pointer[eventView]  // how c sees events: nil as they are (ownership.go)

	// Goroutine transport: a writer goroutine writes what the socket did
	// not take at once, and a subscriber's messages; wmu orders its writes
	// with the connection's own (see writeSocket) and guards the fields
	// below it but raw (set once) and unsent (read without it).
	wmu            sync.Mutex
	raw            syscall.RawConn // nc's, for writeSocket's non-blocking write; nil if nc has none
	outQueue       []byte          // output for the writer goroutine
	outPubSub      bool            // outQueue's output limit class
	outErr         error           // the socket failed, or the output limit closed it: write nothing more
	wakeReader     bool            // the connection's goroutine reads ahead in Read: end it once the output drains
	writeSoftSince time.Time       // since when unsent is above the soft output limit; zero if not
	deadlineArmed  bool            // the socket has a write deadline
	softArmed      bool            // it is the soft output limit's
	unsent         atomic.Int64    // outQueue and the bytes the writer is writing; changed under wmu
	outDrained     sync.Cond       // on wmu: unsent went down, or outErr was set

	subMu sync.Mutex // guards sub (see subscription)
	// Pub/sub messages on their way (see deliver); guarded by outMu.
	outMu            sync.Mutex
	outbox           []outFrame
	outBytes         int
	outScheduled     bool
	outHeld          bool // see holdMessages
	outDropped       bool
	outSoftSince     int64         // monotonic ns since the outbox is above the pubsub soft limit; 0 if not
	outSignal        chan struct{} // goroutine transport: wakes the writer goroutine (see startDelivery)
	outStop, outDone chan struct{}
	watching         uint32 // event loop: the epoll events registered
}

func newConn(s *Server, remote, local string) *conn {
	c := &conn{srv: s, id: s.nextConnID.Add(1), remote: remote, local: local}
	c.counters = s.cmdStats.Stripe(c.id) // an event loop's adopt gives it the loop's
	c.log = s.log.With().Uint64("conn", c.id).Str("remote", remote).Logger()
	st := s.users.Load()
	if u := openDefault(st); u != nil {
		c.setUser(u, st) // as in Redis: a nopass default user needs no AUTH
	}
	return c
}

// flush is the last step of serving commands, on either transport: it
// commits what they changed (persist, as the data directory's fsync policy
// says), so that no reply acknowledges what a restart could forget, and then
// writes their replies, which wait in wr, through the transport. If the
// commit fails, the replies are dropped, the server stops (Server.fail), and
// nothing is written on c again; a data directory that cannot be written is
// not such a failure (see misconf.go).
func (c *conn) flush() error {
	// Checked here, not only inside: a single node's every flush pays a
	// length check rather than a call (proposeQueued does not inline).
	if len(c.proposals.replies) > 0 {
		c.proposeQueued() // cluster mode: the round's changes, then their replies (later, on an event loop)
	}
	// The round's commands (those proposed included, counted once
	// answered) are counted before a client can read their replies.
	c.tally.Flush(c.counters)
	c.linearized = false
	c.unflushed = false
	if c.sockErr != nil {
		return c.sockErr
	}
	if err := c.commitBeforeReply(); err != nil {
		c.sockErr = err
		c.wr.SetBuffer(nil)
		return err
	}
	return c.wr.Flush()
}

// recoverPanic logs a handler's panic; the caller then closes the connection.
func (c *conn) recoverPanic(r any) {
	if r == nil {
		return
	}
	c.srv.stats.panics.Add(1)
	c.log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("handler panicked; closing its connection")
}

// runCommands runs commands until the reader would block, and reports
// whether the connection stays open. It also stops, setting c.yielded, once
// the unsent output (replies not yet flushed, and on the event loop the
// bytes the socket has refused) reaches outputPause, so that a client that
// does not read cannot make the server build its replies without bound; and
// on the event loop after roundCommands commands or roundInputBytes of
// input, so that one connection's pipeline does not hold up the loop's
// other connections. Its caller flushes, and runs it again once the output
// has drained (see ioLoop.continueLater).
func (c *conn) runCommands() (open bool) {
	c.yielded = false
	budget, inputEnd := roundCommands, c.rd.Consumed()+roundInputBytes
	if c.loop == nil {
		// Goroutines take turns through the Go scheduler.
		budget, inputEnd = -1, math.MaxInt64
	}
	var started int64 // monotonic ns of the round's first look at the clock
	c.clockAt = 0     // the time since the last round is no command's
	if args := c.deferred; args != nil && !c.inFlight && c.blocked == nil {
		c.deferred = nil
		if c.mustWait(args) { // a read, deferred behind changes, needs its leader check
			return true
		}
		c.dispatch(args)
		c.unflushed = true
	}
	for !c.quit {
		if c.blocked != nil || c.inFlight {
			return true
		}
		if budget == 0 || c.rd.Consumed() >= inputEnd || c.outputFull() {
			c.yielded = true
			return true
		}
		budget--
		args, err := c.rd.ReadCommand()
		if err == protocol.ErrWouldBlock {
			return true
		}
		if err != nil {
			c.readFailed(err)
			return false
		}
		c.commands.Add(1)
		if c.loop != nil && c.srv.replica != nil && c.mustWait(args) {
			return true // it runs once what it waits for is done
		}
		if c.srv.lockTable().PrefetchWorthwhile() {
			if ahead, at := c.rd.Lookahead(); len(ahead) > 0 && at >= c.prefetchedTo {
				c.prefetchedTo = at + int64(c.prefetchKeys(ahead))
			}
		}
		c.ranSlow = false
		c.dispatch(args)
		c.unflushed = true
		if budget >= 0 && (c.ranSlow || budget%64 == 0) {
			// The clock, read after a command not flagged fast and every
			// 64 others, ends the round at roundTime; starting it lazily
			// spares the common round of a few commands any clock read.
			now := c.clockAt // the slowlog's reading, when it took one
			if now == 0 {
				now = c.srv.monotonic()
			}
			switch {
			case started == 0:
				started = now
			case now-started >= int64(roundTime):
				budget = 0
			}
		}
	}
	return false
}

// outputFull reports whether c's unsent output has reached outputPause.
func (c *conn) outputFull() bool {
	return int64(protocol.BufferedReplies(c.wr)+c.pending.Len())+c.unsent.Load() >= outputPause
}

func (c *conn) readFailed(err error) {
	var pe *protocol.ProtocolError
	switch {
	case errors.As(err, &pe):
		c.srv.stats.protocolErrors.Add(1)
		c.log.Info().Str("error", pe.Error()).Msg("protocol error; closing connection")
		text, _ := protocol.Reply(pe)
		c.wr.WriteError(text)
		c.flush()
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Debug().Msg("idle timeout")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
	default:
		c.log.Debug().Err(err).Msg("read failed")
	}
}

// prefetchKeys hands the keys of the next lock commands pipelined in ahead
// to the table's Prefetch, so that their cache misses overlap rather than
// come one command at a time (see locker.Table.Prefetch), and returns how
// many bytes those commands span. Only pipelined input gets here: with one
// command per read there is nothing ahead to overlap.
func (c *conn) prefetchKeys(ahead []byte) int {
	var keys [locker.PrefetchMax][]byte
	n := 0
	spanned := protocol.PeekArgs(ahead, len(keys), func(name, arg []byte) {
		i := protocol.LookupIndex(name)
		if i >= 0 && protocol.Commands[i].FirstKey == 1 && c.srv.lockTable().CheckKey(arg) == nil {
			keys[n] = arg
			n++
		}
	})
	if n > 0 {
		c.srv.lockTable().Prefetch(keys[:n])
	}
	return spanned
}
