package persist

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

func sortedLeases(ls []leaseModel) []leaseModel {
	out := slices.Clone(ls)
	sort.Slice(out, func(i, j int) bool { return out[i].token < out[j].token })
	return out
}

// Entry constructors: each goes through the encoder and the decoder, as a
// replay sees it.
func decodeOne(t testing.TB, b []byte) entry {
	t.Helper()
	d := newDecoder(b)
	e, err := d.next()
	if err != nil || d.More() {
		t.Fatalf("decoding %x: %v (%d bytes left)", b, err, len(d.B))
	}
	return e
}

func eCreate(t testing.TB, key string, o locker.CreateOptions) entry {
	return decodeOne(t, appendChange(nil, &locker.Change{Kind: locker.ChangeCreate, Key: []byte(key), Options: o}, 0))
}

func eDelete(t testing.TB, key string) entry {
	return decodeOne(t, appendChange(nil, &locker.Change{Kind: locker.ChangeDelete, Key: []byte(key)}, 0))
}

func eGrant(t testing.TB, key string, tok uint64, dl int64, owner string, shared bool) entry {
	return decodeOne(t, appendChange(nil, &locker.Change{Kind: locker.ChangeGrant, Key: []byte(key), Token: tok, Owner: []byte(owner), Shared: shared}, dl))
}

func eExtend(t testing.TB, key string, tok uint64, dl int64) entry {
	return decodeOne(t, appendChange(nil, &locker.Change{Kind: locker.ChangeExtend, Key: []byte(key), Token: tok}, dl))
}

func eRelease(t testing.TB, key string, tok uint64) entry {
	return decodeOne(t, appendChange(nil, &locker.Change{Kind: locker.ChangeRelease, Key: []byte(key), Token: tok}, 0))
}

func eReserve(t testing.TB, c uint64) entry { return decodeOne(t, appendReserve(nil, c)) }
func eHeader(t testing.TB, c uint64) entry  { return decodeOne(t, appendHeader(nil, c)) }

func eLock(t testing.TB, key string, m lockModel) entry {
	return decodeOne(t, appendLock(nil, []byte(key), &m))
}

func excl(tok uint64, dl int64, owner string) leaseModel {
	return leaseModel{token: tok, deadline: dl, owner: ownerBytes(owner)}
}

func shrd(tok uint64, dl int64, owner string) leaseModel {
	return leaseModel{token: tok, deadline: dl, owner: ownerBytes(owner), shared: true}
}

func ownerBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func replay(es []entry) *model { return replayDelay(es, 0) }

// replayDelay replays under a table whose default lock-delay is delay.
func replayDelay(es []entry, delay time.Duration) *model {
	m := newModel(delay)
	for i := range es {
		e := es[i]
		m.apply(&e)
	}
	return m
}

// modelDiff describes how two models differ, or returns "".
func modelDiff(a, b *model) string { return modelDiffLast(a, b, true) }

// modelDiffLast is modelDiff; without strictLast, b's last tokens need only
// be at least a's. (A log replayed over a snapshot that already holds a lock
// made again after a release removed it skips that removal, and the last
// token, a maximum, keeps the earlier incarnation's: harmless, since the
// token sequence restarts above the reservation anyway.)
func modelDiffLast(a, b *model, strictLast bool) string {
	var diffs []string
	if a.ceiling != b.ceiling {
		diffs = append(diffs, fmt.Sprintf("ceiling %d != %d", a.ceiling, b.ceiling))
	}
	keys := map[string]bool{}
	for k := range a.locks {
		keys[k] = true
	}
	for k := range b.locks {
		keys[k] = true
	}
	for _, k := range slices.Sorted(mapKeys(keys)) {
		x, y := a.locks[k], b.locks[k]
		switch {
		case x == nil || y == nil:
			diffs = append(diffs, fmt.Sprintf("%q: %s != %s", k, fmtLock(x), fmtLock(y)))
		case !strictLast && y.lastToken >= x.lastToken:
			yy := *y
			yy.lastToken = x.lastToken
			if !lockModelsEqual(x, &yy, false) {
				diffs = append(diffs, fmt.Sprintf("%q: %s != %s", k, fmtLock(x), fmtLock(y)))
			}
		case !lockModelsEqual(x, y, false):
			diffs = append(diffs, fmt.Sprintf("%q: %s != %s", k, fmtLock(x), fmtLock(y)))
		}
	}
	return strings.Join(diffs, "; ")
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func fmtLock(l *lockModel) string {
	if l == nil {
		return "absent"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "{created=%v opts=%+v last=%d leases=[", l.created, l.options, l.lastToken)
	for _, x := range sortedLeases(l.leases) {
		fmt.Fprintf(&b, " %d@%d/%q/s=%v", x.token, x.deadline, x.owner, x.shared)
	}
	b.WriteString(" ]}")
	return b.String()
}

func TestModelApply(t *testing.T) {
	sem := locker.CreateOptions{Limit: 2}
	withDelay := locker.CreateOptions{DefaultTTL: time.Second, LockDelay: time.Minute, LockDelaySet: true}
	cases := []struct {
		name    string
		entries func(t *testing.T) []entry
		want    map[string]*lockModel
		ceiling uint64
	}{
		{"exclusive grant drops earlier exclusive", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 1, 10, "a", false), eGrant(t, "k", 2, 20, "b", false)}
		}, map[string]*lockModel{"k": {lastToken: 2, leases: []leaseModel{excl(2, 20, "b")}}}, 0},
		{"exclusive grant drops earlier shared", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 1, 10, "a", true), eGrant(t, "k", 2, 20, "", true), eGrant(t, "k", 3, 30, "c", false)}
		}, map[string]*lockModel{"k": {lastToken: 3, leases: []leaseModel{excl(3, 30, "c")}}}, 0},
		{"shared grant keeps shared", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 1, 10, "a", true), eGrant(t, "k", 2, 20, "", true)}
		}, map[string]*lockModel{"k": {lastToken: 2, leases: []leaseModel{shrd(1, 10, "a"), shrd(2, 20, "")}}}, 0},
		{"shared grant drops exclusive", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 1, 10, "a", false), eGrant(t, "k", 2, 20, "b", true)}
		}, map[string]*lockModel{"k": {lastToken: 2, leases: []leaseModel{shrd(2, 20, "b")}}}, 0},
		{"semaphore keeps permits", func(t *testing.T) []entry {
			return []entry{eCreate(t, "k", sem), eGrant(t, "k", 1, 10, "a", false), eGrant(t, "k", 2, 20, "b", false), eGrant(t, "k", 3, 30, "", false)}
		}, map[string]*lockModel{"k": {created: true, options: sem, lastToken: 3, leases: []leaseModel{excl(1, 10, "a"), excl(2, 20, "b"), excl(3, 30, "")}}}, 0},
		{"a grant seen twice is one lease", func(t *testing.T) []entry {
			return []entry{eCreate(t, "k", sem), eGrant(t, "k", 1, 10, "a", false), eGrant(t, "k", 1, 10, "a", false),
				eGrant(t, "s", 4, 10, "", true), eGrant(t, "s", 4, 10, "", true)}
		}, map[string]*lockModel{
			"k": {created: true, options: sem, lastToken: 1, leases: []leaseModel{excl(1, 10, "a")}},
			"s": {lastToken: 4, leases: []leaseModel{shrd(4, 10, "")}},
		}, 0},
		{"extend sets the deadline of its token only", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 1, 10, "a", true), eGrant(t, "k", 2, 20, "b", true), eExtend(t, "k", 1, 50), eExtend(t, "k", 1, 40), eExtend(t, "k", 9, 99)}
		}, map[string]*lockModel{"k": {lastToken: 2, leases: []leaseModel{shrd(1, 40, "a"), shrd(2, 20, "b")}}}, 0},
		{"extend of a semaphore permit", func(t *testing.T) []entry {
			return []entry{eCreate(t, "k", sem), eGrant(t, "k", 1, 10, "", false), eGrant(t, "k", 2, 20, "", false), eExtend(t, "k", 2, 70)}
		}, map[string]*lockModel{"k": {created: true, options: sem, lastToken: 2, leases: []leaseModel{excl(1, 10, ""), excl(2, 70, "")}}}, 0},
		{"release by token", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 1, 10, "a", true), eGrant(t, "k", 2, 20, "b", true), eRelease(t, "k", 1), eRelease(t, "k", 1)}
		}, map[string]*lockModel{"k": {lastToken: 2, leases: []leaseModel{shrd(2, 20, "b")}}}, 0},
		{"release of an unknown token keeps the others", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 1, 10, "a", true), eRelease(t, "k", 7)}
		}, map[string]*lockModel{"k": {lastToken: 1, leases: []leaseModel{shrd(1, 10, "a")}}}, 0},
		{"release of the last lease of an on-the-fly lock removes it", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 1, 10, "a", false), eRelease(t, "k", 1), eGrant(t, "s", 2, 10, "", true), eGrant(t, "s", 3, 10, "", true), eRelease(t, "s", 3), eRelease(t, "s", 2)}
		}, map[string]*lockModel{}, 0},
		{"release of the last lease of a created lock keeps it", func(t *testing.T) []entry {
			return []entry{eCreate(t, "k", withDelay), eGrant(t, "k", 1, 10, "a", false), eRelease(t, "k", 1)}
		}, map[string]*lockModel{"k": {created: true, options: withDelay, lastToken: 1}}, 0},
		{"extend and release of an unknown lock make none", func(t *testing.T) []entry {
			return []entry{eExtend(t, "k", 1, 10), eRelease(t, "j", 1)}
		}, map[string]*lockModel{}, 0},
		{"delete removes the lock and its settings", func(t *testing.T) []entry {
			return []entry{eCreate(t, "k", withDelay), eGrant(t, "k", 1, 10, "a", false), eRelease(t, "k", 1), eDelete(t, "k"), eDelete(t, "never")}
		}, map[string]*lockModel{}, 0},
		{"a grant after delete starts an on-the-fly lock", func(t *testing.T) []entry {
			return []entry{eCreate(t, "k", sem), eGrant(t, "k", 1, 10, "", false), eRelease(t, "k", 1), eDelete(t, "k"), eGrant(t, "k", 5, 50, "z", false)}
		}, map[string]*lockModel{"k": {lastToken: 5, leases: []leaseModel{excl(5, 50, "z")}}}, 0},
		{"create adopts an on-the-fly lock with its lease", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 1, 10, "a", false), eCreate(t, "k", withDelay)}
		}, map[string]*lockModel{"k": {created: true, options: withDelay, lastToken: 1, leases: []leaseModel{excl(1, 10, "a")}}}, 0},
		{"last token is the highest granted", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 9, 10, "", true), eGrant(t, "k", 4, 10, "", true)}
		}, map[string]*lockModel{"k": {lastToken: 9, leases: []leaseModel{shrd(9, 10, ""), shrd(4, 10, "")}}}, 0},
		{"reserve raises the ceiling and never lowers it", func(t *testing.T) []entry {
			return []entry{eReserve(t, 100), eReserve(t, 50), eHeader(t, 70)}
		}, map[string]*lockModel{}, 100},
		{"a header raises the ceiling", func(t *testing.T) []entry {
			return []entry{eReserve(t, 100), eHeader(t, 200)}
		}, map[string]*lockModel{}, 200},
		{"a snapshot lock replaces the whole lock", func(t *testing.T) []entry {
			return []entry{eGrant(t, "k", 1, 10, "a", true), eGrant(t, "k", 2, 10, "b", true),
				eLock(t, "k", lockModel{created: true, options: sem, lastToken: 7, leases: []leaseModel{excl(7, 70, "q")}})}
		}, map[string]*lockModel{"k": {created: true, options: sem, lastToken: 7, leases: []leaseModel{excl(7, 70, "q")}}}, 0},
		{"changes after a snapshot lock apply to it", func(t *testing.T) []entry {
			return []entry{eLock(t, "k", lockModel{created: true, options: sem, lastToken: 7, leases: []leaseModel{excl(7, 70, "q")}}),
				eGrant(t, "k", 8, 80, "r", false), eRelease(t, "k", 7)}
		}, map[string]*lockModel{"k": {created: true, options: sem, lastToken: 8, leases: []leaseModel{excl(8, 80, "r")}}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := replay(c.entries(t))
			want := &model{locks: c.want, ceiling: c.ceiling}
			if d := modelDiff(got, want); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestLockState(t *testing.T) {
	const now = int64(1000 * time.Second)
	offset := int64(-7 * time.Hour) // the table's clock is 7h behind the wall clock
	toClock := func(w int64) int64 { return w + offset }
	sec := int64(time.Second)
	type lease struct {
		tok uint64
		dl  int64
	}
	cases := []struct {
		name         string
		lock         lockModel
		grace, delay time.Duration
		want         []lease // wall-clock deadlines
	}{
		{"live lease keeps its deadline", lockModel{leases: []leaseModel{excl(1, now+5*sec, "a")}}, 0, 0, []lease{{1, now + 5*sec}}},
		{"grace extends a short lease", lockModel{leases: []leaseModel{excl(1, now+5*sec, "a")}}, time.Minute, 0, []lease{{1, now + 60*sec}}},
		{"grace leaves a long lease", lockModel{leases: []leaseModel{excl(1, now+90*sec, "a")}}, time.Minute, 0, []lease{{1, now + 90*sec}}},
		{"grace does not revive an expired lease", lockModel{leases: []leaseModel{excl(1, now-sec, "a")}}, time.Minute, 0, nil},
		{"a deadline of now has expired", lockModel{leases: []leaseModel{excl(1, now, "a")}}, time.Minute, 0, nil},
		{"expired without delay is dropped", lockModel{leases: []leaseModel{shrd(1, now-sec, ""), shrd(2, now+sec, "")}}, 0, 0, []lease{{2, now + sec}}},
		{"expired within the table's delay is kept with its deadline", lockModel{leases: []leaseModel{excl(1, now-sec, "a")}}, 0, 2 * time.Second, []lease{{1, now - sec}}},
		{"expired past the table's delay is dropped", lockModel{leases: []leaseModel{excl(1, now-2*sec, "a")}}, 0, 2 * time.Second, nil},
		{"a created lock's delay replaces the table's", lockModel{created: true, options: locker.CreateOptions{LockDelaySet: true, LockDelay: time.Hour},
			leases: []leaseModel{excl(1, now-time.Minute.Nanoseconds(), "a")}}, 0, time.Second, []lease{{1, now - time.Minute.Nanoseconds()}}},
		{"a created lock's zero delay replaces the table's", lockModel{created: true, options: locker.CreateOptions{LockDelaySet: true},
			leases: []leaseModel{excl(1, now-sec, "a")}}, 0, time.Hour, nil},
		{"a created lock without its own delay takes the table's", lockModel{created: true, options: locker.CreateOptions{Limit: 3},
			leases: []leaseModel{excl(1, now-sec, "a"), excl(2, now+sec, "b")}}, 0, time.Hour, []lease{{1, now - sec}, {2, now + sec}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.lock.lastToken = 42
			st := c.lock.lockState("key", toClock, now, c.grace, c.delay)
			if string(st.Key) != "key" || st.Created != c.lock.created || st.Options != c.lock.options || st.LastToken != 42 {
				t.Fatalf("state %+v does not carry the lock's fields", st)
			}
			if len(st.Leases) != len(c.want) {
				t.Fatalf("leases %+v, want %+v", st.Leases, c.want)
			}
			for i, w := range c.want {
				l := st.Leases[i]
				if l.Token != w.tok || l.Deadline != toClock(w.dl) {
					t.Fatalf("lease %d: %+v, want token %d deadline %d", i, l, w.tok, toClock(w.dl))
				}
				var src *leaseModel
				for n := range c.lock.leases {
					if c.lock.leases[n].token == w.tok {
						src = &c.lock.leases[n]
					}
				}
				if !bytes.Equal(l.Owner, src.owner) || l.Shared != src.shared {
					t.Fatalf("lease %d: %+v lost its owner or mode", i, l)
				}
			}
		})
	}
}

// recJournal records a table's changes as the entries a log would hold,
// deadlines left on the table's clock (the wall clock is the identity here).
type recJournal struct {
	mu      sync.Mutex
	entries [][]byte
	ceiling uint64
}

func (j *recJournal) Change(shard int, c *locker.Change) {
	j.mu.Lock()
	j.entries = append(j.entries, appendChange(nil, c, c.Deadline))
	j.mu.Unlock()
}

func (j *recJournal) ReserveTokens(upTo uint64) {
	j.mu.Lock()
	j.entries = append(j.entries, appendReserve(nil, upTo))
	j.ceiling = max(j.ceiling, upTo)
	j.mu.Unlock()
}

var historyKeys = []string{"a", "b", "c", "a-key-longer-than-the-inline-twenty-seven"}

// dumpAt is a table's Dump, as a snapshot holds it, taken once the log held
// at entries.
type dumpAt struct {
	at      int
	ceiling uint64
	locks   []locker.LockState
}

// randomHistory drives a real table with random commands and returns what
// its journal recorded, dumps taken along the way, and the table at the
// end. Create is only issued where the model has no lease that could have
// expired unlogged (see TestBugCreateAfterUnloggedExpiry*).
func randomHistory(t *testing.T, rng *rand.Rand, ops int) ([]entry, []dumpAt, *locker.Table, *locker.ManualClock, time.Duration) {
	t.Helper()
	clock := &locker.ManualClock{}
	clock.Advance(time.Hour)
	j := &recJournal{}
	cfg := locker.DefaultConfig()
	cfg.Shards = 2
	cfg.FirstToken = 1000
	cfg.Clock = clock
	cfg.Journal = j
	cfg.LockDelay = []time.Duration{0, 2 * time.Second}[rng.IntN(2)]
	tb, err := locker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := historyKeys
	owners := []string{"", "", "o1", "o2"}
	ttls := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second}
	tokens := map[string][]uint64{}
	running := newModel(0)
	seen := 0
	var dumps []dumpAt
	for range ops {
		// Keep the running model up to date with the journal.
		for ; seen < len(j.entries); seen++ {
			e := decodeOne(t, j.entries[seen])
			running.apply(&e)
		}
		key := keys[rng.IntN(len(keys))]
		k := []byte(key)
		now := int64(clock.Now())
		pickToken := func() uint64 {
			if ts := tokens[key]; len(ts) > 0 && rng.IntN(5) > 0 {
				return ts[rng.IntN(len(ts))]
			}
			return uint64(rng.IntN(2000))
		}
		switch op := rng.IntN(20); {
		case op < 2:
			if l := running.locks[key]; l != nil && slices.ContainsFunc(l.leases, func(x leaseModel) bool { return x.deadline <= now }) {
				continue
			}
			o := locker.CreateOptions{Limit: []int{0, 0, 1, 2}[rng.IntN(4)]}
			if rng.IntN(2) == 0 {
				o.DefaultTTL = 3 * time.Second
			}
			if rng.IntN(2) == 0 {
				o.LockDelaySet, o.LockDelay = true, []time.Duration{0, 3 * time.Second}[rng.IntN(2)]
			}
			tb.Create(k, o)
		case op < 7:
			if tok, ok, _ := tb.Acquire(&locker.Request{Key: k, TTL: ttls[rng.IntN(len(ttls))] * time.Duration(rng.IntN(2)), Owner: []byte(owners[rng.IntN(len(owners))])}); ok {
				tokens[key] = append(tokens[key], tok)
			}
		case op < 10:
			if tok, ok, _ := tb.Acquire(&locker.Request{Key: k, TTL: ttls[rng.IntN(len(ttls))], Owner: []byte(owners[rng.IntN(len(owners))]), Mode: locker.Shared}); ok {
				tokens[key] = append(tokens[key], tok)
			}
		case op < 12:
			tb.Release(k, pickToken())
		case op < 14:
			tb.Extend(k, pickToken(), ttls[rng.IntN(len(ttls))])
		case op < 15:
			tb.Delete(k)
		case op < 18:
			clock.Advance(time.Duration(1+rng.IntN(2)) * time.Second)
		case op < 19:
			tb.ExpireDue()
		default:
			j.mu.Lock()
			d := dumpAt{at: len(j.entries), ceiling: j.ceiling}
			j.mu.Unlock()
			tb.Dump(func(st *locker.LockState) { d.locks = append(d.locks, cloneState(st)) })
			dumps = append(dumps, d)
		}
	}
	var es []entry
	for _, b := range j.entries {
		es = append(es, decodeOne(t, b))
	}
	return es, dumps, tb, clock, cfg.LockDelay
}

func cloneState(st *locker.LockState) locker.LockState {
	c := *st
	c.Key = bytes.Clone(st.Key)
	c.Leases = nil
	for _, l := range st.Leases {
		l.Owner = bytes.Clone(l.Owner)
		c.Leases = append(c.Leases, l)
	}
	return c
}

// snapshotEntries encodes a model as a snapshot (header and locks) and
// decodes it back.
func snapshotEntries(t testing.TB, m *model) []entry {
	b := appendHeader(nil, m.ceiling)
	for _, k := range slices.Sorted(mapKeys(m.locks)) {
		b = appendLock(b, []byte(k), m.locks[k])
	}
	return decodeAll(t, b)
}

func dumpEntries(t testing.TB, d dumpAt) []entry {
	b := appendHeader(nil, d.ceiling)
	for _, st := range d.locks {
		m := lockModel{created: st.Created, options: st.Options, lastToken: st.LastToken}
		for _, l := range st.Leases {
			m.leases = append(m.leases, leaseModel{token: l.Token, deadline: l.Deadline, owner: l.Owner, shared: l.Shared, delayedUntil: l.DelayedUntil})
		}
		b = appendLock(b, st.Key, &m)
	}
	return decodeAll(t, b)
}

func decodeAll(t testing.TB, b []byte) []entry {
	t.Helper()
	var es []entry
	d := newDecoder(b)
	for d.More() {
		e, err := d.next()
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

// restoredStates is what Load would install from m at now, on a clock equal
// to the wall clock, keyed by lock.
func restoredStates(m *model, now int64, delay time.Duration) map[string]locker.LockState {
	out := map[string]locker.LockState{}
	for key, l := range m.locks {
		st := l.lockState(key, func(w int64) int64 { return w }, now, 0, delay)
		if !st.Created && len(st.Leases) == 0 {
			continue
		}
		// As Restore then settles it: a lease past its deadline is serving
		// its lock-delay, the shape Dump reports it in.
		d := int64(delay)
		if st.Created && st.Options.LockDelaySet {
			d = int64(st.Options.LockDelay)
		}
		leases := st.Leases[:0]
		for _, x := range st.Leases {
			if x.DelayedUntil == 0 && x.Deadline <= now {
				x = locker.LeaseState{Token: x.Token, Shared: x.Shared, DelayedUntil: x.Deadline + d}
			}
			if x.DelayedUntil == 0 || x.DelayedUntil > now {
				leases = append(leases, x)
			}
		}
		st.Leases = leases
		if !st.Created && len(st.Leases) == 0 {
			continue
		}
		out[key] = st
	}
	return out
}

func tableStates(tb *locker.Table) map[string]locker.LockState {
	out := map[string]locker.LockState{}
	tb.Dump(func(st *locker.LockState) {
		if !st.Created && len(st.Leases) == 0 {
			return // kept only by waiters, which do not persist
		}
		out[string(st.Key)] = cloneState(st)
	})
	return out
}

// statesDiff compares lock states; deadlines must be within tol (b's may be
// up to tol earlier than a's), owners are compared for live leases only (an
// expired lease serving a lock-delay has none in the table).
func statesDiff(a, b map[string]locker.LockState, now int64, tol time.Duration, lastToken bool) string {
	var diffs []string
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for _, k := range slices.Sorted(mapKeys(keys)) {
		x, okx := a[k]
		y, oky := b[k]
		if !okx || !oky {
			diffs = append(diffs, fmt.Sprintf("%q present %v vs %v", k, okx, oky))
			continue
		}
		if x.Created != y.Created || x.Options != y.Options || lastToken && x.LastToken != y.LastToken {
			diffs = append(diffs, fmt.Sprintf("%q: created/options/last %v %+v %d vs %v %+v %d", k, x.Created, x.Options, x.LastToken, y.Created, y.Options, y.LastToken))
		}
		xl, yl := sortedStates(x.Leases), sortedStates(y.Leases)
		if len(xl) != len(yl) {
			diffs = append(diffs, fmt.Sprintf("%q: leases %+v vs %+v", k, xl, yl))
			continue
		}
		for i := range xl {
			p, q := xl[i], yl[i]
			d := p.Deadline - q.Deadline
			switch {
			case p.Token != q.Token || p.Shared != q.Shared || p.DelayedUntil != q.DelayedUntil:
				diffs = append(diffs, fmt.Sprintf("%q: lease %+v vs %+v", k, p, q))
			case d < -int64(time.Millisecond) || d > int64(tol):
				diffs = append(diffs, fmt.Sprintf("%q: lease %d deadline %d vs %d", k, p.Token, p.Deadline, q.Deadline))
			case p.Deadline > now && !bytes.Equal(p.Owner, q.Owner) && (len(p.Owner) > 0 || len(q.Owner) > 0):
				diffs = append(diffs, fmt.Sprintf("%q: lease %d owner %q vs %q", k, p.Token, p.Owner, q.Owner))
			}
		}
	}
	return strings.Join(diffs, "\n")
}

func sortedStates(ls []locker.LeaseState) []locker.LeaseState {
	out := slices.Clone(ls)
	sort.Slice(out, func(i, j int) bool { return out[i].Token < out[j].Token })
	return out
}

// TestModelReplayOverlap is the argument compaction rests on: a snapshot is
// dumped while the new log goes on, so the log may repeat changes the
// snapshot already holds. Replaying the whole log must end where replaying
// any suffix of it over any later state ends; and replaying a log suffix
// over a real Dump taken after the suffix began must restore what the table
// really holds at the end.
func TestModelReplayOverlap(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		es, dumps, tb, clock, delay := randomHistory(t, rng, 80)
		full := replayDelay(es, delay)
		n := len(es)

		// Model-level: any i <= j, the state after j, per key possibly a
		// different j (the dump takes one shard at a time).
		for range 12 {
			i := rng.IntN(n + 1)
			inter := newModel(delay)
			inter.ceiling = replayDelay(es[:i], delay).ceiling
			for _, key := range historyKeys {
				if l := replayDelay(es[:i+rng.IntN(n-i+1)], delay).locks[key]; l != nil {
					inter.locks[key] = l
				}
			}
			got := replayDelay(append(snapshotEntries(t, inter), es[i:]...), delay)
			if d := modelDiffLast(full, got, false); d != "" {
				t.Fatalf("seed %d: replaying entries %d.. of %d over a later state differs from the whole log: %s", seed, i, n, d)
			}
		}

		// Real dumps: restored state equals the table's.
		now := int64(clock.Now())
		truth := tableStates(tb)
		if d := statesDiff(truth, restoredStates(full, now, delay), now, 0, true); d != "" {
			t.Fatalf("seed %d: the whole log restores a different table:\n%s", seed, d)
		}
		for _, d := range dumps {
			for range 3 {
				i := rng.IntN(d.at + 1)
				got := replayDelay(append(dumpEntries(t, d), es[i:]...), delay)
				if diff := statesDiff(truth, restoredStates(got, now, delay), now, 0, false); diff != "" {
					t.Fatalf("seed %d: dump at %d with the log from %d restores a different table:\n%s", seed, d.at, i, diff)
				}
			}
		}
		tb.Close()
	}
}
