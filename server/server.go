package server

import (
	"context"
	"errors"
	"github.com/leasehold/leasehold/internal/cmdstats"
	"github.com/leasehold/leasehold/internal/eventring"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/acl"
	"github.com/leasehold/leasehold/contention"
	"github.com/leasehold/leasehold/internal/limits"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/persist"
	"github.com/leasehold/leasehold/protocol"
	"github.com/leasehold/leasehold/replica"
	"github.com/rs/zerolog"
)

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("server: closed")

// Server is a leasehold server: a lock table behind a RESP listener.
type Server struct {
	cfg     Config
	log     zerolog.Logger
	table   *locker.Table    // nil in cluster mode: see lockTable
	replica *replica.Replica // nil on a single node
	applier applier          // runs the lock commands, on table or through replica (applier.go)

	store    *persist.Store  // nil without a data directory
	hub      *hub            // pub/sub of lock events
	recent   *eventring.Ring // the last lock events, while an admin listener records them (eventring.go)
	ties     ephemeralTies
	handlers []handler // by index in protocol.Commands
	started  time.Time
	maxConns int                 // cfg.MaxClients fitted to the open-file limit (limits.FitMaxClients); guarded by mu (SetMaxClients)
	mem      *limits.MemoryGuard // --maxmemory (memory.go)
	idle     atomic.Int64        // the idle timeout in force, in ns: cfg.IdleTimeout until SetIdleTimeout
	// afterSubscribeFlush, for tests only, runs on a SUBSCRIBE's connection
	// once its confirmation is written: where an event once went missing.
	afterSubscribeFlush atomic.Pointer[func()]
	// SLOWLOG's (slowlog.go), and LOCKSTATS' (lockstats.go), fed by the
	// lock table's events and the server's waits; hot is nil with
	// --lockstats-top 0.
	slowlog slowCommands
	hot     *contention.Stats
	// scripts are the lock libraries' scripts this node has learnt by
	// EVAL or SCRIPT LOAD in another spelling (scripts.go).
	scripts protocol.ScriptCache

	mu     sync.Mutex       // guards ln, tlsLn, conns, closed, loops, tls.handshaking
	ln     net.Listener     // nil with Config.Addr ""
	tlsLn  net.Listener     // nil without Config.TLS.Addr
	conns  map[uint64]*conn // open connections by CLIENT ID
	closed bool
	loops  []*ioLoop
	wg     sync.WaitGroup // connection and event-loop goroutines

	nextConnID atomic.Uint64
	stats      serverStats
	cmdStats   *cmdstats.Stats // per command, and bytes in and out
	auth       *authState
	owners     *ownerNumbers             // owner ids of scoped users' anonymous leases (ownership.go)
	users      atomic.Pointer[acl.Store] // swapped whole by ReloadACL; dispatch reads it lock-free
	aclMu      sync.Mutex                // serialises ReloadACL
	aclLog     acl.Log
	tls        *tlsState     // nil without a TLS listener
	closing    chan struct{} // closed by Close: waits in progress end
	serving    atomic.Bool   // set once Serve accepts connections (Ready)
	servingC   chan struct{} // closed when serving is set (Serving)

	closeOnce sync.Once
	closeErr  error // Close's result, for every call

	failOnce sync.Once
	failure  error // the data directory's failure that stopped the server
}

type serverStats struct {
	connectionsReceived atomic.Uint64
	connectionsRejected atomic.Uint64
	protocolErrors      atomic.Uint64
	securityAttacks     atomic.Uint64 // connections closed for a POST or Host: command
	lastSecurityWarning atomic.Int64  // monotonic ns of the last warning logged about one, 0 for none
	panics              atomic.Uint64
	commandsOfClosed    atomic.Uint64 // commands counted by connections already gone
	blocked             atomic.Int64  // connections parked in ACQUIRE ... WAIT
	waitTimeouts        atomic.Uint64 // waits that ended without the lock
	forcedReleases      atomic.Uint64 // leases and lock-delays FORCE-RELEASE ended
	outputLimitCloses   atomic.Uint64 // connections closed by their client output buffer limit
	outputPeak          atomic.Int64  // the most unsent output a connection has had, in bytes
}

// New validates cfg and builds a server with an empty lock table. It opens no
// socket and starts no goroutine; call Listen and Serve, or ListenAndServe.
func New(cfg Config, log zerolog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	maxConns, err := limits.FitMaxClients(cfg.MaxClients, cfg.IOLoops, log)
	if err != nil {
		return nil, err
	}
	users, err := loadUsers(cfg)
	if err != nil {
		return nil, err
	}
	tlsState, err := newTLSState(cfg.TLS)
	if err != nil {
		return nil, err
	}
	hub := newHub()
	started := time.Now()
	lockStats, err := newLockStats(cfg)
	if err != nil {
		return nil, err
	}
	lockerCfg := cfg.Locker
	recent := new(eventring.Ring)
	lockerCfg.Events = &eventring.Sink{Ring: recent, Next: hub}
	if lockStats != nil {
		lockerCfg.Events = &statsSink{next: lockerCfg.Events, stats: lockStats}
	}
	var store *persist.Store
	if p := cfg.Persist; p.Dir != "" {
		var err error
		store, err = persist.Open(persist.Options{
			Dir:          p.Dir,
			Fsync:        p.Fsync,
			Repair:       p.Repair,
			RestartGrace: p.RestartGrace,
			Shards:       lockerCfg.Shards,
			Clock:        lockerCfg.Clock,
			LockDelay:    lockerCfg.LockDelay,
			CompactBytes: p.CompactBytes,
			Log:          log,
			TimeSource:   p.TimeSource,
			Fault:        p.Fault,
		})
		if err != nil {
			return nil, err
		}
		lockerCfg.Journal = store
		lockerCfg.FirstToken = store.FirstToken(lockerCfg.FirstToken)
		cfg.Locker.FirstToken = lockerCfg.FirstToken // as logged and reported
	}
	var table *locker.Table
	var rep *replica.Replica
	var s *Server // the replica asks for its RESP address once it serves
	if cfg.Cluster != nil {
		rep, err = replica.Open(replica.Options{
			Node:         *cfg.Cluster,
			TLS:          cfg.ClusterTLS,
			Locker:       lockerCfg,
			RestartGrace: cfg.Persist.RestartGrace,
			Announce:     func() string { return s.announceAddr() },
			Log:          log,
		})
	} else {
		table, err = locker.New(lockerCfg)
	}
	if err == nil && store != nil {
		err = store.Load(table)
	}
	if err != nil {
		if store != nil {
			store.Close()
		}
		if table != nil {
			table.Close()
		}
		return nil, err
	}
	if store != nil {
		logRecovery(log, cfg.Persist.Dir, store.Recovery())
		if locks, over := table.OverMaxLocks(); over {
			// Restoring is not making new locks, so nothing was refused;
			// new ones are, until enough are released, expire or are deleted.
			log.Warn().Int("locks", locks).Int("max_locks", lockerCfg.MaxLocks).
				Msg("the restored lock table holds more than max-locks: new locks are refused until it is back under it")
		}
	}
	s = &Server{
		auth:     newAuthState(cfg),
		owners:   newOwnerNumbers(),
		tls:      tlsState,
		store:    store,
		hub:      hub,
		recent:   recent,
		cfg:      cfg,
		log:      log,
		table:    table,
		replica:  rep,
		applier:  newApplier(cfg, rep, table),
		handlers: commandHandlers(),
		started:  started,
		slowlog:  newSlowlog(cfg.SlowlogSlowerThan, cfg.SlowlogMaxLen),
		cmdStats: cmdstats.New(),
		hot:      lockStats,
		maxConns: maxConns,
		conns:    make(map[uint64]*conn),
		closing:  make(chan struct{}),
		servingC: make(chan struct{}),
		mem:      limits.NewMemoryGuard(uint64(cfg.MaxMemory)),
	}
	s.users.Store(users)
	s.idle.Store(int64(cfg.IdleTimeout))
	s.guardMemory(s.handlers)
	return s, nil
}

// Listen binds the configured addresses, plain and TLS. Addr and TLSAddr
// report the bound addresses after.
func (s *Server) Listen() error {
	var ln, tlsLn net.Listener
	var err error
	if s.cfg.Addr != "" {
		if ln, err = net.Listen("tcp", s.cfg.Addr); err != nil {
			return err
		}
	}
	if s.cfg.TLS.Addr != "" {
		if tlsLn, err = net.Listen("tcp", s.cfg.TLS.Addr); err != nil {
			if ln != nil {
				ln.Close()
			}
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		for _, l := range []net.Listener{ln, tlsLn} {
			if l != nil {
				l.Close()
			}
		}
		return ErrServerClosed
	}
	s.ln, s.tlsLn = ln, tlsLn
	return nil
}

// Addr is the address the server listens on, or nil before Listen or
// without a plain listener.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Table is the server's lock table: in cluster mode, this replica's, as of
// the last entry applied (a snapshot's restore replaces it).
func (s *Server) Table() *locker.Table { return s.lockTable() }

// lockTable is the lock table the server reads and, on a single node,
// changes.
func (s *Server) lockTable() *locker.Table {
	if s.table != nil {
		return s.table // a single node's, read on every command: no indirect call
	}
	return s.applier.table()
}

// Serve accepts connections until Close, serving each on a goroutine the
// server owns. It starts the lock table's reaper and returns ErrServerClosed
// after Close.
func (s *Server) Serve() error {
	s.mu.Lock()
	ln, tlsLn := s.ln, s.tlsLn
	s.mu.Unlock()
	if ln == nil && tlsLn == nil {
		return errors.New("server: Serve called before Listen")
	}
	if err := s.startLoops(); err != nil {
		return err
	}
	if s.replica == nil && s.table.Start() != nil {
		return ErrServerClosed
	}
	if err := s.startMemoryWatch(); err != nil {
		return err
	}
	s.logStart(ln, tlsLn)
	s.markServing()
	if tlsLn == nil {
		return s.accept(ln, s.startConn)
	}
	if ln == nil {
		return s.accept(tlsLn, s.startTLS)
	}
	// Both: the first to end (at Close, or failing) ends the other.
	errs := make(chan error, 2)
	go func() { errs <- s.accept(tlsLn, s.startTLS) }()
	go func() { errs <- s.accept(ln, s.startConn) }()
	err := <-errs
	ln.Close()
	tlsLn.Close()
	<-errs
	return err
}

// accept accepts connections on ln until it is closed, handing each to
// start, and returns ErrServerClosed after Close, or the failure.
func (s *Server) accept(ln net.Listener, start func(net.Conn)) error {
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errTooManyFiles) {
				// Out of file descriptors and the like: wait rather than spin.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn().Err(err).Dur("retry_in", backoff).Msg("accept failed")
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.stats.connectionsReceived.Add(1)
		start(nc)
	}
}

// ListenAndServe listens and serves until ctx is cancelled, then closes the
// server and returns nil once the shutdown is complete, or its error; any
// other failure is returned.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	err := s.Serve()
	closeErr := s.Close() // waits for the shutdown, whoever started it
	s.mu.Lock()
	failure := s.failure
	s.mu.Unlock()
	if failure != nil {
		return failure
	}
	if errors.Is(err, ErrServerClosed) {
		return closeErr // the data directory's last write or fsync, say
	}
	return err
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// startLoops starts the configured event loops, each on a goroutine the
// server owns.
func (s *Server) startLoops() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	for range s.cfg.IOLoops {
		l, err := newIOLoop(s)
		if err != nil {
			return err
		}
		s.loops = append(s.loops, l)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			l.run()
		}()
	}
	return nil
}

// monotonic is nanoseconds since the server was made, on the monotonic clock.
func (s *Server) monotonic() int64 { return int64(time.Since(s.started)) }

func (s *Server) startConn(nc net.Conn) {
	if s.refuseProtected(nc) {
		closeRefused(nc)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.conns) >= s.maxConns {
		s.mu.Unlock()
		s.stats.connectionsRejected.Add(1)
		// Redis's reply; written best-effort to a socket we are about to close.
		nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		nc.Write(protocol.ErrMaxClients.Frame())
		closeRefused(nc)
		return
	}
	if len(s.loops) > 0 {
		l := s.loops[int(s.stats.connectionsReceived.Load())%len(s.loops)]
		s.mu.Unlock()
		c, err := l.adopt(nc)
		if err != nil {
			s.log.Warn().Err(err).Msg("cannot hand a connection to an event loop")
			nc.Close()
			return
		}
		s.mu.Lock()
		s.conns[c.id] = c
		s.mu.Unlock()
		if !l.post(func() { l.register(c) }) {
			c.loop.closeUnregistered(c) // the server is closing
		}
		return
	}
	c := newGoroutineConn(s, nc)
	s.conns[c.id] = c
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		c.serve()
		s.dropConn(c)
	}()
}

// dropConn forgets a closed connection, keeping its command count.
func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c.id)
	s.stats.commandsOfClosed.Add(c.commands.Load())
	s.mu.Unlock()
}

// Close shuts the server down as one ordered sequence, bounded by
// Config.ShutdownTimeout:
//
//  1. stop accepting connections;
//  2. every connection runs no new command: a WAIT parked in ACQUIRE or
//     MACQUIRE ends with protocol.ErrShutdown (a lease handed to it
//     meanwhile is given back), the commands in hand finish and their
//     replies are flushed (committed first, as always), and the
//     connection is closed, which releases its EPHEMERAL leases through
//     the lock table, so that the releases are journalled;
//  3. at the bound, connections still open (a client that does not read
//     its replies, say) are closed regardless, logged, and their
//     EPHEMERAL leases released all the same;
//  4. the lock table's reaper stops, and the data directory is written,
//     fsynced (whatever the fsync policy) and closed.
//
// It is safe to call more than once and from several goroutines: every
// call returns only once the first has finished, with its result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown() })
	return s.closeErr
}

// shutdown is Close's sequence; it runs once.
func (s *Server) shutdown() error {
	start := time.Now()
	deadline := start.Add(s.cfg.ShutdownTimeout)
	if s.store != nil {
		// A command waiting for a full disk to take a token reservation
		// holds a shard lock the shutdown needs; its reply is refused.
		s.store.EndWaits()
	}
	s.mu.Lock()
	s.closed = true
	close(s.closing) // goroutine transport: parked waits end, reads stop
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	if s.tlsLn != nil {
		s.tlsLn.Close()
	}
	open, waiting := len(s.conns), s.stats.blocked.Load()
	for _, c := range s.conns {
		if c.nc != nil {
			c.stopReading()
		}
	}
	for _, l := range s.loops {
		l.stop(deadline) // the loop ends its own connections
	}
	s.mu.Unlock()
	s.log.Info().Int("connections", open).Int64("waiting", waiting).
		Stringer("timeout", s.cfg.ShutdownTimeout).Msg("shutting down")
	if !waitUntil(&s.wg, deadline) {
		s.mu.Lock()
		cut := len(s.conns)
		for _, c := range s.conns {
			if c.nc != nil {
				c.nc.Close() // a Read or Write in progress returns at once
			}
		}
		s.mu.Unlock()
		s.log.Warn().Int("connections", cut).Stringer("timeout", s.cfg.ShutdownTimeout).
			Msg("shutdown timeout: closing the connections still open without their replies")
		if !waitUntil(&s.wg, time.Now().Add(time.Second)) {
			s.log.Warn().Msg("shutdown timeout: connection goroutines still running; syncing the data directory without them")
		}
	}
	// Leases tied to a connection that did not get to release them.
	released := 0
	for _, l := range s.ties.takeAll() {
		if s.applier.release([]byte(l.key), l.token) {
			released++
		}
	}
	if released > 0 {
		s.log.Warn().Int("leases", released).Msg("shutdown: released the EPHEMERAL leases of connections cut short")
	}
	if s.replica != nil {
		if rerr := s.replica.Close(); err == nil {
			err = rerr
		}
	} else {
		s.table.Close()
	}
	if s.store != nil {
		if serr := s.store.Close(); err == nil {
			err = serr
		}
	}
	s.log.Debug().Stringer("took", time.Since(start)).Msg("shutdown complete")
	return err
}

// waitUntil waits for wg until deadline and reports whether it finished.
func waitUntil(wg *sync.WaitGroup, deadline time.Time) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// commitBeforeReply makes the changes made so far durable, as the data
// directory's fsync policy says, before a reply leaves the server: nothing
// is acknowledged that a restart could forget. conn.flush calls it (through
// conn.commitBeforeReply) before every write of replies, the event loop
// once per round for all its connections (group commit), and the goroutine
// transport's message writer before lock events.
//
// While the data directory cannot be written (persist.ErrUnwritable: a
// full disk, say) it returns nil: reads and lock events show the table as
// it is in memory, and conn.commitBeforeReply refuses the replies of the
// connections that changed it meanwhile. Any other failure stops the server.
func (s *Server) commitBeforeReply() error {
	if err := s.commit(); !errors.Is(err, persist.ErrUnwritable) {
		return err
	}
	return nil
}

// commit is commitBeforeReply with persist.ErrUnwritable reported.
func (s *Server) commit() error {
	if s.store == nil || !s.store.Pending() {
		return nil
	}
	err := s.store.Commit()
	if err != nil && !errors.Is(err, persist.ErrUnwritable) {
		s.fail(err)
	}
	return err
}

// fail stops the server after the data directory failed for good (a failed
// fsync, persist.ErrFailed): as PostgreSQL does, it stops rather than
// acknowledge writes whose fate on disk it cannot know. A failed write is
// not that: the store retries it, and changes are refused meanwhile (see
// misconf.go).
func (s *Server) fail(err error) {
	s.failOnce.Do(func() {
		s.mu.Lock()
		s.failure = err
		s.mu.Unlock()
		s.log.Error().Err(err).Msg("stopping: the data directory failed")
		go s.Close()
	})
}

// warnCrossProtocol logs a connection closed for speaking HTTP, naming its
// peer (c.log's remote), at most once a minute as Redis does, so that a page
// that keeps trying cannot flood the log; INFO's security_attacks counts
// every one.
func (s *Server) warnCrossProtocol(c *conn, name []byte) {
	now := s.monotonic()
	last := s.stats.lastSecurityWarning.Load()
	if last != 0 && now-last < int64(time.Minute) || !s.stats.lastSecurityWarning.CompareAndSwap(last, now) {
		return
	}
	c.log.Warn().
		Str("command", string(name)).
		Uint64("security_attacks", s.stats.securityAttacks.Load()).
		Msg("possible SECURITY ATTACK detected: somebody sent POST or Host: commands, likely a cross-protocol attack by a web page or an HTTP client; connection aborted")
}

// connByID returns the open connection with that CLIENT ID, or nil.
func (s *Server) connByID(id uint64) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[id]
}

// clientCount is the number of open connections.
func (s *Server) clientCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// commandCount is the number of commands processed, by open and closed
// connections.
func (s *Server) commandCount() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.stats.commandsOfClosed.Load()
	for _, c := range s.conns {
		n += c.commands.Load()
	}
	return n
}

// logStart writes the one line that says what the server runs with: its
// address, version, transport and data directory, then the limits.
func (s *Server) logStart(ln, tlsLn net.Listener) {
	c := s.cfg
	addr, tlsAddr := "", ""
	if ln != nil {
		addr = ln.Addr().String()
	}
	if tlsLn != nil {
		tlsAddr = tlsLn.Addr().String()
	}
	transport := "epoll"
	if c.IOLoops == 0 {
		transport = "goroutine-per-connection"
	}
	ev := s.log.Info().
		Str("addr", addr).
		Str("tls_addr", tlsAddr).
		Str("version", c.Version).
		Str("transport", transport).
		Int("io_loops", c.IOLoops).
		Str("data_dir", c.Persist.Dir) // "": in memory only
	if c.Persist.Dir != "" {
		ev = ev.Stringer("fsync", c.Persist.Fsync).
			Stringer("restart_grace", c.Persist.RestartGrace).
			Bool("repair", c.Persist.Repair)
	}
	ev.Int("shards", c.Locker.Shards).
		Stringer("tick", c.Locker.Tick).
		Stringer("max_ttl", c.Locker.MaxTTL).
		Int("max_key_len", c.Locker.MaxKeyLen).
		Int("max_locks", c.Locker.MaxLocks). // 0: no bound
		Int64("maxmemory", c.MaxMemory).     // 0: no bound
		Bool("require_create", c.Locker.RequireCreate).
		Stringer("lock_delay", c.Locker.LockDelay).
		Int("max_clients", s.maxClients()).
		Stringer("idle_timeout", c.IdleTimeout).
		Stringer("shutdown_timeout", c.ShutdownTimeout).
		Int64("max_bulk_len", c.Limits.MaxBulkLen).
		Int64("max_query_buffer", c.Limits.MaxQueryBuffer).
		Stringer("client_output_buffer_limit", c.OutputLimits).
		Uint64("first_token", c.Locker.FirstToken).
		Bool("requirepass", c.RequirePass != ""). // whether one is set, never the password
		Str("acl_file", c.ACLFile).
		Bool("protected_mode", c.ProtectedMode).
		Int("gomaxprocs", runtime.GOMAXPROCS(0)).
		Msg("leasehold listening")
}

// logRecovery writes the summary of what the data directory restored. Waits
// are not in it: they belong to connections and are never restored.
func logRecovery(log zerolog.Logger, dir string, r persist.Recovery) {
	log.Info().
		Str("data_dir", dir).
		Int("locks", r.Locks).
		Int("leases", r.Leases).
		Int("delayed", r.Delayed).
		Uint64("highest_token", r.HighestToken).
		Uint64("token_ceiling", r.TokenCeiling).
		Str("snapshot", r.Snapshot).
		Int64("snapshot_bytes", r.SnapshotBytes).
		Int("logs", r.Logs).
		Int64("log_bytes", r.LogBytes).
		Int("warnings", r.Warnings).
		Stringer("took", r.Took).
		Msg("data directory recovered")
}
