package admin

import (
	"embed"
	"encoding/json"
	"fmt"
	"github.com/leasehold/leasehold/internal/ownerscope"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/contention"
	"github.com/leasehold/leasehold/internal/stats"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
	"github.com/leasehold/leasehold/server"
)

// The status page (docs/operations.md): static files from
// static/, and the JSON and server-sent events they read.

//go:embed static
var staticFiles embed.FS

// StatusSource is what the status page reads besides Source; *server.Server
// is one. A Source that is not one gets no status page.
type StatusSource interface {
	Source
	// Table is the lock table, which the page reads as LOCKS, STATUS and
	// HOLDERS do (statusLocks).
	Table() *locker.Table
	// WatchEvents subscribes to every lock's events until Stop.
	WatchEvents(onEvent func(locker.Event), onLost func()) *server.EventWatch
	// LockStatsOn and LockStats are LOCKSTATS's: whether the server keeps
	// lock statistics, and the hottest locks sorted by a field.
	LockStatsOn() bool
	LockStats(top int, by string) ([]contention.LockStat, error)
	// RecordEvents keeps the server's last lock events until stop, and
	// RecentEvents returns them: the status page's history of events.
	RecordEvents() (stop func())
	RecentEvents() []server.RecentEvent
	// LockCounters reads the lock table's counters, cheaply enough for
	// every second: the history's rates.
	LockCounters() stats.LockStats
}

const (
	// statusLocksDefault and statusLocksMax bound /api/locks's limit.
	statusLocksDefault = 200
	statusLocksMax     = 1000
	// statusScanRounds bounds the Scan calls of one /api/locks request:
	// a sparse table can give few locks per call.
	statusScanRounds = 32
	// eventBuffer is the events queued for one browser; past it, events
	// are dropped for it and it is told how many.
	eventBuffer = 256
	// eventStreamsMax bounds the browsers streaming events at once.
	eventStreamsMax = 64
	// eventWriteTimeout bounds one write to a browser's stream.
	eventWriteTimeout = 10 * time.Second
	// eventKeepAlive is how often an idle stream gets a comment, so that
	// a browser gone away is noticed.
	eventKeepAlive = 15 * time.Second
)

// contentSecurityPolicy lets the page run only its own files: no inline
// script or style, nothing from elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// statusPage serves the page and its API for src. It owns the history's
// sampler and the server's event recording from the listener's start to
// its Close (close).
type statusPage struct {
	src        StatusSource
	feed       *eventFeed
	hist       *history
	stopRecord func()
	start      time.Time
}

// mountStatus adds the status page's routes to mux, if src can feed them,
// and returns what Close must stop (nil if none): from here on the server
// records its events and a goroutine samples its counters, for the
// history.
func mountStatus(mux *http.ServeMux, src Source, auth Authenticator) *statusPage {
	ss, ok := src.(StatusSource)
	if !ok {
		return nil
	}
	p := &statusPage{src: ss, feed: newEventFeed(ss), start: time.Now(),
		stopRecord: ss.RecordEvents(), hist: startHistory(ss.LockCounters)}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(static)
	mux.Handle("GET /{$}", guard(auth, anyUser, secured(files)))
	mux.Handle("GET /static/", guard(auth, anyUser, secured(http.StripPrefix("/static/", files))))
	mux.Handle("GET /api/stats", guard(auth, needStats, secured(http.HandlerFunc(p.stats))))
	mux.Handle("GET /api/locks", guard(auth, needLocks, secured(http.HandlerFunc(p.locks))))
	mux.Handle("GET /api/events", guard(auth, needEvents, secured(http.HandlerFunc(p.events))))
	mux.Handle("GET /api/lockstats", guard(auth, needLockStat, secured(http.HandlerFunc(p.lockStats))))
	mux.Handle("GET /api/history", guard(auth, needAll(needStats, needEvents), secured(http.HandlerFunc(p.historyAPI))))
	return p
}

// secured adds the headers every status page response carries.
func secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// shutdown ends the event streams, so that the listener's Close does not
// wait its timeout for browsers that never hang up.
func (p *statusPage) shutdown() { p.feed.shutdown() }

// close stops the history's sampler and the server's event recording, once
// no request is served; it is safe to call more than once.
func (p *statusPage) close() {
	p.hist.stop()
	p.stopRecord()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return // the browser went away
	}
}

// stats serves stats.Stats, with the time it was read at.
func (p *statusPage) stats(w http.ResponseWriter, _ *http.Request) {
	st := p.src.StatsSnapshot()
	ready, why := p.src.Ready()
	writeJSON(w, struct {
		Time   int64   `json:"time_ms"`
		Ready  bool    `json:"ready"`
		Why    string  `json:"why"`
		Uptime float64 `json:"uptime_s"`
		stats.Stats
	}{time.Now().UnixMilli(), ready, why, st.Uptime.Seconds(), st})
}

type jsonHolder struct {
	Token  string  `json:"token"` // a string: tokens pass 2^53
	Owner  string  `json:"owner"`
	TTL    float64 `json:"ttl_ms"`
	Shared bool    `json:"shared"`
}

type jsonWaiter struct {
	Owner    string  `json:"owner"`
	TTL      float64 `json:"ttl_ms"`
	Priority int     `json:"priority"`
	Shared   bool    `json:"shared"`
}

type jsonLock struct {
	Key          string       `json:"key"`
	Held         bool         `json:"held"`
	Delayed      bool         `json:"delayed"`
	DelayLeft    float64      `json:"delay_left_ms"`
	Shared       bool         `json:"shared"`
	Limit        int          `json:"limit"`
	LastToken    string       `json:"last_token"`
	Holders      []jsonHolder `json:"holders"`
	HoldersTotal int          `json:"holders_total"`
	Queue        []jsonWaiter `json:"queue"`
	QueueTotal   int          `json:"queue_total"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// statusQueueMax is the most waiters a lock's row lists; queue_total
// counts them all.
const statusQueueMax = 100

// statusLocks reads locks SCAN-style, as LOCKS does (cursor 0 to start;
// next is 0 once the walk is complete): count bounds the locks one call
// examines, so it may give fewer. Each lock is read as STATUS reads it, and
// its queue as a snapshot does; a lock gone between the scan and its read
// is left out. Each read takes its shard's lock once, briefly, as a command
// does. Owners are as an admin sees them (scoped ones as user:owner).
func statusLocks(t *locker.Table, cursor uint64, count int) (next uint64, locks []jsonLock) {
	next, names := t.Scan(cursor, count, nil, nil)
	for _, name := range names {
		key := []byte(name)
		st, ok := t.Status(key)
		if !ok {
			continue
		}
		l := jsonLock{
			Key: name, Held: st.Held, Delayed: st.Delayed, DelayLeft: ms(st.DelayLeft), Shared: st.Shared,
			Limit: st.Limit, LastToken: strconv.FormatUint(st.LastToken, 10),
			Holders: []jsonHolder{}, HoldersTotal: st.HoldersTotal, Queue: []jsonWaiter{},
		}
		for _, h := range st.Holders {
			l.Holders = append(l.Holders, jsonHolder{strconv.FormatUint(h.Token, 10), adminOwner(h.Owner), ms(h.TTL), h.Shared})
		}
		if st.Waiters > 0 {
			q := t.Queue(key)
			l.QueueTotal = len(q)
			for _, w := range q[:min(len(q), statusQueueMax)] {
				l.Queue = append(l.Queue, jsonWaiter{adminOwner(string(w.Owner)), ms(w.TTL), w.Priority, w.Mode == locker.Shared})
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

// locks serves up to limit locks from cursor (0 to start), SCAN-style as
// LOCKS pages: the reply's cursor is where the next page starts, "0" once
// the walk is complete.
func (p *statusPage) locks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := statusLocksDefault
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > statusLocksMax {
			http.Error(w, fmt.Sprintf("limit: want 1 to %d", statusLocksMax), http.StatusBadRequest)
			return
		}
		limit = n
	}
	var cursor uint64
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			http.Error(w, "cursor: want a number", http.StatusBadRequest)
			return
		}
		cursor = n
	}
	out := []jsonLock{}
	for round := 0; round < statusScanRounds && len(out) < limit; round++ {
		next, locks := statusLocks(p.src.Table(), cursor, limit-len(out))
		out = append(out, locks...)
		cursor = next
		if cursor == 0 {
			break
		}
	}
	writeJSON(w, struct {
		Cursor string     `json:"cursor"`
		Locks  []jsonLock `json:"locks"`
	}{strconv.FormatUint(cursor, 10), out})
}

// events streams lock events as server-sent events: "lock" events, and a
// "dropped" event saying how many were lost before the next one, when the
// browser did not keep up or the server's subscription fell behind.
func (p *statusPage) events(w http.ResponseWriter, r *http.Request) {
	sub, ok := p.feed.join()
	if !ok {
		http.Error(w, "too many event streams", http.StatusServiceUnavailable)
		return
	}
	defer p.feed.leave(sub)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, data any) bool {
		b, err := json.Marshal(data)
		if err != nil {
			return false
		}
		rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("hello", struct {
		Buffer int `json:"buffer"`
	}{eventBuffer}) {
		return
	}
	keepAlive := time.NewTicker(eventKeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-p.feed.closing:
			return
		case <-keepAlive.C:
			rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-sub.wake:
			// The dropped events came after the queued ones.
			evs, dropped := p.feed.take(sub)
			for _, ev := range evs {
				if !send("lock", ev) {
					return
				}
			}
			if dropped > 0 && !send("dropped", struct {
				Count uint64 `json:"count"`
			}{dropped}) {
				return
			}
		}
	}
}

// feedEvent is a lock event as the page receives it.
type feedEvent struct {
	Time  int64  `json:"time_ms"`
	Kind  string `json:"kind"`
	Key   string `json:"key"`
	Token string `json:"token"`
	Owner string `json:"owner"`
}

// eventFeed fans the server's lock events out to the browsers streaming
// them. It subscribes (Server.WatchEvents) while at least one browser
// streams, so that the lock table builds no events for nobody. Each browser
// has a bounded queue: one that does not keep up loses events, counted and
// reported to it, and never slows the server or the other browsers.
type eventFeed struct {
	src     StatusSource
	closing chan struct{} // closed by shutdown
	once    sync.Once

	mu    sync.Mutex // guards the fields below, and every feedSub's queue
	subs  map[*feedSub]struct{}
	watch *server.EventWatch
	gen   uint64 // counts watches; a stopping watch's events are not delivered
}

// feedSub is one browser's stream.
type feedSub struct {
	wake    chan struct{} // signalled when queue or dropped changed
	queue   []feedEvent   // at most eventBuffer
	dropped uint64
}

func newEventFeed(src StatusSource) *eventFeed {
	return &eventFeed{src: src, closing: make(chan struct{}), subs: map[*feedSub]struct{}{}}
}

// join adds a stream, subscribing if it is the first; false when there are
// eventStreamsMax already.
func (f *eventFeed) join() (*feedSub, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) >= eventStreamsMax {
		return nil, false
	}
	sub := &feedSub{wake: make(chan struct{}, 1)}
	f.subs[sub] = struct{}{}
	if f.watch == nil {
		f.gen++
		gen := f.gen
		f.watch = f.src.WatchEvents(
			func(ev locker.Event) { f.publish(gen, ev) },
			func() { f.lost(gen) })
	}
	return sub, true
}

// leave removes a stream, and the subscription with the last one. The
// watch is stopped outside mu: its goroutine may be waiting for mu.
func (f *eventFeed) leave(sub *feedSub) {
	f.mu.Lock()
	delete(f.subs, sub)
	var stop *server.EventWatch
	if len(f.subs) == 0 {
		stop, f.watch = f.watch, nil
		f.gen++
	}
	f.mu.Unlock()
	if stop != nil {
		stop.Stop()
	}
}

// publish queues ev for every stream; it never blocks on one.
func (f *eventFeed) publish(gen uint64, ev locker.Event) {
	fe := feedEvent{time.Now().UnixMilli(), string(ev.Kind), ev.Key, strconv.FormatUint(ev.Token, 10), ev.Owner}
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen != f.gen {
		return
	}
	for sub := range f.subs {
		if len(sub.queue) < eventBuffer {
			sub.queue = append(sub.queue, fe)
		} else {
			sub.dropped++
		}
		wake(sub)
	}
}

// lost reports events the subscription itself missed to every stream.
func (f *eventFeed) lost(gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen != f.gen {
		return
	}
	for sub := range f.subs {
		sub.dropped++
		wake(sub)
	}
}

func wake(sub *feedSub) {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// take empties sub's queue: its events, and how many were dropped since
// the last take.
func (f *eventFeed) take(sub *feedSub) ([]feedEvent, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	evs, dropped := sub.queue, sub.dropped
	sub.queue, sub.dropped = nil, 0
	return evs, dropped
}

func (f *eventFeed) shutdown() { f.once.Do(func() { close(f.closing) }) }

// lockStatsTopDefault and lockStatsTopMax bound /api/lockstats's top.
const (
	lockStatsTopDefault = 20
	lockStatsTopMax     = 100
)

// jsonLockStat is a row of /api/lockstats: LOCKSTATS's fields, durations in
// milliseconds to three significant digits, as LOCKSTATS gives them.
type jsonLockStat struct {
	Key          string  `json:"key"`
	Acquisitions uint64  `json:"acquisitions"`
	Waits        uint64  `json:"waits"`
	Timeouts     uint64  `json:"timeouts"`
	Expiries     uint64  `json:"expiries"`
	WaitP50      float64 `json:"wait_p50_ms"`
	WaitP99      float64 `json:"wait_p99_ms"`
	HoldP50      float64 `json:"hold_p50_ms"`
	HoldP99      float64 `json:"hold_p99_ms"`
}

// lockStats serves the hottest locks as LOCKSTATS [TOP top] [BY by] does
// (?top=&by=), or 404 when the server keeps no lock statistics: the page's
// panel then says so and stops asking.
func (p *statusPage) lockStats(w http.ResponseWriter, r *http.Request) {
	if !p.src.LockStatsOn() {
		http.Error(w, "lock statistics are off (--lockstats-top 0)", http.StatusNotFound)
		return
	}
	top := lockStatsTopDefault
	if v := r.URL.Query().Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > lockStatsTopMax {
			http.Error(w, fmt.Sprintf("top must be an integer from 1 to %d", lockStatsTopMax), http.StatusBadRequest)
			return
		}
		top = n
	}
	by := strings.ToLower(r.URL.Query().Get("by"))
	if by != "" && !slices.Contains(protocol.LockStatsOrders, by) {
		http.Error(w, protocol.ErrBadLockStatsOrder.Error(), http.StatusBadRequest)
		return
	}
	stats, err := p.src.LockStats(top, by)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ms := contention.RoundedMillis
	rows := make([]jsonLockStat, 0, len(stats))
	for _, st := range stats {
		rows = append(rows, jsonLockStat{
			Key: st.Key, Acquisitions: st.Acquisitions, Waits: st.Waits, Timeouts: st.Timeouts, Expiries: st.Expiries,
			WaitP50: ms(st.WaitP50), WaitP99: ms(st.WaitP99), HoldP50: ms(st.HoldP50), HoldP99: ms(st.HoldP99),
		})
	}
	writeJSON(w, rows)
}
