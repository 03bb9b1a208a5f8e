package server

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/internal/glob"
	"github.com/leasehold/leasehold/internal/ownerscope"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
	"github.com/tidwall/redcon"
)

// hub routes lock events to subscribed connections. It is the lock table's
// EventSink: with no subscriber, Active is false and the table builds no
// event at all.
//
// Patterns are indexed by their anchors (glob.Anchors), the literal bytes
// every matching channel begins and ends with: an event is matched only
// against the patterns whose anchors its channel has, not against every
// pattern of every subscriber.
type hub struct {
	mu       sync.RWMutex // guards channels, patterns, byAnchors, anchorLens, lenUses
	channels map[string]map[*conn]struct{}
	patterns map[string]map[*conn]struct{}
	// byAnchors holds every pattern of patterns, as bytes for glob.Match,
	// under its anchors; anchorLens lists the anchor lengths of byAnchors'
	// keys, each pair once, and lenUses how many keys have each pair.
	byAnchors  map[anchors]map[string][]byte
	anchorLens []anchorLen
	lenUses    map[anchorLen]int
	subs       atomic.Int64 // subscriptions, channels and patterns together
	dropped    atomic.Uint64
	// published counts the lock events routed while anyone subscribed;
	// eventsDropped the messages of them not queued for a subscriber whose
	// output passed its limit (it is then closed). Atomics: the publish
	// path takes no lock for them.
	published, eventsDropped atomic.Uint64
	// patternTries counts patterns matched against an event's channel.
	patternTries atomic.Uint64
}

// anchors are the literal start and end of a pattern.
type anchors struct{ prefix, suffix string }

type anchorLen struct{ prefix, suffix int }

func newHub() *hub {
	return &hub{
		channels:  map[string]map[*conn]struct{}{},
		patterns:  map[string]map[*conn]struct{}{},
		byAnchors: map[anchors]map[string][]byte{},
		lenUses:   map[anchorLen]int{},
	}
}

func patternAnchors(pattern string) (anchors, anchorLen) {
	p, s := glob.Anchors([]byte(pattern))
	return anchors{string(p), string(s)}, anchorLen{len(p), len(s)}
}

// indexPattern adds pattern to byAnchors. h.mu must be held for writing.
func (h *hub) indexPattern(pattern string) {
	a, l := patternAnchors(pattern)
	set := h.byAnchors[a]
	if set == nil {
		set = map[string][]byte{}
		h.byAnchors[a] = set
		if h.lenUses[l]++; h.lenUses[l] == 1 {
			h.anchorLens = append(h.anchorLens, l)
		}
	}
	set[pattern] = []byte(pattern)
}

// unindexPattern takes pattern out of byAnchors. h.mu must be held for
// writing.
func (h *hub) unindexPattern(pattern string) {
	a, l := patternAnchors(pattern)
	set := h.byAnchors[a]
	delete(set, pattern)
	if len(set) > 0 {
		return
	}
	delete(h.byAnchors, a)
	if h.lenUses[l]--; h.lenUses[l] == 0 {
		delete(h.lenUses, l)
		i := slices.Index(h.anchorLens, l)
		h.anchorLens = slices.Delete(h.anchorLens, i, i+1)
	}
}

func (h *hub) Active() bool { return h.subs.Load() > 0 }

// Publish sends ev to the subscribers of its lock's channel and of every
// matching pattern. It never blocks on a subscriber.
func (h *hub) Publish(ev locker.Event) {
	h.published.Add(1)
	channel := protocol.EventChannelPrefix + ev.Key
	h.mu.RLock()
	defer h.mu.RUnlock()
	if subs := h.channels[channel]; len(subs) > 0 {
		var f viewedFrames
		head := [...]string{"message", channel}
		for c := range subs {
			c.deliver(channel, false, f.frameFor(c, &ev, head[:]))
		}
	}
	if len(h.anchorLens) == 0 {
		return
	}
	key := []byte(channel)
	tries := 0
	for _, l := range h.anchorLens {
		if l.prefix+l.suffix > len(channel) {
			continue
		}
		a := anchors{channel[:l.prefix], channel[len(channel)-l.suffix:]}
		for pattern, p := range h.byAnchors[a] {
			tries++
			if glob.Match(p, key) {
				h.publishPattern(pattern, channel, &ev)
			}
		}
	}
	h.patternTries.Add(uint64(tries))
}

// publishPattern sends the message of an event on channel to the
// subscribers of pattern, which matches it. h.mu must be held.
func (h *hub) publishPattern(pattern, channel string, ev *locker.Event) {
	var f viewedFrames
	head := [...]string{"pmessage", pattern, channel}
	for c := range h.patterns[pattern] {
		c.deliver(pattern, true, f.frameFor(c, ev, head[:]))
	}
}

// viewedFrames holds the frames of one event for the subscribers of one
// channel or pattern: one frame for each way they see it (eventView), made
// when a subscriber first needs it.
type viewedFrames struct{ frames [4][]byte }

// The ways a subscriber sees an event: as it is (no scoped users), as an
// admin, as the user whose lease it is, or as another user.
const (
	eventAsIs = iota
	eventAsAdmin
	eventAsOwner
	eventHidden
)

// frameFor returns ev's frame as c sees it; head is the frame's fields
// before the message.
func (f *viewedFrames) frameFor(c *conn, ev *locker.Event, head []string) []byte {
	owner, visible, class := ev.Owner, true, eventAsIs
	if v := c.eventView.Load(); v != nil {
		owner, visible = ownerscope.Show(ev.Owner, v.scope)
		switch {
		case !visible:
			class = eventHidden
		case v.scope == nil:
			class = eventAsAdmin
		default:
			class = eventAsOwner
		}
	}
	if f.frames[class] == nil {
		frame := redcon.AppendArray(nil, len(head)+1)
		for _, field := range head {
			frame = redcon.AppendBulkString(frame, field)
		}
		f.frames[class] = redcon.AppendBulkString(frame, protocol.EventMessage(ev, owner, visible))
	}
	return f.frames[class]
}

// eventView is how a subscriber sees events once a server has scoped users:
// through ownerscope.Show with its scope (nil for an admin).
type eventView struct{ scope []byte }

// set returns the channel or pattern table.
func (h *hub) set(pattern bool) map[string]map[*conn]struct{} {
	if pattern {
		return h.patterns
	}
	return h.channels
}

func (h *hub) add(c *conn, name string, pattern bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.set(pattern)
	if m[name] == nil {
		m[name] = map[*conn]struct{}{}
		if pattern {
			h.indexPattern(name)
		}
	}
	if _, ok := m[name][c]; !ok {
		m[name][c] = struct{}{}
		h.subs.Add(1)
	}
}

func (h *hub) remove(c *conn, name string, pattern bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.set(pattern)
	if _, ok := m[name][c]; ok {
		delete(m[name], c)
		if len(m[name]) == 0 {
			delete(m, name)
			if pattern {
				h.unindexPattern(name)
			}
		}
		h.subs.Add(-1)
	}
}

// subscription is a connection's own record of what it listens to. It is
// changed only by whoever runs the connection's commands, under c.subMu,
// which the goroutine transport's message writer also takes to drop a
// message for a channel the client has left: after an UNSUBSCRIBE reply no
// message of that channel may follow, or the client's replies fall out of
// step.
type subscription struct {
	channels map[string]bool
	patterns map[string]bool
	// backtrack sums glob.Backtrack over patterns, for MaxBacktrackPerConn.
	backtrack int
}

// subscriptions counts what c listens to. Only c's own command runner calls
// it, and only that runner assigns c.sub, so the nil check needs no lock:
// the common case, a connection that never subscribed, costs nothing.
func (c *conn) subscriptions() int {
	if c.sub == nil {
		return 0
	}
	c.subMu.Lock()
	defer c.subMu.Unlock()
	return len(c.sub.channels) + len(c.sub.patterns)
}

// listening reports whether c still listens to name.
func (c *conn) listening(name string, pattern bool) bool {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.sub == nil {
		return false
	}
	if pattern {
		return c.sub.patterns[name]
	}
	return c.sub.channels[name]
}

func handleSubscribe(c *conn, args [][]byte) error  { return subscribe(c, args[1:], false) }
func handlePSubscribe(c *conn, args [][]byte) error { return subscribe(c, args[1:], true) }

func subscribe(c *conn, names [][]byte, pattern bool) error {
	// Checked before any is added: a refused call changes nothing.
	if err := c.checkChannels(names, pattern); err != nil {
		return err
	}
	if err := checkSubscribe(c, names, pattern); err != nil {
		return err
	}
	c.setEventView()
	if c.sub == nil {
		c.subMu.Lock()
		c.sub = &subscription{channels: map[string]bool{}, patterns: map[string]bool{}}
		c.subMu.Unlock()
		c.startDelivery()
	}
	kind, m := "subscribe", c.sub.channels
	if pattern {
		kind, m = "psubscribe", c.sub.patterns
	}
	var added []string
	for _, n := range names {
		name := string(n)
		c.subMu.Lock()
		if !m[name] {
			m[name] = true
			added = append(added, name)
			if pattern {
				c.sub.backtrack += glob.Backtrack(n)
			}
		}
		c.subMu.Unlock()
		c.wr.WriteArray(3)
		c.wr.WriteBulkString(kind)
		c.wr.WriteBulkString(name)
		c.wr.WriteInt(c.subscriptions())
	}
	// Listening starts before the confirmation goes out, so that no event
	// published after the client reads it is missed; the confirmation goes
	// out before the first message, which is held meanwhile.
	c.holdMessages()
	for _, name := range added {
		c.srv.hub.add(c, name, pattern)
	}
	c.flush()
	if f := c.srv.afterSubscribeFlush.Load(); f != nil {
		(*f)()
	}
	c.releaseMessages()
	return nil
}

// checkSubscribe applies the bounds of protocol (MaxSubscribeArgs,
// MaxChannelsPerConn, MaxPatternsPerConn, and for patterns MaxPatternLen,
// MaxPatternBacktrack and MaxBacktrackPerConn) to a SUBSCRIBE or PSUBSCRIBE
// of names. Only c's own command runner changes c.sub, and this runs on it,
// so reading c.sub needs no lock.
func checkSubscribe(c *conn, names [][]byte, pattern bool) error {
	if len(names) > protocol.MaxSubscribeArgs {
		return protocol.ErrTooManySubscribeArgs
	}
	var have map[string]bool
	backtrack := 0
	if c.sub != nil {
		have = c.sub.channels
		if pattern {
			have, backtrack = c.sub.patterns, c.sub.backtrack
		}
	}
	// Names already listened to, or named twice, add nothing.
	added := map[string]bool{}
	for _, n := range names {
		if pattern {
			bt, err := protocol.CheckSubscribePattern(n)
			if err != nil {
				return err
			}
			if !have[string(n)] && !added[string(n)] {
				backtrack += bt
			}
		}
		if !have[string(n)] {
			added[string(n)] = true
		}
	}
	switch {
	case !pattern && len(have)+len(added) > protocol.MaxChannelsPerConn:
		return protocol.ErrTooManyChannels
	case pattern && len(have)+len(added) > protocol.MaxPatternsPerConn:
		return protocol.ErrTooManyPatterns
	case pattern && backtrack > protocol.MaxBacktrackPerConn:
		return protocol.ErrTooMuchBacktrack
	}
	return nil
}

func handleUnsubscribe(c *conn, args [][]byte) error  { return unsubscribe(c, args[1:], false) }
func handlePUnsubscribe(c *conn, args [][]byte) error { return unsubscribe(c, args[1:], true) }

func unsubscribe(c *conn, names [][]byte, pattern bool) error {
	if len(names) > protocol.MaxSubscribeArgs {
		return protocol.ErrTooManySubscribeArgs
	}
	kind := "unsubscribe"
	if pattern {
		kind = "punsubscribe"
	}
	var m map[string]bool
	if c.sub != nil {
		m = c.sub.channels
		if pattern {
			m = c.sub.patterns
		}
	}
	var list []string
	if len(names) == 0 {
		for name := range m {
			list = append(list, name)
		}
	} else {
		for _, n := range names {
			list = append(list, string(n))
		}
	}
	if len(list) == 0 {
		// Redis's reply when there was nothing to leave.
		c.wr.WriteArray(3)
		c.wr.WriteBulkString(kind)
		c.wr.WriteNull()
		c.wr.WriteInt(c.subscriptions())
		return nil
	}
	for _, name := range list {
		c.subMu.Lock()
		was := m[name]
		delete(m, name)
		if was && pattern {
			c.sub.backtrack -= glob.Backtrack([]byte(name))
		}
		c.subMu.Unlock()
		if was {
			c.srv.hub.remove(c, name, pattern)
			// No message for it can arrive now; drop the ones still queued,
			// or a later SUBSCRIBE to the same name would let them through,
			// perhaps ahead of its own confirmation.
			c.dropQueued(name, pattern)
		}
		c.wr.WriteArray(3)
		c.wr.WriteBulkString(kind)
		c.wr.WriteBulkString(name)
		c.wr.WriteInt(c.subscriptions())
	}
	return nil
}

// unsubscribeAll drops every subscription of a closing connection.
func (c *conn) unsubscribeAll() {
	if c.sub == nil {
		return
	}
	for name := range c.sub.channels {
		c.srv.hub.remove(c, name, false)
	}
	for name := range c.sub.patterns {
		c.srv.hub.remove(c, name, true)
	}
	c.subMu.Lock()
	c.sub = nil
	c.subMu.Unlock()
	c.stopDelivery()
}

// allowedWhileSubscribed are the commands a RESP2 connection may send while
// it listens, as in Redis.
var allowedWhileSubscribed = map[string]bool{
	"subscribe": true, "psubscribe": true, "unsubscribe": true, "punsubscribe": true, "ping": true, "quit": true,
}

// outFrame is a message on its way to a subscriber, with the channel or
// pattern it was sent for.
type outFrame struct {
	name    string
	pattern bool
	frame   []byte
}

// deliver queues a message frame for c without blocking the publisher: it
// goes to c's outbox, and one drain is scheduled on whoever writes for c (its
// event loop, or its message writer goroutine), however many messages pile
// up meanwhile. A subscriber whose outbox passes its output limit
// (OutputLimits.PubSub) is disconnected instead: at once above the hard
// limit, and above the soft one once it has stayed there for the soft time
// (the event loop also counts the bytes its socket refused, see
// enforceOutputLimit; the goroutine transport's writer, the bytes it is
// writing, see writeSocket).
func (c *conn) deliver(name string, pattern bool, frame []byte) {
	c.outMu.Lock()
	lim := c.srv.cfg.OutputLimits.PubSub
	size := int64(c.outBytes + len(frame))
	var now int64
	if lim.Soft > 0 && size > lim.Soft {
		now = c.srv.monotonic()
	}
	bound, above := overOutputLimit(lim, size, c.outSoftSince, now)
	switch {
	case !above:
		c.outSoftSince = 0
	case c.outSoftSince == 0:
		c.outSoftSince = now
	}
	if bound != "" {
		overflow := !c.outDropped
		c.outDropped = true
		c.outMu.Unlock()
		c.srv.hub.eventsDropped.Add(1)
		if overflow {
			c.outputLimitReached(bound, size, lim, true)
			if l := c.loop; l != nil {
				l.post(func() { l.closeConn(c) })
			} else {
				c.nc.Close()
			}
		}
		return
	}
	c.outbox = append(c.outbox, outFrame{name, pattern, frame})
	c.outBytes += len(frame)
	schedule := !c.outScheduled
	c.outScheduled = true
	c.outMu.Unlock()
	if schedule {
		c.scheduleDrain()
	}
}

// scheduleDrain has whoever writes for c (its event loop, or its message
// writer goroutine) drain its outbox once; the caller has set outScheduled.
func (c *conn) scheduleDrain() {
	if l := c.loop; l != nil {
		l.post(func() { l.drainOutbox(c) })
		return
	}
	c.wakeMessageWriter()
}

// dropQueued forgets the queued messages sent for name.
func (c *conn) dropQueued(name string, pattern bool) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	kept := c.outbox[:0]
	for _, f := range c.outbox {
		if f.name == name && f.pattern == pattern {
			c.outBytes -= len(f.frame)
			continue
		}
		kept = append(kept, f)
	}
	clear(c.outbox[len(kept):])
	c.outbox = kept
}

// holdMessages keeps queued messages from being written (takeOutbox gives
// none) until releaseMessages: a SUBSCRIBE's confirmation must precede the
// first message of what it subscribed to.
func (c *conn) holdMessages() {
	c.outMu.Lock()
	c.outHeld = true
	c.outMu.Unlock()
}

// releaseMessages ends holdMessages and schedules the drain of what was
// queued meanwhile, as deliver would have.
func (c *conn) releaseMessages() {
	c.outMu.Lock()
	c.outHeld = false
	schedule := len(c.outbox) > 0 && !c.outScheduled
	if schedule {
		c.outScheduled = true
	}
	c.outMu.Unlock()
	if schedule {
		c.scheduleDrain()
	}
}

// takeOutbox returns the queued messages c still listens for, oldest first;
// one for a channel or pattern c has left since is dropped, since after an
// UNSUBSCRIBE reply no message of it may follow. While messages are held it
// returns none and leaves them queued for releaseMessages to schedule.
func (c *conn) takeOutbox() []byte {
	c.outMu.Lock()
	if c.outHeld {
		c.outScheduled = false
		c.outMu.Unlock()
		return nil
	}
	frames := c.outbox
	c.outbox, c.outBytes, c.outScheduled, c.outSoftSince = nil, 0, false, 0
	c.outMu.Unlock()
	var out []byte
	for _, f := range frames {
		if c.listening(f.name, f.pattern) {
			out = append(out, f.frame...)
		}
	}
	return out
}
