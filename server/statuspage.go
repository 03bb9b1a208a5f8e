package server

import (
	"net"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/ownerscope"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
)

// What the admin listener's status page (package admin) reads: locks with
// their holders and queues, as LOCKS, STATUS and HOLDERS read them, and the
// lock events, as a PSUBSCRIBE to every lock's channel receives them.

// StatusQueueMax is the most waiters StatusLocks lists per lock;
// StatusLock.QueueTotal counts them all.
const StatusQueueMax = 100

// StatusLock is one lock as the status page shows it. Owners are as an
// admin sees them (scoped ones as user:owner).
type StatusLock struct {
	Key        string
	Held       bool
	Delayed    bool          // in its lock-delay
	DelayLeft  time.Duration // until its lock-delays end
	Shared     bool          // held by readers
	Limit      int           // a semaphore's permits; 0 for a lock
	LastToken  uint64
	DefaultTTL time.Duration // 0 for none
	// Holders is the oldest locker.StatusHolders live leases, as STATUS
	// lists them; HoldersTotal counts them all.
	Holders      []locker.Holder
	HoldersTotal int
	// Queue is the first StatusQueueMax waiting requests, in the order they
	// will be served; QueueTotal counts them all.
	Queue      []StatusWaiter
	QueueTotal int
}

// StatusWaiter is one request in a lock's wait queue.
type StatusWaiter struct {
	Owner    string
	TTL      time.Duration // the lease asked for; 0 for the lock's default
	Priority int
	Shared   bool
}

// StatusLocks lists locks SCAN-style, as LOCKS does (Start with cursor 0;
// next is 0 once the walk is complete): count bounds the locks one call
// examines, so it may list fewer. Each lock is read as STATUS reads it, and
// its queue as a snapshot does; a lock gone between the scan and its read is
// left out. Each read takes its shard's lock once, briefly, as a command
// does.
func (s *Server) StatusLocks(cursor uint64, count int) (next uint64, locks []StatusLock) {
	t := s.lockTable()
	next, names := t.Scan(cursor, count, nil, nil)
	for _, name := range names {
		key := []byte(name)
		st, ok := t.Status(key)
		if !ok {
			continue
		}
		l := StatusLock{
			Key: name, Held: st.Held, Delayed: st.Delayed, DelayLeft: st.DelayLeft, Shared: st.Shared,
			Limit: st.Limit, LastToken: st.LastToken, DefaultTTL: st.DefaultTTL,
			Holders: st.Holders, HoldersTotal: st.HoldersTotal,
		}
		for n := range l.Holders {
			l.Holders[n].Owner = adminOwner(l.Holders[n].Owner)
		}
		if st.Waiters > 0 {
			q := t.Queue(key)
			l.QueueTotal = len(q)
			for _, w := range q[:min(len(q), StatusQueueMax)] {
				l.Queue = append(l.Queue, StatusWaiter{
					Owner: adminOwner(string(w.Owner)), TTL: w.TTL, Priority: w.Priority, Shared: w.Mode == locker.Shared,
				})
			}
		}
		locks = append(locks, l)
	}
	return next, locks
}

// adminOwner is owner as an admin sees it (ownerscope.Show with no scope).
func adminOwner(owner string) string {
	shown, _ := ownerscope.Show(owner, nil)
	return shown
}

// EventWatch is an internal subscriber to every lock's events: the pattern
// __lock__:* on the server's pub/sub hub, through a connection that has no
// socket. The hub delivers to it as to any subscriber, without blocking,
// into its outbox; its goroutine drains the outbox and hands each event to
// the watch's function. Like any subscriber it is cut off if its outbox
// passes the pub/sub output limit (its function is too slow); it then
// subscribes again at once and reports the gap. While a watch runs the lock
// table builds events, as it does for a RESP subscriber.
//
// The goroutine is the watch's own and ends in Stop. Events reach it as they
// are published, which may be before the change they report is committed to
// the data directory: it is for display, not for acting on.
type EventWatch struct {
	srv    *Server
	onEv   func(locker.Event)
	onLost func()
	stopC  chan struct{}
	doneC  chan struct{}
	once   sync.Once
}

// eventWatchPattern is every lock's event channel.
const eventWatchPattern = protocol.EventChannelPrefix + "*"

// WatchEvents starts an EventWatch: onEvent is called with each lock event,
// and onLost when events were lost (the watch fell behind and was cut off),
// both from the watch's goroutine, one call at a time; neither may block.
func (s *Server) WatchEvents(onEvent func(locker.Event), onLost func()) *EventWatch {
	w := &EventWatch{srv: s, onEv: onEvent, onLost: onLost, stopC: make(chan struct{}), doneC: make(chan struct{})}
	c := w.subscribe()
	go w.run(c)
	return w
}

// Stop ends the subscription and waits for the watch's goroutine. It is
// safe to call more than once.
func (w *EventWatch) Stop() {
	w.once.Do(func() { close(w.stopC) })
	<-w.doneC
}

// watchConn stands in for a subscriber's socket: the hub's only use of it
// is Close, when the output limit cuts the subscriber off.
type watchConn struct {
	net.Conn // nil: no other method is called
	cut      chan struct{}
	once     sync.Once
}

func (wc *watchConn) Close() error {
	wc.once.Do(func() { close(wc.cut) })
	return nil
}

// subscribe makes a socketless connection listening to eventWatchPattern,
// its messages signalled on outSignal, as for the goroutine transport's
// message writer.
func (w *EventWatch) subscribe() *conn {
	s := w.srv
	c := &conn{srv: s, id: s.nextConnID.Add(1), remote: "status-page", local: "status-page"}
	c.log = s.log.With().Uint64("conn", c.id).Str("remote", c.remote).Logger()
	c.nc = &watchConn{cut: make(chan struct{})}
	c.outSignal = make(chan struct{}, 1)
	c.eventView.Store(&eventView{}) // as an admin sees them
	c.sub = &subscription{channels: map[string]bool{}, patterns: map[string]bool{eventWatchPattern: true}}
	s.hub.add(c, eventWatchPattern, true)
	return c
}

func (w *EventWatch) unsubscribe(c *conn) {
	w.srv.hub.remove(c, eventWatchPattern, true)
}

func (w *EventWatch) run(c *conn) {
	defer close(w.doneC)
	for {
		select {
		case <-c.outSignal:
			w.deliver(c.takeOutbox())
		case <-c.nc.(*watchConn).cut:
			w.unsubscribe(c)
			w.deliver(c.takeOutbox())
			w.onLost()
			c = w.subscribe()
		case <-w.stopC:
			w.unsubscribe(c)
			return
		}
	}
}

// deliver parses the pmessage frames of frames and hands on their events.
func (w *EventWatch) deliver(frames []byte) {
	for len(frames) > 0 {
		ev, rest, err := protocol.ParseEventFrame(frames)
		if err != nil {
			w.srv.log.Error().Err(err).Msg("status page: unreadable event frame")
			return
		}
		w.onEv(ev)
		frames = rest
	}
}
