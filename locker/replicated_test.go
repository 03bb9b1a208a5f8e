package locker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/keyslot"
)

// replica is one replicated table fed the same calls as the others, with
// what it reported on the way.
type replica struct {
	name  string
	tb    *Table
	clock *ManualClock
	sink  *keyedSink
	notes []string      // Notify calls of the current step
	waits map[int]*Wait // queued AcquireWait handles, by the step that made them
}

// keyedSink keeps a table's events per lock: their order across locks
// follows the shards, which differ between replicas.
type keyedSink struct {
	mu  sync.Mutex
	got map[string][]string
}

func (k *keyedSink) Active() bool { return true }
func (k *keyedSink) Publish(ev Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := strings.Clone(ev.Key) // borrowed (see Event)
	k.got[key] = append(k.got[key], fmt.Sprintf("%s %d %q", ev.Kind, ev.Token, ev.Owner))
}

func newReplica(t testing.TB, name string, shards int, origin time.Duration) *replica {
	t.Helper()
	clock := &ManualClock{}
	clock.Advance(origin)
	sink := &keyedSink{got: make(map[string][]string)}
	cfg := DefaultConfig()
	cfg.Shards = shards
	cfg.FirstToken = 1000
	cfg.Clock = clock
	cfg.Events = sink
	cfg.LockDelay = 300 * time.Millisecond
	cfg.Replicated = true
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return &replica{name: name, tb: tb, clock: clock, sink: sink, waits: make(map[int]*Wait)}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// normalStatus is a Status without the times left, which follow each
// replica's own clock.
func normalStatus(st Status, ok bool) string {
	st.TTL, st.DelayLeft = 0, 0
	for n := range st.Holders {
		st.Holders[n].TTL = 0
	}
	return fmt.Sprintf("%v %+v", ok, st)
}

// normalDump is Dump's output in key order, without deadlines.
func normalDump(tb *Table) []string {
	var out []string
	tb.Dump(func(st *LockState) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s created=%v %+v last=%d", st.Key, st.Created, st.Options, st.LastToken)
		for _, l := range st.Leases {
			fmt.Fprintf(&b, " [%d %q shared=%v delayed=%v renewals=%d]", l.Token, l.Owner, l.Shared, l.DelayedUntil != 0, l.Renewals)
		}
		out = append(out, b.String())
	})
	slices.Sort(out)
	return out
}

func dumpStates(tb *Table) []LockState {
	var states []LockState
	tb.Dump(func(st *LockState) { states = append(states, *st) })
	return states
}

// TestReplicatedDeterminism feeds replicas of different shard counts and
// clocks the same random calls, Fire with what one of them (the leader)
// collects, and checks that every answer, every lock's state and events,
// and the dump agree; half-way, a snapshot of the leader starts a third
// replica that goes on in step.
func TestReplicatedDeterminism(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { replicatedRun(t, seed, 3000) })
	}
}

func replicatedRun(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	leader := newReplica(t, "leader(1 shard)", 1, time.Hour)
	reps := []*replica{leader, newReplica(t, "follower(64 shards)", 64, 5*time.Minute)}
	keys := []string{"a", "b", "c", "{t}x", "{t}y", "{t}z", "sem1", "sem2", "rw", "d1", "d2", "long-key-beyond-the-inline-bytes-of-an-entry"}
	owners := []string{"", "", "o1", "o2", "o3"}
	type grant struct {
		key   string
		token uint64
	}
	var seen []grant  // leases granted, for calls that name one
	var pending []int // queued waits, by id
	var lastItems []Due

	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	// lease names a recent grant mostly, and otherwise a key and a token
	// that may match nothing.
	lease := func() (string, uint64) {
		if len(seen) == 0 || rng.IntN(4) == 0 {
			return pick(keys), 1000 + uint64(rng.IntN(50))
		}
		g := seen[len(seen)-1-rng.IntN(min(len(seen), 12))]
		return g.key, g.token
	}
	ttl := func() time.Duration { return time.Duration(1+rng.IntN(5)) * time.Second }
	mode := func() Mode {
		if rng.IntN(3) == 0 {
			return Shared
		}
		return Exclusive
	}
	// step runs call on every replica and fails unless all answer alike.
	step := func(n int, what string, call func(r *replica) string) string {
		var first string
		for k, r := range reps {
			r.notes = r.notes[:0]
			got := call(r)
			slices.Sort(r.notes)
			got += " notes=" + strings.Join(r.notes, ",")
			if k == 0 {
				first = got
			} else if got != first {
				t.Fatalf("step %d %s: %s answered\n  %s\nbut %s answered\n  %s", n, what, reps[0].name, first, r.name, got)
			}
		}
		return first
	}
	grants := func(keys [][]byte, toks ...uint64) {
		for k, tok := range toks {
			if tok != 0 {
				seen = append(seen, grant{string(keys[k]), tok})
			}
		}
	}
	snapshotAt := steps / 2

	for n := range steps {
		if n == snapshotAt {
			// Waits are no part of a snapshot (the state machine keeps its
			// own queue): end them on every replica first.
			for _, id := range pending {
				step(n, "cancel before snapshot", func(r *replica) string {
					tok, ok := r.tb.CancelWait(r.waits[id])
					return fmt.Sprint(tok, ok)
				})
			}
			pending = nil
			floor, counters := leader.tb.TokenState()
			states := dumpStates(leader.tb)
			c := newReplica(t, "restored(8 shards)", 8, 17*time.Second)
			// Restore first, then the token state: either order must do.
			for k := range states {
				if err := c.tb.Restore(&states[k]); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.tb.RestoreTokenState(floor, counters); err != nil {
				t.Fatal(err)
			}
			reps = append(reps, c)
			for _, r := range reps {
				r.sink.got = make(map[string][]string)
			}
			want := normalDump(leader.tb)
			for _, r := range reps[1:] {
				if got := normalDump(r.tb); !slices.Equal(got, want) {
					t.Fatalf("at the snapshot, %s dumps\n%s\nbut the leader\n%s", r.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
		}
		switch op := rng.IntN(100); {
		case op < 5:
			key, opts := pick(keys), CreateOptions{}
			if rng.IntN(2) == 0 {
				opts.DefaultTTL = ttl()
			}
			if strings.HasPrefix(key, "sem") {
				opts.Limit = 1 + rng.IntN(3)
			}
			if strings.HasPrefix(key, "d") || rng.IntN(4) == 0 {
				opts.LockDelay, opts.LockDelaySet = time.Duration(rng.IntN(3))*time.Second, true
			}
			step(n, "create "+key, func(r *replica) string {
				ok, err := r.tb.Create([]byte(key), opts)
				return fmt.Sprint(ok, errString(err))
			})
		case op < 25:
			req := Request{Key: []byte(pick(keys)), TTL: ttl(), Owner: []byte(pick(owners)), Mode: mode()}
			if rng.IntN(8) == 0 {
				req.TTL = 0 // the lock's default, if any
			}
			var tok uint64
			step(n, "acquire "+string(req.Key), func(r *replica) string {
				got, ok, err := r.tb.Acquire(&req)
				tok = got
				return fmt.Sprint(got, ok, errString(err))
			})
			grants([][]byte{req.Key}, tok)
		case op < 31:
			ks := [][]byte{[]byte(pick(keys)), []byte(pick(keys)), []byte(pick(keys))}[:2+rng.IntN(2)]
			req := Request{Keys: ks, TTL: ttl(), Owner: []byte(pick(owners)), Mode: mode()}
			var toks []uint64
			step(n, "acquire all", func(r *replica) string {
				got, ok, err := r.tb.AcquireAll(&req)
				toks = got
				return fmt.Sprint(got, ok, errString(err))
			})
			grants(ks, toks...)
		case op < 40:
			req := Request{Key: []byte(pick(keys)), TTL: ttl(), Owner: []byte(pick(owners)), Mode: mode(), Priority: rng.IntN(3)}
			if rng.IntN(8) == 0 {
				req.TTL = 0
			}
			id := n
			var tok uint64
			queued := false
			step(n, "acquire wait "+string(req.Key), func(r *replica) string {
				w := &Wait{}
				w.Notify = func(tok uint64) { r.notes = append(r.notes, fmt.Sprintf("w%d=%d", id, tok)) }
				got, ok, err := r.tb.AcquireWait(&req, w)
				tok = got
				if !ok && err == nil {
					r.waits[id] = w
					queued = true
				}
				return fmt.Sprint(got, ok, errString(err))
			})
			grants([][]byte{req.Key}, tok)
			if queued {
				pending = append(pending, id)
			}
		case op < 44:
			if len(pending) == 0 {
				continue
			}
			k := rng.IntN(len(pending))
			id := pending[k]
			pending = slices.Delete(pending, k, k+1)
			step(n, fmt.Sprint("cancel wait ", id), func(r *replica) string {
				tok, ok := r.tb.CancelWait(r.waits[id])
				delete(r.waits, id)
				return fmt.Sprint(tok, ok)
			})
		case op < 54:
			key, tok := lease()
			step(n, fmt.Sprint("release ", key, tok), func(r *replica) string { return fmt.Sprint(r.tb.Release([]byte(key), tok)) })
		case op < 60:
			key, tok := lease()
			d := ttl()
			step(n, fmt.Sprint("extend ", key, tok), func(r *replica) string {
				ok, err := r.tb.Extend([]byte(key), tok, d)
				return fmt.Sprint(ok, errString(err))
			})
		case op < 63:
			key := pick(keys)
			step(n, "delete "+key, func(r *replica) string {
				ok, err := r.tb.Delete([]byte(key))
				return fmt.Sprint(ok, errString(err))
			})
		case op < 65:
			key, tok := lease()
			if rng.IntN(2) == 0 {
				tok = AllLeases
			}
			step(n, fmt.Sprint("force ", key, tok), func(r *replica) string { return fmt.Sprint(r.tb.ForceRelease([]byte(key), tok)) })
		case op < 70:
			key, tok := lease()
			step(n, fmt.Sprint("verify ", key, tok), func(r *replica) string { return fmt.Sprint(r.tb.Verify([]byte(key), tok)) })
		case op < 72:
			floor, _ := leader.tb.TokenState()
			floor += uint64(rng.IntN(3))
			if rng.IntN(4) == 0 {
				floor += 1 << 20
			}
			step(n, fmt.Sprint("raise floor ", floor), func(r *replica) string {
				r.tb.RaiseTokenFloor(floor)
				f, _ := r.tb.TokenState()
				return fmt.Sprint(f)
			})
		case op < 82:
			// Each replica's clock goes its own way.
			d := time.Duration(rng.IntN(3000)) * time.Millisecond
			for k, r := range reps {
				r.clock.Advance(d * time.Duration(1+2*k))
			}
		case op < 92:
			items := leader.tb.CollectDue(1 + rng.IntN(8))
			if rng.IntN(5) == 0 {
				items = append(items, lastItems...) // stale, or a duplicate
			}
			lastItems = items
			step(n, fmt.Sprintf("fire %+v", items), func(r *replica) string { return fmt.Sprint(r.tb.Fire(items)) })
		default:
			key := pick(keys)
			step(n, "status "+key, func(r *replica) string {
				hnext, hs := r.tb.Holders([]byte(key), 0, 3, nil)
				for k := range hs {
					hs[k].TTL = 0
				}
				return normalStatus(r.tb.Status([]byte(key))) + fmt.Sprintf(" holders %d %+v", hnext, hs)
			})
		}
	}
	want := normalDump(leader.tb)
	wantStats := leader.tb.Stats()
	for _, r := range reps[1:] {
		if got := normalDump(r.tb); !slices.Equal(got, want) {
			t.Fatalf("at the end, %s dumps\n%s\nbut the leader\n%s", r.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if st := r.tb.Stats(); st.Locks != wantStats.Locks || st.Held != wantStats.Held {
			t.Fatalf("%s has %d locks, %d held; the leader %d, %d", r.name, st.Locks, st.Held, wantStats.Locks, wantStats.Held)
		}
		for _, key := range keys {
			if got, want := r.sink.got[key], leader.sink.got[key]; !slices.Equal(got, want) {
				t.Fatalf("events of %q since the snapshot: %s saw\n%s\nthe leader\n%s", key, r.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
		f, c := r.tb.TokenState()
		if wf, wc := leader.tb.TokenState(); f != wf || !slices.Equal(c, wc) {
			t.Fatalf("%s's token state differs from the leader's", r.name)
		}
	}
	if wantStats.Expired == 0 || wantStats.Granted == 0 {
		t.Fatalf("the run expired %d and granted %d leases: it tests too little", wantStats.Expired, wantStats.Granted)
	}
	if len(leader.sink.got) == 0 {
		t.Fatal("no events since the snapshot")
	}
}

func newReplicatedTable(t testing.TB, mutate ...func(*Config)) (*Table, *ManualClock) {
	return newTestTable(t, append([]func(*Config){func(c *Config) { c.Replicated = true }}, mutate...)...)
}

func TestReplicatedNothingExpiresWithoutFire(t *testing.T) {
	tb, clock := newReplicatedTable(t, func(c *Config) { c.LockDelay = time.Second })
	if _, err := tb.Create([]byte("sem"), CreateOptions{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	excl := mustAcquire(t, tb, "x", time.Second, "")
	reader, _, _ := tb.Acquire(&Request{Key: []byte("rw"), TTL: time.Second, Mode: Shared})
	permit := mustAcquire(t, tb, "sem", time.Second, "")
	clock.Advance(72 * time.Hour)
	if n := tb.ExpireDue(); n != 0 {
		t.Fatalf("ExpireDue expired %d leases in replicated mode", n)
	}
	for _, l := range []struct {
		key   string
		token uint64
		mode  Mode
	}{{"x", excl, Exclusive}, {"rw", reader, Exclusive}, {"sem", permit, Exclusive}} {
		if !tb.Verify([]byte(l.key), l.token) {
			t.Fatalf("Verify(%s, %d) = false three days past its deadline, with no Fire", l.key, l.token)
		}
		mustNotAcquire(t, tb, l.key, time.Second, "")
		st, _ := tb.Status([]byte(l.key))
		if !st.Held || st.TTL != 0 || st.HoldersTotal != 1 || st.Holders[0].TTL != 0 {
			t.Fatalf("Status(%s) = %+v; want held, ttl 0", l.key, st)
		}
	}
	items := tb.CollectDue(10)
	if len(items) != 3 {
		t.Fatalf("CollectDue = %+v; want the three leases", items)
	}
	if n := tb.Fire(items); n != 3 {
		t.Fatalf("Fire = %d, want 3", n)
	}
	// Each lease is gone, into its lock-delay, which does not end by itself
	// either.
	clock.Advance(72 * time.Hour)
	for _, key := range []string{"x", "rw", "sem"} {
		if st, _ := tb.Status([]byte(key)); !st.Delayed || st.Held {
			t.Fatalf("Status(%s) after Fire = %+v; want in its lock-delay", key, st)
		}
		mustNotAcquire(t, tb, key, time.Second, "")
	}
	delays := tb.CollectDue(10)
	if len(delays) != 3 {
		t.Fatalf("CollectDue = %+v; want the three lock-delays", delays)
	}
	for _, d := range delays {
		if d.Kind != DueDelay || d.Token != map[string]uint64{"x": excl, "rw": reader, "sem": permit}[d.Key] {
			t.Fatalf("due item %+v; want a DueDelay with the expired lease's token", d)
		}
	}
	if n := tb.Fire(delays); n != 3 {
		t.Fatalf("Fire(delays) = %d, want 3", n)
	}
	for _, key := range []string{"x", "rw", "sem"} {
		mustAcquire(t, tb, key, time.Second, "")
	}
	if st := tb.Stats(); st.Expired != 3 || st.Delayed != 3 {
		t.Fatalf("stats %+v; want 3 expired, 3 delayed", st)
	}
}

// TestFireStartsLockDelayAtApply: a lock-delay begun by a late Fire runs
// its whole length from then, never less.
func TestFireStartsLockDelayAtApply(t *testing.T) {
	tb, clock := newReplicatedTable(t, func(c *Config) { c.LockDelay = 10 * time.Second })
	mustAcquire(t, tb, "x", time.Second, "")
	clock.Advance(time.Minute)
	tb.Fire(tb.CollectDue(1))
	if st, _ := tb.Status([]byte("x")); st.DelayLeft != 10*time.Second {
		t.Fatalf("delay left %s after a late Fire; want the whole 10s", st.DelayLeft)
	}
}

func TestCollectDueOncePerRetry(t *testing.T) {
	tb, clock := newReplicatedTable(t)
	if _, err := tb.Create([]byte("sem"), CreateOptions{Limit: 3}); err != nil {
		t.Fatal(err)
	}
	// Tokens are per slot: an item is named by its key and token.
	name := func(key string, token uint64) string { return fmt.Sprint(key, "/", token) }
	want := map[string]bool{}
	for _, key := range []string{"a", "b", "c"} {
		want[name(key, mustAcquire(t, tb, key, time.Second, ""))] = true
	}
	for range 3 {
		want[name("sem", mustAcquire(t, tb, "sem", 2*time.Second, ""))] = true
	}
	mustAcquire(t, tb, "d", time.Hour, "")
	if got := tb.CollectDue(10); len(got) != 0 {
		t.Fatalf("CollectDue before any deadline = %+v", got)
	}
	clock.Advance(3 * time.Second)
	collect := func(limit int) []Due {
		got := tb.CollectDue(limit)
		if len(got) > limit {
			t.Fatalf("CollectDue(%d) returned %d items", limit, len(got))
		}
		return got
	}
	first := append(collect(2), collect(2)...)
	first = append(first, collect(10)...)
	got := map[string]bool{}
	for _, d := range first {
		if n := name(d.Key, d.Token); d.Kind != DueLease || got[n] || !want[n] {
			t.Fatalf("CollectDue item %+v: returned twice, or not due", d)
		}
		got[name(d.Key, d.Token)] = true
	}
	if len(got) != len(want) {
		t.Fatalf("CollectDue returned %v; want %v", got, want)
	}
	if again := collect(10); len(again) != 0 {
		t.Fatalf("CollectDue within DueRetry returned %+v again", again)
	}
	// The proposal of the first item was applied; the rest were lost.
	if n := tb.Fire(first[:1]); n != 1 {
		t.Fatalf("Fire = %d", n)
	}
	clock.Advance(DueRetry - time.Millisecond)
	if again := collect(10); len(again) != 0 {
		t.Fatalf("CollectDue just before DueRetry returned %+v", again)
	}
	clock.Advance(2 * time.Millisecond)
	retried := collect(10)
	if len(retried) != len(want)-1 {
		t.Fatalf("CollectDue after DueRetry = %+v; want the %d not fired", retried, len(want)-1)
	}
	for _, d := range retried {
		if d == first[0] {
			t.Fatalf("CollectDue returned %+v, which was fired", d)
		}
	}
}

// TestCollectDueBoundsAHolderSet: a semaphore whose permits are all due
// fills a small reply, and the rest come in the next calls, each once.
func TestCollectDueBoundsAHolderSet(t *testing.T) {
	tb, clock := newReplicatedTable(t)
	if _, err := tb.Create([]byte("sem"), CreateOptions{Limit: 50}); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		mustAcquire(t, tb, "sem", time.Second, "")
	}
	clock.Advance(2 * time.Second)
	seen := map[uint64]bool{}
	for range 10 {
		got := tb.CollectDue(7)
		if len(got) > 7 {
			t.Fatalf("CollectDue(7) returned %d", len(got))
		}
		for _, d := range got {
			if seen[d.Token] {
				t.Fatalf("%+v returned twice within DueRetry", d)
			}
			seen[d.Token] = true
		}
	}
	if len(seen) != 50 {
		t.Fatalf("collected %d permits of 50", len(seen))
	}
}

func TestFireStaleItemsEndNothing(t *testing.T) {
	tb, clock := newReplicatedTable(t)
	k := []byte("x")
	mustAcquire(t, tb, "x", time.Second, "")
	clock.Advance(2 * time.Second)
	stale := tb.CollectDue(10)
	if len(stale) != 1 {
		t.Fatalf("CollectDue = %+v", stale)
	}
	// Released and granted again before the proposal was applied.
	if !tb.Release(k, stale[0].Token) {
		t.Fatal("release failed")
	}
	again := mustAcquire(t, tb, "x", time.Second, "")
	if n := tb.Fire(stale); n != 0 || !tb.Verify(k, again) {
		t.Fatalf("Fire of a released lease's token = %d, new lease live %v; want 0, true", n, tb.Verify(k, again))
	}
	// Renewed before the proposal was applied: the renewal moved its
	// deadline, and the leader saw it due before that.
	clock.Advance(2 * time.Second)
	due := tb.CollectDue(10)
	if ok, _ := tb.Extend(k, again, time.Second); !ok || len(due) != 1 || due[0].Renewals != 0 {
		t.Fatalf("extend %v, due %+v", ok, due)
	}
	if n := tb.Fire(due); n != 0 || !tb.Verify(k, again) {
		t.Fatalf("Fire of a lease renewed since = %d; want 0", n)
	}
	// The same for a reader, renewed by its owner's repeated acquire.
	rd := Request{Key: []byte("rw"), TTL: time.Second, Owner: []byte("r"), Mode: Shared}
	tok, _, _ := tb.Acquire(&rd)
	clock.Advance(2 * time.Second)
	due = slices.DeleteFunc(tb.CollectDue(10), func(d Due) bool { return d.Key != "rw" })
	if again, ok, _ := tb.Acquire(&rd); !ok || again != tok || len(due) != 1 {
		t.Fatal("owner's renewal failed")
	}
	if n := tb.Fire(due); n != 0 || !tb.Verify([]byte("rw"), tok) {
		t.Fatalf("Fire of a reader renewed since = %d; want 0", n)
	}
	// A DueDelay for a lock not in its delay, and an unknown key.
	if n := tb.Fire([]Due{{Kind: DueDelay, Key: "x", Token: again}, {Kind: DueLease, Key: "nope", Token: 1}, {Kind: DueLease, Key: ""}}); n != 0 {
		t.Fatalf("Fire of items that match nothing = %d", n)
	}
}

func TestReplicatedTokens(t *testing.T) {
	tb, _ := newReplicatedTable(t)
	// Keys of one slot share a counter; another slot counts apart.
	same := []string{"{s}1", "{s}2"}
	if keyslot.Of([]byte("{s}1")) == keyslot.Of([]byte("other")) {
		t.Fatal("test keys share a slot")
	}
	a := mustAcquire(t, tb, same[0], time.Second, "")
	b := mustAcquire(t, tb, same[1], time.Second, "")
	o := mustAcquire(t, tb, "other", time.Second, "")
	if a != 1001 || b != 1002 || o != 1001 {
		t.Fatalf("tokens %d %d %d; want 1001 1002 (one slot) and 1001 (another)", a, b, o)
	}
	// Through release, Delete and re-Create, a lock's tokens only grow.
	tb.Release([]byte("other"), o)
	if _, err := tb.Create([]byte("other"), CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := tb.Delete([]byte("other")); !ok || err != nil {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if o2 := mustAcquire(t, tb, "other", time.Second, ""); o2 != o+1 {
		t.Fatalf("token after Delete %d; want %d", o2, o+1)
	}
	// The floor: every later token is above it; a lower floor changes nothing.
	tb.RaiseTokenFloor(5000)
	tb.RaiseTokenFloor(10)
	if c := mustAcquire(t, tb, "c", time.Second, ""); c != 5001 {
		t.Fatalf("token after RaiseTokenFloor(5000) = %d; want 5001", c)
	}
	tb.Release([]byte(same[0]), a)
	if a2 := mustAcquire(t, tb, same[0], time.Second, ""); a2 != 5001 {
		t.Fatalf("token above the floor = %d; want 5001", a2)
	}
	if s3 := mustAcquire(t, tb, "{s}3", time.Second, ""); s3 != 5002 {
		t.Fatalf("next token of the slot = %d; want 5002", s3)
	}
	floor, counters := tb.TokenState()
	if floor != 5000 || len(counters) != keyslot.Slots || counters[keyslot.Of([]byte("{s}"))] != 5002 {
		t.Fatalf("TokenState = %d, slot counter %d", floor, counters[keyslot.Of([]byte("{s}"))])
	}
	// A restored table goes on from there, though the lock is not in it.
	tb2, _ := newReplicatedTable(t, func(c *Config) { c.Shards = 16 })
	if err := tb2.RestoreTokenState(floor, counters); err != nil {
		t.Fatal(err)
	}
	if s4 := mustAcquire(t, tb2, "{s}4", time.Second, ""); s4 != 5003 {
		t.Fatalf("first token after RestoreTokenState = %d; want 5003", s4)
	}
	if err := tb2.RestoreTokenState(floor, counters[:10]); !errors.Is(err, ErrTokenState) {
		t.Fatalf("RestoreTokenState of 10 counters = %v", err)
	}
}

// TestReplicatedRestoreExpiresNothing: a dump whose deadlines have passed
// on the restoring table's clock comes back with every lease live.
func TestReplicatedRestoreExpiresNothing(t *testing.T) {
	tb, _ := newReplicatedTable(t, func(c *Config) { c.LockDelay = time.Second })
	x := mustAcquire(t, tb, "x", time.Second, "o")
	ok, _ := tb.Extend([]byte("x"), x, 2*time.Second)
	r, _, _ := tb.Acquire(&Request{Key: []byte("rw"), TTL: time.Second, Mode: Shared})
	if !ok {
		t.Fatal("extend failed")
	}
	tb2, clock2 := newReplicatedTable(t)
	clock2.Advance(24 * time.Hour)
	for _, st := range dumpStates(tb) {
		if err := tb2.Restore(&st); err != nil {
			t.Fatal(err)
		}
	}
	if !tb2.Verify([]byte("x"), x) || !tb2.Verify([]byte("rw"), r) {
		t.Fatal("Restore expired a lease in replicated mode")
	}
	// The renewal count came along: a stale item from before the EXTEND
	// still ends nothing, a current one does.
	if n := tb2.Fire([]Due{{Kind: DueLease, Key: "x", Token: x}}); n != 0 {
		t.Fatalf("Fire of a pre-renewal item after Restore = %d", n)
	}
	if n := tb2.Fire([]Due{{Kind: DueLease, Key: "x", Token: x, Renewals: 1}}); n != 1 {
		t.Fatalf("Fire after Restore = %d", n)
	}
}

func TestReplicatedTakesNoJournal(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Replicated, cfg.Journal = true, &journalRecorder{}
	if err := cfg.Validate(); err == nil {
		t.Fatal("Validate accepted a replicated table with a journal")
	}
}

// TestDefaultModeIgnoresCollectDue: the default mode's table expires by
// itself, and CollectDue has nothing for it.
func TestDefaultModeIgnoresCollectDue(t *testing.T) {
	tb, clock := newTestTable(t)
	mustAcquire(t, tb, "x", time.Second, "")
	clock.Advance(2 * time.Second)
	if got := tb.CollectDue(10); got != nil {
		t.Fatalf("CollectDue in the default mode = %+v", got)
	}
	mustAcquire(t, tb, "x", time.Second, "")
	if _, c := tb.TokenState(); c != nil {
		t.Fatal("TokenState returned slot counters in the default mode")
	}
}

// TestCollectDueWhileApplying: the leader's ticker collects while its state
// machine applies (run with -race).
func TestCollectDueWhileApplying(t *testing.T) {
	tb, clock := newReplicatedTable(t, func(c *Config) { c.LockDelay = time.Millisecond })
	items := make(chan []Due, 64)
	done := make(chan struct{})
	go func() {
		defer close(items)
		for {
			select {
			case <-done:
				return
			default:
			}
			if got := tb.CollectDue(16); len(got) > 0 {
				select {
				case items <- got:
				case <-done:
					return
				}
			}
		}
	}()
	fired := 0
	for n := range 2000 {
		tb.Acquire(&Request{Key: []byte(fmt.Sprint("k", n%50)), TTL: 10 * time.Millisecond, Owner: []byte(fmt.Sprint("o", n%7))})
		clock.Advance(time.Millisecond)
		select {
		case got := <-items:
			fired += tb.Fire(got)
		default:
		}
	}
	close(done)
	for got := range items {
		fired += tb.Fire(got)
	}
	// Whatever was collected and dropped comes back after DueRetry.
	clock.Advance(DueRetry + time.Second)
	for got := tb.CollectDue(16); len(got) > 0; got = tb.CollectDue(16) {
		fired += tb.Fire(got)
	}
	if st := tb.Stats(); st.Held != 0 || fired == 0 {
		t.Fatalf("%d leases still held after every due one was fired (%d fired)", st.Held, fired)
	}
}

// TestFireHandsOff: a lease ended by Fire goes to the head of the queue,
// as after Release, and its token is above the expired one.
func TestFireHandsOff(t *testing.T) {
	tb, clock := newReplicatedTable(t)
	old := mustAcquire(t, tb, "x", time.Second, "")
	var got uint64
	w := &Wait{Notify: func(tok uint64) { got = tok }}
	if _, ok, err := tb.AcquireWait(&Request{Key: []byte("x"), TTL: time.Second}, w); ok || err != nil {
		t.Fatalf("AcquireWait = %v, %v; want queued", ok, err)
	}
	clock.Advance(time.Hour)
	if got != 0 {
		t.Fatal("the waiter was granted before Fire")
	}
	if n := tb.Fire(tb.CollectDue(10)); n != 1 || got != old+1 || !tb.Verify([]byte("x"), got) {
		t.Fatalf("Fire = %d, waiter granted %d; want 1, %d", n, got, old+1)
	}
	if st := tb.Stats(); st.Expired != 1 || st.WaitGrants != 1 {
		t.Fatalf("stats %+v; want 1 expired, 1 wait grant", st)
	}
}
