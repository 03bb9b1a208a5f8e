package server

import (
	"net"
	"sync"

	"github.com/leasehold/leasehold/internal/ownerscope"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
)

// What the admin listener's status page (package admin) reads besides the
// lock table (Server.Table): the lock events, as a PSUBSCRIBE to every
// lock's channel receives them.

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
