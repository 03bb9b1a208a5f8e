package admin

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/stats"
)

// The status page's history (/api/history): what the lock table did each
// second over the last historySamples seconds, and the server's last lock
// events (Server.RecentEvents), kept from the admin listener's start, so
// that a page opens with its charts and events drawn rather than empty.
//
// The rates are not made from events: a sampler reads the lock table's
// counters (Server.LockCounters: atomic loads, no lock, no memory
// statistics) once a second and keeps the differences. It costs the lock
// table nothing whether a page is open or not.

const (
	// historySamples is how many one-second samples the history keeps: 5
	// minutes.
	historySamples = 300
	// historyInterval is the sampler's period.
	historyInterval = time.Second
)

// rateSample is one second of the lock table's work, in events per second
// over the interval it covers (about historyInterval; longer when the
// sampler ran late).
type rateSample struct {
	Time     int64   `json:"t_ms"` // the interval's end
	Grants   float64 `json:"grants"`
	Waits    float64 `json:"waits"`
	Expiries float64 `json:"expiries"`
	HandOffs float64 `json:"hand_offs"`
	Timeouts float64 `json:"timeouts"`
}

// lockCounts are the counters a rateSample is the difference of.
type lockCounts struct{ grants, waits, expiries, handOffs, timeouts uint64 }

func countsOf(st stats.LockStats) lockCounts {
	return lockCounts{st.Granted, st.Waits, st.Expired, st.HandOffs, st.WaitTimeouts}
}

// history samples src's counters every historyInterval on a goroutine of
// its own, which stop ends, and keeps the last historySamples samples.
type history struct {
	read  func() stats.LockStats
	stopC chan struct{}
	doneC chan struct{}
	once  sync.Once

	mu      sync.Mutex // guards the fields below
	samples []rateSample
	next    int // where the next sample goes once samples is full
}

// startHistory starts sampling read.
func startHistory(read func() stats.LockStats) *history {
	h := &history{read: read, stopC: make(chan struct{}), doneC: make(chan struct{}),
		samples: make([]rateSample, 0, historySamples)}
	go h.run()
	return h
}

func (h *history) run() {
	defer close(h.doneC)
	tick := time.NewTicker(historyInterval)
	defer tick.Stop()
	prev, prevAt := countsOf(h.read()), time.Now()
	for {
		select {
		case <-h.stopC:
			return
		case now := <-tick.C:
			cur := countsOf(h.read())
			h.add(sampleOf(prev, cur, now.Sub(prevAt), now))
			prev, prevAt = cur, now
		}
	}
}

// sampleOf is the rates from prev to cur over dt. A counter that went down
// (in cluster mode a snapshot restore makes a new table, counting from 0)
// counts its new value: what was done since the restore, in part.
func sampleOf(prev, cur lockCounts, dt time.Duration, at time.Time) rateSample {
	secs := dt.Seconds()
	rate := func(p, c uint64) float64 {
		if c < p {
			p = 0
		}
		return float64(c-p) / secs
	}
	return rateSample{
		Time:     at.UnixMilli(),
		Grants:   rate(prev.grants, cur.grants),
		Waits:    rate(prev.waits, cur.waits),
		Expiries: rate(prev.expiries, cur.expiries),
		HandOffs: rate(prev.handOffs, cur.handOffs),
		Timeouts: rate(prev.timeouts, cur.timeouts),
	}
}

func (h *history) add(s rateSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) < historySamples {
		h.samples = append(h.samples, s)
		return
	}
	h.samples[h.next] = s
	h.next = (h.next + 1) % historySamples
}

// since returns the samples after t (unix ms), oldest first.
func (h *history) since(t int64) []rateSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]rateSample, 0, len(h.samples))
	for i := range h.samples {
		s := h.samples[(h.next+i)%len(h.samples)]
		if s.Time > t {
			out = append(out, s)
		}
	}
	return out
}

// stop ends the sampler and waits for it; it is safe to call more than once.
func (h *history) stop() {
	h.once.Do(func() { close(h.stopC) })
	<-h.doneC
}

// history serves the samples after ?since= (unix ms; all of them without),
// and the server's recent events unless ?events=0: the page asks once for
// both as it opens, then once a second for the new samples, its events
// coming from /api/events.
func (p *statusPage) historyAPI(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since int64
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			http.Error(w, "since: want a time in unix milliseconds", http.StatusBadRequest)
			return
		}
		since = n
	}
	withEvents := true
	switch q.Get("events") {
	case "", "1":
	case "0":
		withEvents = false
	default:
		http.Error(w, "events: want 0 or 1", http.StatusBadRequest)
		return
	}
	events := []feedEvent{}
	if withEvents {
		for _, ev := range p.src.RecentEvents() { // every one the server keeps, server.RecentEventsMax at most
			events = append(events, feedEvent{ev.Time.UnixMilli(), string(ev.Kind), ev.Key, strconv.FormatUint(ev.Token, 10), ev.Owner})
		}
	}
	writeJSON(w, struct {
		Now      int64        `json:"now_ms"`
		Interval int64        `json:"interval_ms"`
		Span     int          `json:"span_s"`
		Since    int64        `json:"since_ms"` // when the history began: the admin listener's start
		Samples  []rateSample `json:"samples"`
		Events   []feedEvent  `json:"events"`
	}{time.Now().UnixMilli(), historyInterval.Milliseconds(), historySamples, p.start.UnixMilli(), p.hist.since(since), events})
}
