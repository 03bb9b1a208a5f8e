package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// screenshots, when set, is the directory TestStatusPageScreenshots writes
// its PNGs to: go test ./admin -run TestStatusPageScreenshots -args
// -screenshots ../docs (scripts/status-page-screenshots.sh).
var screenshots = flag.String("screenshots", "", "write the status page's screenshots to this directory")

// TestStatusPageHeaders: the page and its files carry the
// Content-Security-Policy, and the API answers JSON.
func TestStatusPageHeaders(t *testing.T) {
	ls := lockserver.Start(t, func(c *server.Config) { c.LockStatsTop = 0 }) // the 404 below
	base := startAdmin(t, ls.Server)
	for _, path := range []string{"/", "/static/app.js", "/static/style.css", "/api/stats", "/api/locks?limit=3", "/api/history"} {
		resp, err := httpClient.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", path, resp.Status)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
	for _, path := range []string{"/api/locks?limit=0", "/api/locks?limit=100000", "/api/locks?cursor=x"} {
		if code, _ := get(t, base+path); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", path, code)
		}
	}
	if code, _ := get(t, base+"/api/lockstats"); code != http.StatusNotFound {
		t.Errorf("/api/lockstats: %d; with lock statistics off the page's panel expects 404", code)
	}
}

// chromium finds Debian's chromium (make deps installs it). Without it the
// browser tests skip, except under CI=true, where they fail.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: make deps installs Debian's chromium")
	}
	t.Skip("no chromium on PATH: the status page's browser test needs it (make deps installs Debian's)")
	return ""
}

// browser opens base in a headless chromium and returns its context, which
// the test's cleanup cancels (ending the browser). dialogs receives the
// message of any JavaScript dialog the page opens (alert: an injected
// script ran).
func browser(t *testing.T, base string) (ctx context.Context, dialogs <-chan string) {
	t.Helper()
	return browserAt(t, base, 1280)
}

// browserAt is browser with a window width pixels wide.
func browserAt(t *testing.T, base string, width int) (ctx context.Context, dialogs <-chan string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in a container
		chromedp.WindowSize(width, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	d := make(chan string, 8)
	chromedp.ListenTarget(ctx, func(ev any) {
		if ev, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			select {
			case d <- ev.Message:
			default:
			}
		}
	})
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible("#ready.ok", chromedp.ByQuery)); err != nil {
		t.Fatalf("opening the status page: %v", err)
	}
	return ctx, d
}

// pageState is what the test reads of the page's DOM.
type pageState struct {
	Locks []struct {
		Key     string   `json:"key"`
		State   string   `json:"state"`
		Holders []string `json:"holders"` // each holder's owner
		Queue   []string `json:"queue"`   // each waiter's text: owner, priority
	} `json:"locks"`
	Images int      `json:"images"` // <img> elements anywhere in the document
	Events []string `json:"events"`
	Feed   string   `json:"feed"`
}

// readPageJS reads pageState from the DOM, by textContent only.
const readPageJS = `(() => {
  const rows = [...document.querySelectorAll('#locks tbody tr')];
  return JSON.stringify({
    locks: rows.map(tr => ({
      key: tr.cells[0].textContent,
      state: tr.cells[1].textContent,
      holders: [...tr.querySelectorAll('li.holder .owner')].map(e => e.textContent),
      queue: [...tr.querySelectorAll('li.waiter')].map(e => e.textContent),
    })),
    images: document.getElementsByTagName('img').length,
    events: [...document.querySelectorAll('#events tbody tr')].map(tr => [...tr.cells].map(c => c.textContent).join(' ')),
    feed: document.getElementById('feed').textContent,
  });
})()`

func readPage(ctx context.Context) (pageState, error) {
	var raw string
	var st pageState
	if err := chromedp.Run(ctx, chromedp.Evaluate(readPageJS, &raw)); err != nil {
		return st, err
	}
	err := json.Unmarshal([]byte(raw), &st)
	return st, err
}

// waitPage reads the page until ok says yes, for at most within; it fails
// the test with what it saw last.
func waitPage(t *testing.T, ctx context.Context, what string, within time.Duration, ok func(pageState) bool) pageState {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := readPage(ctx)
		if err != nil {
			t.Fatalf("%s: reading the page: %v", what, err)
		}
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not on the page within %v; it shows %+v", what, within, st)
		}
		<-tick.C
	}
}

func (st pageState) lock(key string) (holders, queue []string, state string, found bool) {
	for _, l := range st.Locks {
		if l.Key == key {
			return l.Holders, l.Queue, l.State, true
		}
	}
	return nil, nil, "", false
}

// The user input the page must show as text.
const (
	hostileKey   = `<img src=x onerror=alert(1)>`
	hostileOwner = `</script><script>alert(2)</script>`
)

// TestStatusPageBrowser drives the page in a headless chromium: a lock
// taken over RESP appears within a second with its holder, a waiter appears
// in its queue with its priority, a RELEASE hands the lock on and the page
// follows, the event stream shows it, and a hostile key and owner are text:
// no <img> element, no dialog.
func TestStatusPageBrowser(t *testing.T) {
	ls := lockserver.Start(t)
	base := startAdmin(t, ls.Server)
	ctx, dialogs := browser(t, base)
	rctx := context.Background()
	rdb := ls.Client()

	waitPage(t, ctx, "the event stream", 10*time.Second, func(st pageState) bool { return st.Feed == "events: live" })

	token, err := rdb.Do(rctx, "ACQUIRE", hostileKey, 60000, "OWNER", hostileOwner).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	st := waitPage(t, ctx, "the lock", time.Second, func(st pageState) bool {
		holders, _, _, ok := st.lock(hostileKey)
		return ok && len(holders) == 1
	})
	if holders, _, _, _ := st.lock(hostileKey); holders[0] != hostileOwner {
		t.Errorf("holder's owner shown as %q, want %q", holders[0], hostileOwner)
	}

	// A waiter on another connection.
	waiter := redis.NewClient(&redis.Options{Addr: ls.Addr})
	defer waiter.Close()
	granted := make(chan error, 1)
	go func() {
		granted <- waiter.Do(rctx, "ACQUIRE", hostileKey, 60000, "OWNER", "waiter-1", "WAIT", 30000, "PRIORITY", 3).Err()
	}()
	waitPage(t, ctx, "the waiter", 5*time.Second, func(st pageState) bool {
		_, queue, _, ok := st.lock(hostileKey)
		return ok && len(queue) == 1 && strings.Contains(queue[0], "waiter-1") && strings.Contains(queue[0], "priority 3")
	})

	if n, err := rdb.Do(rctx, "RELEASE", hostileKey, token).Int(); err != nil || n != 1 {
		t.Fatalf("RELEASE: %v, %v", n, err)
	}
	select {
	case err := <-granted:
		if err != nil {
			t.Fatalf("the waiter's ACQUIRE: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not granted the lock")
	}
	st = waitPage(t, ctx, "the hand-off", 2*time.Second, func(st pageState) bool {
		holders, queue, _, ok := st.lock(hostileKey)
		return ok && len(holders) == 1 && holders[0] == "waiter-1" && len(queue) == 0
	})
	waitPage(t, ctx, "the events", 2*time.Second, func(st pageState) bool {
		var acquired, released bool
		for _, e := range st.Events {
			acquired = acquired || strings.Contains(e, "acquired "+hostileKey) && strings.Contains(e, hostileOwner)
			released = released || strings.Contains(e, "released "+hostileKey)
		}
		return acquired && released
	})

	if st.Images != 0 {
		t.Errorf("%d <img> elements in the page: a key was rendered as markup", st.Images)
	}
	select {
	case msg := <-dialogs:
		t.Errorf("the page opened a dialog (%q): a key or owner ran as script", msg)
	default:
	}
}

// TestStatusPageScreenshots writes docs/status-page.png (1400 px wide) and
// docs/status-page-narrow.png (800 px) from a server with lock statistics
// on, a few locks, holders and waiters, and some seconds of traffic done
// before the page opens, which it shows from the server's history; it runs
// only with -screenshots DIR.
func TestStatusPageScreenshots(t *testing.T) {
	if *screenshots == "" {
		t.Skip("no -screenshots directory")
	}
	ls := lockserver.Start(t, func(c *server.Config) { c.LockStatsTop = 100 })
	base := startAdmin(t, sixtySecondSource{ls.Server})
	rctx := context.Background()
	rdb := ls.Client()
	do := doer(t, rdb)
	makeActivity(t, ls)
	// Traffic for the charts, before the page opens: short leases, some
	// expiring, some waits timing out.
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		rdb.Do(rctx, "ACQUIRE", fmt.Sprintf("jobs/batch-%d", i%7), 200+i%5*100, "OWNER", fmt.Sprintf("worker-%d", i%9))
		if i%4 == 0 {
			rdb.Do(rctx, "ACQUIRE", "orders/eu-west/rebalance", 1000, "WAIT", 30)
		}
		time.Sleep(time.Duration(60+i%7*20) * time.Millisecond) // pacing the load, not synchronising
	}
	do("ACQUIRE", "orders/eu-west/rebalance", 45000, "OWNER", "billing-7f9c", "WAIT", 5000) // once the traffic's last lease ends
	do("ACQUIRE", "inventory/sku-88231", 120000, "OWNER", "stock-sync-2")
	do("CREATE", "reports/nightly", "LIMIT", 3)
	do("ACQUIRE", "reports/nightly", 600000, "OWNER", "report-a")
	do("ACQUIRE", "reports/nightly", 600000, "OWNER", "report-b")
	do("ACQUIRE", "config/leader", 60000, "OWNER", "node-2.internal")
	do("ACQUIRE", hostileKey, 30000, "OWNER", hostileOwner)
	waiters := []struct {
		key, owner string
		prio       int
	}{
		{"orders/eu-west/rebalance", "billing-a31e", 0},
		{"orders/eu-west/rebalance", "billing-urgent", 10},
		{"orders/eu-west/rebalance", "billing-c001", 0},
		{"config/leader", "node-1.internal", 0},
		{"config/leader", "node-3.internal", 0},
	}
	queued := map[string]int{}
	for _, w := range waiters {
		c := redis.NewClient(&redis.Options{Addr: ls.Addr, ReadTimeout: -1})
		t.Cleanup(func() { c.Close() })
		go c.Do(rctx, "ACQUIRE", w.key, 30000, "OWNER", w.owner, "WAIT", 60000, "PRIORITY", w.prio)
		queued[w.key]++
		waitQueued(t, ls, w.key, queued[w.key])
	}
	historyHolds(t, base, "jobs/batch-0")
	for _, shot := range []struct {
		width int
		file  string
	}{{1400, "status-page.png"}, {800, "status-page-narrow.png"}} {
		ctx, _ := browserAt(t, base, shot.width)
		waitPage(t, ctx, "the waiters", 10*time.Second, func(st pageState) bool {
			n := 0
			for _, l := range st.Locks {
				n += len(l.Queue)
			}
			return n == len(waiters) && len(st.Events) > 0
		})
		// The hottest locks come with the first LOCKSTATS poll.
		if err := chromedp.Run(ctx, chromedp.WaitVisible("#hot tbody tr", chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
		var png []byte
		if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(*screenshots, shot.file)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}

// TestStatusPageEventStream: /api/events streams a lock's events over
// server-sent events; the server's subscription lasts while a stream is
// open and ends with it; and the listener's Close ends an open stream at
// once rather than waiting its shutdown timeout for the browser.
func TestStatusPageEventStream(t *testing.T) {
	ls := lockserver.Start(t)
	cfg := admin.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.ShutdownTimeout = 20 * time.Second
	a, err := admin.Start(cfg, ls.Server, zerolog.New(testutil.NewTestLog(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	resp, err := http.Get("http://" + a.Addr().String() + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended")
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("nothing on the stream")
		}
		return ""
	}
	if l := next(); l != "event: hello" {
		t.Fatalf("first line %q", l)
	}
	if got := ls.Server.StatsSnapshot().Traffic.PubSubPatterns; got != 1 {
		t.Errorf("%d patterns subscribed with a stream open, want 1", got)
	}
	if err := ls.Client().Do(context.Background(), "ACQUIRE", "k", 60000, "OWNER", "o\nx").Err(); err != nil {
		t.Fatal(err)
	}
	for l := next(); l != "event: lock"; l = next() {
	}
	data := strings.TrimPrefix(next(), "data: ")
	var ev struct{ Kind, Key, Owner string }
	if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Kind != "acquired" || ev.Key != "k" || ev.Owner != "o\nx" {
		t.Fatalf("event %q: %+v, %v", data, ev, err)
	}

	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v with a stream open", took)
	}
	for range lines {
	}
	if got := ls.Server.StatsSnapshot().Traffic.PubSubPatterns; got != 0 {
		t.Errorf("%d patterns subscribed once the stream ended, want 0", got)
	}
}

// TestStatusPageLockStats: with lock statistics on, /api/lockstats answers
// the hottest locks (a hostile key as data, not markup); off, 404, which
// the page's panel reads as "no lock statistics"; a bad BY or TOP is 400.
func TestStatusPageLockStats(t *testing.T) {
	ls := lockserver.Start(t, func(c *server.Config) { c.LockStatsTop = 100 })
	base := startAdmin(t, ls.Server)
	rdb := redis.NewClient(&redis.Options{Addr: ls.Addr})
	defer rdb.Close()
	ctx := context.Background()
	const hostile = "<img src=x onerror=alert(1)>"
	for range 3 {
		tok, err := rdb.Do(ctx, "ACQUIRE", hostile, 60000).Int64()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.Do(ctx, "RELEASE", hostile, tok).Err(); err != nil {
			t.Fatal(err)
		}
	}
	code, body := get(t, base+"/api/lockstats?by=acquisitions&top=5")
	if code != http.StatusOK {
		t.Fatalf("/api/lockstats: %d %s", code, body)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(body), &rows); err != nil {
		t.Fatalf("/api/lockstats: %v in %s", err, body)
	}
	if len(rows) != 1 || rows[0]["key"] != hostile || rows[0]["acquisitions"] != float64(3) {
		t.Fatalf("/api/lockstats: %v, want the one lock with 3 acquisitions", rows)
	}

	// Three leases left to expire after 25, 45 and 65 ms, each seen through
	// its event (counted before it is published): their median hold time,
	// about 45 ms, comes in milliseconds to three significant digits, as
	// LOCKSTATS gives it, not to the microsecond ("49.663").
	sub := rdb.Subscribe(ctx, "__lock__:brief")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	expired, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, ttl := range []int{25, 45, 65} {
		if err := rdb.Do(ctx, "ACQUIRE", "brief", ttl).Err(); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := sub.ReceiveMessage(expired)
			if err != nil {
				t.Fatalf("waiting for brief's expiry: %v", err)
			}
			if strings.HasPrefix(msg.Payload, "expired") {
				break
			}
		}
	}
	code, body = get(t, base+"/api/lockstats?by=expiries&top=1")
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var brief []map[string]any
	if err := dec.Decode(&brief); err != nil || code != http.StatusOK || len(brief) != 1 || brief[0]["key"] != "brief" {
		t.Fatalf("/api/lockstats?by=expiries: %d %s (%v)", code, body, err)
	}
	hold, _ := brief[0]["hold_p50_ms"].(json.Number)
	if f, err := hold.Float64(); err != nil || f < 40 || f > 10000 || len(strings.TrimRight(strings.Replace(hold.String(), ".", "", 1), "0")) > 3 {
		t.Errorf("brief's hold_p50_ms = %q, want about 45 ms, to three significant digits", hold)
	}

	for _, path := range []string{"/api/lockstats?by=size", "/api/lockstats?top=0", "/api/lockstats?top=x"} {
		if code, _ := get(t, base+path); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", path, code)
		}
	}
}

// TestStatusPageHistory: /api/history answers, from the admin listener's
// start, a sample a second of the lock table's grants, waits, expiries,
// hand-offs and timeouts, and the server's recent events; ?since= gives
// the samples after a time, ?events=0 leaves the events out; the listener's
// Close stops the server's recording.
func TestStatusPageHistory(t *testing.T) {
	ls := lockserver.Start(t)
	cfg := admin.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	a, err := admin.Start(cfg, ls.Server, zerolog.New(testutil.NewTestLog(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	base := "http://" + a.Addr().String()
	rdb := ls.Client()
	ctx := context.Background()
	for range 3 {
		tok, err := rdb.Do(ctx, "ACQUIRE", "h", 60000, "OWNER", "o").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.Do(ctx, "RELEASE", "h", tok).Err(); err != nil {
			t.Fatal(err)
		}
	}
	type history struct {
		Now      int64 `json:"now_ms"`
		Interval int64 `json:"interval_ms"`
		Span     int   `json:"span_s"`
		Samples  []struct {
			T      int64   `json:"t_ms"`
			Grants float64 `json:"grants"`
		}
		Events []struct{ Kind, Key, Token, Owner string }
	}
	read := func(query string) history {
		t.Helper()
		code, body := get(t, base+"/api/history"+query)
		var h history
		if err := json.Unmarshal([]byte(body), &h); code != http.StatusOK || err != nil {
			t.Fatalf("/api/history%s: %d %s (%v)", query, code, body, err)
		}
		return h
	}
	// The grants' sample comes with the sampler's next tick.
	var h history
	defer func() {
		if t.Failed() {
			t.Logf("the last /api/history: %+v", h)
		}
	}()
	testutil.Eventually(t, 10*time.Second, "a sample with the grants", func() bool {
		h = read("")
		var grants float64
		for _, s := range h.Samples {
			grants += s.Grants
		}
		return grants > 0
	})
	if h.Interval != 1000 || h.Span != 300 || len(h.Samples) > 300 {
		t.Errorf("interval %d ms, span %d s, %d samples", h.Interval, h.Span, len(h.Samples))
	}
	if len(h.Events) != 6 || h.Events[0].Kind != "acquired" || h.Events[0].Key != "h" || h.Events[0].Owner != "o" || h.Events[5].Kind != "released" {
		t.Errorf("events %+v, want the 3 acquired and released, oldest first", h.Events)
	}
	last := h.Samples[len(h.Samples)-1].T
	if h := read(fmt.Sprintf("?events=0&since=%d", last)); len(h.Samples) != 0 || len(h.Events) != 0 {
		t.Errorf("since the last sample, without events: %+v", h)
	}
	for _, q := range []string{"?since=x", "?events=2"} {
		if code, _ := get(t, base+"/api/history"+q); code != http.StatusBadRequest {
			t.Errorf("/api/history%s: %d, want 400", q, code)
		}
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "ACQUIRE", "after", 60000).Err(); err != nil {
		t.Fatal(err)
	}
	if evs := ls.Server.RecentEvents(); evs[len(evs)-1].Key != "h" {
		t.Errorf("the server recorded %q after the listener closed", evs[len(evs)-1].Key)
	}
}
