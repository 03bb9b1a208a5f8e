package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/leasehold/leasehold/contention"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/server"
	"github.com/redis/go-redis/v9"
)

// The widths the status page must read at: a laptop's browser, and half a
// wide screen.
var pageWidths = []int{1400, 800}

// waitedKey is the lock whose 60 s wait the hottest-locks table shows.
const waitedKey = "jobs/nightly-export"

// sixtySecondSource is a server whose LOCKSTATS has one more row than the
// server counted: a lock whose waits took 60 s, as the contention package
// would report it (within 1.6%), which a test cannot wait for: two waits
// that timed out, and two leases, held 159 µs and 20.5 ms.
type sixtySecondSource struct{ *server.Server }

func (s sixtySecondSource) LockStats(top int, by string) ([]contention.LockStat, error) {
	rows, err := s.Server.LockStats(top, by)
	return append([]contention.LockStat{{
		Key: waitedKey, Acquisitions: 2, Waits: 2, Timeouts: 2,
		WaitP50: 59990 * time.Millisecond, WaitP99: 60500 * time.Millisecond,
		HoldP50: 159 * time.Microsecond, HoldP99: 20500 * time.Microsecond,
	}}, rows...), err
}

// longKey is a key far wider than its column at either width.
var longKey = "orders/eu-west-1/" + strings.Repeat("customer-account-rebalance-", 8) + "end"

// The key issue 27 was filed with: it must stay text.
const scriptKey = "deploy<script>alert(1)</script>"

// makeActivity does, before any page is open, what the page must show as
// it opens: a hot lock taken 50 times, a long key, a script-like key, two
// waiters (one handed the lock, one timing out) and leases left to expire.
func makeActivity(t *testing.T, ls *lockserver.Server) {
	t.Helper()
	ctx := context.Background()
	rdb := ls.Client()
	do := doer(t, rdb)
	for i := range 50 {
		tok := do("ACQUIRE", "orders:1", 60000, "OWNER", fmt.Sprintf("worker-%d", i%4))
		do("RELEASE", "orders:1", tok)
	}
	do("ACQUIRE", longKey, 60000, "OWNER", "rebalancer-"+strings.Repeat("x", 80))
	tok := do("ACQUIRE", scriptKey, 60000, "OWNER", hostileOwner)

	// One waiter is handed the lock; one gives up after 50 ms.
	waiter := redis.NewClient(&redis.Options{Addr: ls.Addr})
	defer waiter.Close()
	granted := make(chan error, 1)
	go func() {
		granted <- waiter.Do(ctx, "ACQUIRE", scriptKey, 60000, "OWNER", "deployer-2", "WAIT", 30000).Err()
	}()
	waitQueued(t, ls, scriptKey, 1)
	do("RELEASE", scriptKey, tok)
	select {
	case err := <-granted:
		if err != nil {
			t.Fatalf("the waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not handed the lock")
	}
	if v, err := rdb.Do(ctx, "ACQUIRE", scriptKey, 60000, "WAIT", 50).Result(); err != redis.Nil {
		t.Fatalf("a wait on a held lock: %v, %v; want nil after 50 ms", v, err)
	}
	for i := range 5 {
		do("ACQUIRE", fmt.Sprintf("jobs/short-%d", i), 20)
	}
}

// waitQueued waits until key has n waiters, for at most 10 s.
func waitQueued(t *testing.T, ls *lockserver.Server, key string, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%d waiters queued on %q", n, key), func() bool {
		st, ok := ls.Server.Table().Status([]byte(key))
		return ok && st.Waiters >= n
	})
}

// historyHolds waits until /api/history has a sample counting the grants
// and expiries done and the events of every key in keys, for at most 10 s:
// the server sampled the activity before the page opens.
func historyHolds(t *testing.T, base string, keys ...string) {
	t.Helper()
	var code int
	var body string
	defer func() {
		if t.Failed() {
			t.Logf("the last /api/history: %d %.2000s", code, body)
		}
	}()
	testutil.Eventually(t, 10*time.Second, "/api/history with the activity", func() bool {
		code, body = get(t, base+"/api/history")
		var h struct {
			Samples []struct{ Grants, Expiries float64 }
			Events  []struct{ Key string }
		}
		if code != 200 || json.Unmarshal([]byte(body), &h) != nil {
			return false
		}
		var grants, expiries float64
		for _, s := range h.Samples {
			grants += s.Grants
			expiries += s.Expiries
		}
		seen := map[string]bool{}
		for _, ev := range h.Events {
			seen[ev.Key] = true
		}
		all := grants > 0 && expiries > 0
		for _, k := range keys {
			all = all && seen[k]
		}
		return all
	})
}

// layoutJS lists what is wrong with the page's layout at its width: an
// element wider than its box (the document than the window, a card or
// table than itself), a table past its card's edge, a key cell that wraps
// or is not cut with an ellipsis or lacks its whole key in its title, a
// number not right-aligned.
const layoutJS = `(() => {
  const bad = [];
  const name = e => e.id ? '#' + e.id : e.tagName.toLowerCase() + '.' + e.className;
  const de = document.documentElement;
  if (de.scrollWidth > window.innerWidth) bad.push('document ' + de.scrollWidth + ' px wide in a ' + window.innerWidth + ' px window');
  for (const e of document.querySelectorAll('section, .card, .tile, .chart, table')) {
    if (e.offsetParent === null) continue; // hidden
    if (e.scrollWidth > e.clientWidth) bad.push(name(e) + ': content ' + e.scrollWidth + ' px in ' + e.clientWidth + ' px');
  }
  for (const tb of document.querySelectorAll('table')) {
    if (tb.offsetParent === null) continue;
    const card = tb.closest('section').getBoundingClientRect(), r = tb.getBoundingClientRect();
    if (r.right > card.right + 0.5) bad.push(name(tb) + ' ends at ' + r.right + ', past its card at ' + card.right);
  }
  for (const td of document.querySelectorAll('td.key')) {
    const cs = getComputedStyle(td);
    if (cs.whiteSpace !== 'nowrap' || cs.textOverflow !== 'ellipsis' || cs.overflow !== 'hidden') bad.push('key cell ' + JSON.stringify(td.textContent) + ' not cut with an ellipsis');
    if (td.title !== td.textContent) bad.push('key cell ' + JSON.stringify(td.textContent) + ' has title ' + JSON.stringify(td.title));
    if (td.getBoundingClientRect().height > 2.5 * parseFloat(cs.lineHeight)) bad.push('key cell ' + JSON.stringify(td.textContent) + ' is ' + td.getBoundingClientRect().height + ' px high');
  }
  for (const td of document.querySelectorAll('#hot td.num, #hot th.num')) {
    if (getComputedStyle(td).textAlign !== 'right') bad.push('number ' + JSON.stringify(td.textContent) + ' aligned ' + getComputedStyle(td).textAlign);
  }
  return JSON.stringify({width: window.innerWidth, bad});
})()`

// firstLoadJS reads what the page drew from the history: the points and
// peak of each chart, and the events' rows.
const firstLoadJS = `JSON.stringify({
  charts: [...document.querySelectorAll('.chart svg')].map(s => ({id: s.parentElement.id, points: +(s.dataset.points || 0), peak: +(s.dataset.peak || 0), labels: [...s.querySelectorAll('text')].map(t => t.textContent)})),
  events: [...document.querySelectorAll('#events tbody tr')].map(tr => [...tr.cells].map(c => c.textContent).join(' ')),
  hot: [...document.querySelectorAll('#hot tbody tr')].map(tr => [...tr.cells].map(c => c.textContent)),
  scripts: document.scripts.length,
})`

type firstLoad struct {
	Charts []struct {
		ID     string
		Points int
		Peak   float64
		Labels []string
	}
	Events  []string
	Hot     [][]string
	Scripts int
}

// TestStatusPageLayoutAndHistory opens the page after the server has done
// some work, at each of pageWidths: it opens with the charts (axes with
// units) and the events of that work already drawn, from the server's
// history; nothing is wider than its card or the window, long keys are cut
// with the whole key in the title, numbers are right-aligned; a 60 s wait
// reads "60.0 s"; and the script-like key stays text.
func TestStatusPageLayoutAndHistory(t *testing.T) {
	ls := lockserver.Start(t, func(c *server.Config) { c.LockStatsTop = 100 })
	base := startAdmin(t, sixtySecondSource{ls.Server})
	makeActivity(t, ls)
	historyHolds(t, base, "orders:1", longKey, scriptKey, "jobs/short-0")

	for _, width := range pageWidths {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			ctx, dialogs := browserAt(t, base, width)

			// The first load: the history's charts and events, and the
			// LOCKSTATS rows, within the first polls.
			var fl firstLoad
			deadline := time.Now().Add(5 * time.Second)
			for {
				var raw string
				if err := chromedp.Run(ctx, chromedp.Evaluate(firstLoadJS, &raw)); err != nil {
					t.Fatal(err)
				}
				fl = firstLoad{}
				if err := json.Unmarshal([]byte(raw), &fl); err != nil {
					t.Fatal(err)
				}
				if drawn(fl) {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("the page did not open with the history drawn: %+v", fl)
					break // the layout is checked all the same
				}
				time.Sleep(50 * time.Millisecond) // polling the page, bounded above
			}
			for _, c := range fl.Charts {
				labels := strings.Join(c.Labels, "|")
				if !strings.Contains(labels, "/s") || !strings.Contains(labels, "300 s") || !strings.Contains(labels, "seconds ago") {
					t.Errorf("chart %s's axes are labelled %q: want counts per second and seconds ago", c.ID, labels)
				}
			}
			var sawScriptKey bool
			for _, e := range fl.Events {
				sawScriptKey = sawScriptKey || strings.Contains(e, "acquired "+scriptKey)
			}
			if !sawScriptKey {
				t.Errorf("no acquired %s among the events the page opened with: %q", scriptKey, fl.Events)
			}
			if fl.Scripts != 1 {
				t.Errorf("%d script elements: a key was rendered as markup", fl.Scripts)
			}

			// The 60 s wait, in the hottest-locks table and through the
			// page's formatter.
			var waited []string
			for _, row := range fl.Hot {
				if row[0] == waitedKey {
					waited = row
				}
			}
			if want := []string{waitedKey, "2", "2", "2", "0", "60.0 s", "60.5 s", "159 µs", "20.5 ms"}; strings.Join(waited, "|") != strings.Join(want, "|") {
				t.Errorf("the 60 s wait's row reads %q, want %q", waited, want)
			}
			var formatted string
			if err := chromedp.Run(ctx, chromedp.Evaluate(`JSON.stringify([60000, 59990, 60960, 20.5, 0.159, 999.9].map(fmtLatency))`, &formatted)); err != nil {
				t.Fatal(err)
			}
			if want := `["60.0 s","60.0 s","61.0 s","20.5 ms","159 µs","1.00 s"]`; formatted != want {
				t.Errorf("fmtLatency gives %s, want %s", formatted, want)
			}

			var raw string
			if err := chromedp.Run(ctx, chromedp.Evaluate(layoutJS, &raw)); err != nil {
				t.Fatal(err)
			}
			var layout struct {
				Width int
				Bad   []string
			}
			if err := json.Unmarshal([]byte(raw), &layout); err != nil {
				t.Fatal(err)
			}
			if layout.Width != width {
				t.Errorf("window %d px wide, want %d", layout.Width, width)
			}
			for _, b := range layout.Bad {
				t.Errorf("at %d px: %s", width, b)
			}
			select {
			case msg := <-dialogs:
				t.Errorf("the page opened a dialog (%q): a key or owner ran as script", msg)
			default:
			}
		})
	}
}

// drawn reports whether the page shows the history: every chart has
// samples, the grants' with grants in them, there are events, and the
// LOCKSTATS rows are in.
func drawn(fl firstLoad) bool {
	if len(fl.Charts) != 3 || len(fl.Events) == 0 || len(fl.Hot) == 0 {
		return false
	}
	for _, c := range fl.Charts {
		if c.Points == 0 || c.ID == "chart-grants" && c.Peak == 0 {
			return false
		}
	}
	return true
}
