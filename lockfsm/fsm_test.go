package lockfsm

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/locker"
)

// replica is an FSM with its own clock and shard count, as on one node.
type replica struct {
	fsm   *FSM
	clock *locker.ManualClock
	index uint64
	// ended has the OnGrant calls, "waiter key token", in order.
	ended []string
}

func newReplica(t *testing.T, shards int) *replica {
	t.Helper()
	clock := &locker.ManualClock{}
	cfg := locker.DefaultConfig()
	cfg.Shards, cfg.Clock, cfg.FirstToken = shards, clock, 1000
	r := &replica{clock: clock}
	f, err := New(cfg, OnGrant(func(waiter, key []byte, tokens []uint64) {
		r.ended = append(r.ended, fmt.Sprintf("%s %s %s", waiter, key, tokensString(tokens)))
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Table().Close() })
	r.fsm = f
	return r
}

// apply applies one entry of cmds and returns its results.
func (r *replica) apply(t *testing.T, cmds ...Command) []Result {
	t.Helper()
	return r.applyTagged(t, Tag{}, cmds...)
}

// applyTagged applies one entry of cmds with tag and returns its results.
func (r *replica) applyTagged(t *testing.T, tag Tag, cmds ...Command) []Result {
	t.Helper()
	r.index++
	out := r.fsm.Apply(&raft.Log{Index: r.index, Term: 1, Type: raft.LogCommand, Data: AppendTaggedEntry(nil, tag, cmds)})
	res, ok := out.([]Result)
	if !ok {
		t.Fatalf("Apply returned %T %v", out, out)
	}
	return res
}

// waiterIDs hands out waiter ids and remembers the latest, for cancels.
type waiterIDs struct {
	next   int
	recent []string
}

func (w *waiterIDs) new() []byte {
	w.next++
	id := fmt.Sprintf("n%d/c%d/%d", w.next%3, w.next%7, w.next)
	w.recent = append(w.recent, id)
	if len(w.recent) > 16 {
		w.recent = w.recent[1:]
	}
	return []byte(id)
}

func (w *waiterIDs) any(rng *rand.Rand) []byte {
	if len(w.recent) == 0 {
		return []byte("nobody")
	}
	return []byte(w.recent[rng.IntN(len(w.recent))])
}

// randomCommand is one command of a random workload over a few keys, so
// that locks are contended, shared, semaphores, renewed and fired, and
// waited for.
// sortedDue puts due in a fixed order: CollectDue's follows the table's
// map iteration, and the random workload built from it must be the same in
// every run for a failure to be replayable.
func sortedDue(due []locker.Due) []locker.Due {
	slices.SortFunc(due, func(a, b locker.Due) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Token, b.Token))
	})
	return due
}

func randomCommand(rng *rand.Rand, term uint64, due []locker.Due, tokens []uint64, waiters *waiterIDs) Command {
	token := uint64(1)
	if len(tokens) > 0 {
		token = tokens[rng.IntN(len(tokens))]
	}
	keys := []string{"a", "b", "c", "sem", "rw"}
	key := []byte(keys[rng.IntN(len(keys))])
	owners := [][]byte{nil, []byte("alice\x00w1"), []byte("bob\x00w1")}
	scopes := [][]byte{nil, []byte("alice\x00"), []byte("bob\x00")}
	switch n := rng.IntN(110); {
	case n >= 100:
		// The Redis lock libraries' operations, by owner.
		owner := owners[rng.IntN(3)]
		switch n {
		case 100, 101, 102:
			return Command{Op: OpAcquireNew, Key: key, TTL: time.Duration(1+rng.IntN(3)) * time.Second, Owner: owner}
		case 103:
			return Command{Op: OpAcquireAllNew, Keys: [][]byte{[]byte("b"), []byte("c")}, TTL: 2 * time.Second, Owner: owner}
		case 104, 105:
			return Command{Op: OpReleaseOwned, Key: key, Owner: owner, Scope: scopes[rng.IntN(3)]}
		case 106:
			return Command{Op: OpExtendAllOwned, Keys: [][]byte{[]byte("c"), []byte("b"), []byte("a")}, Owner: owner, TTL: 3 * time.Second}
		default:
			return Command{Op: OpExtendOwned, Key: key, Owner: owner, Scope: scopes[rng.IntN(3)], TTL: time.Duration(1+rng.IntN(3)) * time.Second, AddTTL: n == 109}
		}
	case n < 5:
		return Command{Op: OpCreate, Key: []byte("sem"), Options: locker.CreateOptions{Limit: 2, LockDelay: time.Second, LockDelaySet: true}}
	case n < 20:
		return Command{Op: OpWait, Key: key, TTL: time.Duration(1+rng.IntN(3)) * time.Second, Owner: owners[rng.IntN(3)], Shared: string(key) == "rw" && rng.IntN(2) == 0,
			Priority: rng.IntN(3) - 1, Waiter: waiters.new(), Wait: time.Duration(1+rng.IntN(4)) * time.Second}
	case n < 25:
		return Command{Op: OpCancelWait, Waiter: waiters.any(rng)}
	case n < 40:
		return Command{Op: OpAcquire, Key: key, TTL: time.Duration(1+rng.IntN(3)) * time.Second, Owner: owners[rng.IntN(3)], Shared: string(key) == "rw" && rng.IntN(2) == 0}
	case n < 44:
		return Command{Op: OpAcquireAll, Keys: [][]byte{[]byte("a"), []byte("b")}, TTL: 2 * time.Second, Owner: owners[rng.IntN(3)]}
	case n < 48:
		var all [][]byte
		for _, j := range rng.Perm(3)[:2+rng.IntN(2)] {
			all = append(all, []byte(keys[j]))
		}
		return Command{Op: OpWaitAll, Keys: all, TTL: time.Duration(1+rng.IntN(3)) * time.Second, Owner: owners[rng.IntN(3)],
			Priority: rng.IntN(3) - 1, Waiter: waiters.new(), Wait: time.Duration(1+rng.IntN(4)) * time.Second}
	case n < 65:
		return Command{Op: OpRelease, Key: key, Token: token, Scope: scopes[rng.IntN(3)]}
	case n < 75:
		return Command{Op: OpExtend, Key: key, Token: token, TTL: 5 * time.Second}
	case n < 78:
		return Command{Op: OpDelete, Key: key}
	case n < 80:
		return Command{Op: OpForceRelease, Key: key}
	case n < 81:
		return Command{Op: OpTerm, Term: term + 1, Floor: 1000 + uint64(rng.IntN(3000))}
	case n < 82:
		return Command{Op: OpGrace, TTL: time.Duration(1+rng.IntN(3)) * time.Second}
	default:
		return Command{Op: OpFire, Term: term, Due: due}
	}
}

// TestReplicasAgree: replicas with different shard counts and clocks that
// apply the same entries give the same results and hold the same locks,
// the leader's clock alone deciding expiry (through OpFire); a replica
// restored from one's snapshot then goes on in step with them. Some entries
// are tagged by a few clients, and sent again: as a retry of the client's
// last batch (answered with its results, applied once) or as a stale one
// (refused); some clients end their sessions.
func TestReplicasAgree(t *testing.T) {
	leader, follower := newReplica(t, 64), newReplica(t, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	var term uint64
	var tokens []uint64 // the latest granted, for RELEASE and EXTEND to name
	var granted, fired, retried, stale, handedOff, waitsEnded, multiHandedOff int
	waiters := &waiterIDs{}
	type sent struct {
		tag     Tag
		cmds    []Command
		results []byte // as first answered
	}
	clients := [][]byte{[]byte("n1/c1"), []byte("n2/c7"), []byte("n3/c2")}
	seqs := map[string]uint64{}
	var history []sent // tagged entries sent, oldest first
	step := func(rs ...*replica) {
		t.Helper()
		var tag Tag
		var entry []Command
		var again *sent
		switch n := rng.IntN(10); {
		case n < 2 && len(history) > 0:
			again = &history[len(history)-1-rng.IntN(min(len(history), 4))]
			tag, entry = again.tag, again.cmds
		case n < 6:
			c := clients[rng.IntN(len(clients))]
			seqs[string(c)]++
			tag = Tag{Client: c, Seq: seqs[string(c)]}
			fallthrough
		default:
			for range 1 + rng.IntN(8) {
				entry = append(entry, randomCommand(rng, term, sortedDue(leader.fsm.CollectDue(1<<20)), tokens, waiters))
			}
			if rng.IntN(50) == 0 {
				entry = append(entry, Command{Op: OpEndSession, Client: clients[rng.IntN(len(clients))]})
			}
		}
		var known uint64 // the client's Seq before, 0 for none
		if s := leader.fsm.sessions.get(tag.Client); s != nil {
			known = s.seq
		}
		var first []Result
		var firstBytes []byte
		var firstEnded []string
		for n, r := range rs {
			before := len(r.ended)
			got := r.applyTagged(t, tag, entry...)
			enc := AppendResults(nil, got)
			ended := r.ended[before:]
			if n == 0 {
				first, firstBytes, firstEnded = got, enc, ended
			} else if !bytes.Equal(enc, firstBytes) {
				t.Fatalf("replica %d's results %+v differ from the leader's %+v for %+v", n, got, first, entry)
			} else if !slices.Equal(ended, firstEnded) {
				t.Fatalf("replica %d's waits ended %q, the leader's %q, for %+v", n, ended, firstEnded, entry)
			}
		}
		for _, e := range firstEnded {
			if strings.HasSuffix(e, " 0") {
				waitsEnded++
			} else {
				handedOff++
			}
			if f := strings.Fields(e); len(f) == 3 {
				for _, s := range strings.Split(f[2], ",") {
					if tok, _ := strconv.ParseUint(s, 10, 64); tok != 0 {
						tokens = append(tokens, tok)
					}
				}
				if strings.Contains(f[2], ",") {
					multiHandedOff++
				}
			}
		}
		if again != nil {
			switch {
			case known == tag.Seq:
				retried++
				if !bytes.Equal(firstBytes, again.results) {
					t.Fatalf("a retry of %+v answered %+v, not what it first did", tag, first)
				}
				return // nothing was applied
			case known > tag.Seq:
				stale++
				for _, r := range first {
					if r.Err != ErrStaleRequest {
						t.Fatalf("a stale batch %+v (the client is at %d) answered %+v", tag, known, first)
					}
				}
				return
			}
			// The session was forgotten (ended): the batch applied again,
			// and a retry now answers with these results.
			again.results = firstBytes
		}
		if len(tag.Client) > 0 && again == nil {
			history = append(history, sent{tag, entry, firstBytes})
		}
		for i, r := range first {
			switch {
			case entry[i].Op == OpFire:
				fired += r.N
			case r.Granted && (entry[i].Op == OpAcquire || entry[i].Op == OpAcquireAll || entry[i].Op == OpWaitAll):
				granted++
			}
			if r.Token != 0 {
				tokens = append(tokens, r.Token)
			}
			tokens = append(tokens, r.Tokens...)
		}
		if len(tokens) > 32 {
			tokens = tokens[len(tokens)-32:]
		}
		term = leader.fsm.Term()
		leader.clock.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
		follower.clock.Advance(time.Duration(rng.IntN(2000)) * time.Millisecond) // a clock that runs fast decides nothing
	}
	for range 2500 {
		step(leader, follower)
	}
	if !bytes.Equal(dump(t, leader), dump(t, follower)) {
		t.Fatal("the replicas hold different locks")
	}
	if granted < 100 || fired < 50 || retried < 50 || stale < 50 || handedOff < 50 || waitsEnded < 20 || multiHandedOff < 10 {
		t.Fatalf("the workload granted %d leases, fired %d expiries, answered %d retries and %d stale batches, handed %d locks to waiters (%d MACQUIRE waits) and ended %d waits ungranted: too few to show anything",
			granted, fired, retried, stale, handedOff, multiHandedOff, waitsEnded)
	}
	t.Logf("granted %d, fired %d, retries %d, stale %d, handed off %d (%d MACQUIRE waits), waits ended %d", granted, fired, retried, stale, handedOff, multiHandedOff, waitsEnded)

	restored := newReplica(t, 8)
	sink := &memSink{}
	snap, err := follower.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if err := restored.fsm.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	restored.index = follower.index
	if restored.fsm.Term() != follower.fsm.Term() {
		t.Fatalf("restored term %d, want %d", restored.fsm.Term(), follower.fsm.Term())
	}
	if !bytes.Equal(dump(t, restored), dump(t, follower)) {
		t.Fatal("the restored replica holds different locks or sessions")
	}
	for range 1000 {
		step(leader, follower, restored)
	}
	if !bytes.Equal(dump(t, leader), dump(t, restored)) {
		t.Fatal("the restored replica holds different locks")
	}
}

// dump is a replica's locks as text, without the soft deadlines (which are
// each replica's own), in key order, and its sessions.
func dump(t *testing.T, r *replica) []byte {
	t.Helper()
	var lines []string
	r.fsm.Table().Dump(func(st *locker.LockState) {
		s := fmt.Sprintf("%q created=%v opts=%+v last=%d", st.Key, st.Created, st.Options, st.LastToken)
		for _, l := range st.Leases {
			s += fmt.Sprintf(" [%d %q shared=%v delayed=%v]", l.Token, l.Owner, l.Shared, l.DelayedUntil != 0)
		}
		lines = append(lines, s)
	})
	slices.Sort(lines)
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	floor, counters := r.fsm.Table().TokenState()
	fmt.Fprintf(&b, "floor %d counters %v\n", floor, nonZero(counters))
	ws := r.fsm.waits.Load()
	var keys []string
	for _, w := range ws.queued {
		keys = append(keys, string(w.key))
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		fmt.Fprintf(&b, "queue %q:", k)
		for _, q := range r.fsm.Table().Queue([]byte(k)) {
			w := ws.byHandle[q.Wait]
			fmt.Fprintf(&b, " [%s #%d %q ttl=%s prio=%d %s]", w.waiter, w.number, q.Owner, q.TTL, q.Priority, q.Mode)
			if w.multi != nil {
				st, _ := w.multi.State()
				fmt.Fprintf(&b, "(all %q order %v took %v ttl=%s hold=%s)", st.Keys, st.Order, st.Tokens, st.TTL, st.Hold)
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "waits %d queued %d\n", ws.number, len(ws.queued))
	ws.grants.each(func(it *item[grant]) { fmt.Fprintf(&b, "grant %s %q %v\n", it.key, it.val.keys, it.val.tokens) })
	r.fsm.sessions.each(func(client string, s *session) {
		fmt.Fprintf(&b, "session %q seq %d last %d results %x\n", client, s.seq, s.last, AppendResults(nil, s.results))
	})
	return b.Bytes()
}

func nonZero(cs []uint64) map[int]uint64 {
	m := map[int]uint64{}
	for i, c := range cs {
		if c != 0 {
			m[i] = c
		}
	}
	return m
}

// TestFireOnlyInItsTerm: a FIRE proposed in an older term than the last
// OpTerm applied ends nothing.
func TestFireOnlyInItsTerm(t *testing.T) {
	r := newReplica(t, 4)
	r.apply(t, Command{Op: OpTerm, Term: 3, Floor: 1})
	res := r.apply(t, Command{Op: OpAcquire, Key: []byte("k"), TTL: time.Second})
	if !res[0].Granted {
		t.Fatal("not granted")
	}
	tok := res[0].Token
	r.clock.Advance(2 * time.Second)
	due := r.fsm.Table().CollectDue(8)
	if len(due) != 1 || due[0].Token != tok {
		t.Fatalf("CollectDue = %+v, want the lease %d", due, tok)
	}
	r.apply(t, Command{Op: OpTerm, Term: 4, Floor: 1})
	if got := r.apply(t, Command{Op: OpFire, Term: 3, Due: due}); got[0].N != 0 || !r.fsm.Table().Verify([]byte("k"), tok) {
		t.Fatalf("a FIRE of term 3 after term 4 began ended %d leases", got[0].N)
	}
	if got := r.apply(t, Command{Op: OpFire, Term: 4, Due: due}); got[0].N != 1 || r.fsm.Table().Verify([]byte("k"), tok) {
		t.Fatalf("a FIRE of the current term ended %d leases, want 1", got[0].N)
	}
}

// TestApplyRefusesBadEntry: a malformed entry is refused the same way on
// every replica, and changes nothing.
func TestApplyRefusesBadEntry(t *testing.T) {
	r := newReplica(t, 4)
	out := r.fsm.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{9, 9, 9}})
	if err, ok := out.(error); !ok || err == nil {
		t.Fatalf("Apply of garbage = %v, want an error", out)
	}
	if r.fsm.Apply(&raft.Log{Index: 2, Type: raft.LogNoop}) != nil {
		t.Fatal("a no-op entry has a response")
	}
}

type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

// tokensString is OnGrant's tokens as the tests name them: "0" for none,
// else the tokens joined by commas.
func tokensString(tokens []uint64) string {
	if tokens == nil {
		return "0"
	}
	s := make([]string, len(tokens))
	for j, tok := range tokens {
		s[j] = strconv.FormatUint(tok, 10)
	}
	return strings.Join(s, ",")
}
