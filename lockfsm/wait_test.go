package lockfsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// waitCmd is an OpWait of waiter for key.
func waitCmd(key, waiter string, priority int) Command {
	return Command{Op: OpWait, Key: []byte(key), TTL: 10 * time.Second, Waiter: []byte(waiter), Priority: priority, Wait: 5 * time.Second}
}

// mustQueue applies cmd, an OpWait, and fails unless it was queued.
func (r *replica) mustQueue(t *testing.T, cmd Command) {
	t.Helper()
	if res := r.apply(t, cmd); !res[0].Queued || res[0].Granted || res[0].Err != nil {
		t.Fatalf("WAIT %s: %+v, want queued", cmd.Waiter, res[0])
	}
}

// endedSince returns the OnGrant calls since the n-th.
func (r *replica) endedSince(n int) []string { return slices.Clone(r.ended[n:]) }

// acquired applies an ACQUIRE of key and returns its token.
func (r *replica) acquired(t *testing.T, key string, ttl time.Duration) uint64 {
	t.Helper()
	res := r.apply(t, Command{Op: OpAcquire, Key: []byte(key), TTL: ttl})
	if !res[0].Granted {
		t.Fatalf("ACQUIRE %s: %+v", key, res[0])
	}
	return res[0].Token
}

// TestWaitOrder: waiters are served by priority, then in log order, each
// in the apply of the RELEASE that frees the lock, with a token above the
// last; a WAIT of a free lock is granted at once.
func TestWaitOrder(t *testing.T) {
	r := newReplica(t, 4)
	if res := r.apply(t, waitCmd("free", "w0", 0)); !res[0].Granted || res[0].Queued {
		t.Fatalf("WAIT of a free lock: %+v", res[0])
	}
	tok := r.acquired(t, "k", time.Second)
	for _, w := range []struct {
		id       string
		priority int
	}{{"a", 0}, {"b", 0}, {"urgent", 5}, {"c", 0}, {"urgent2", 5}, {"low", -1}} {
		r.mustQueue(t, waitCmd("k", w.id, w.priority))
	}
	var order []string
	for range 6 {
		n := len(r.ended)
		if res := r.apply(t, Command{Op: OpRelease, Key: []byte("k"), Token: tok}); !res[0].Granted {
			t.Fatalf("RELEASE %d: %+v", tok, res[0])
		}
		ended := r.endedSince(n)
		if len(ended) != 1 {
			t.Fatalf("a release ended %q", ended)
		}
		var id string
		var next uint64
		fmt.Sscanf(ended[0], "%s k %d", &id, &next)
		if next <= tok || !r.fsm.Table().Verify([]byte("k"), next) {
			t.Fatalf("%s was handed token %d after %d", id, next, tok)
		}
		order, tok = append(order, id), next
	}
	if want := []string{"urgent", "urgent2", "a", "b", "c", "low"}; !slices.Equal(order, want) {
		t.Fatalf("served %v, want %v", order, want)
	}
}

// TestWaitHandOffOnExpiry: a lock is handed to its waiter when the leader's
// OpFire expires the lease, and, for a lock with a lock-delay, when the
// OpFire of the delay's end applies, never on a replica's clock alone.
func TestWaitHandOffOnExpiry(t *testing.T) {
	r := newReplica(t, 4)
	r.apply(t, Command{Op: OpTerm, Term: 1, Floor: 1})
	r.apply(t, Command{Op: OpCreate, Key: []byte("d"), Options: locker.CreateOptions{LockDelay: 2 * time.Second, LockDelaySet: true}})
	for _, key := range []string{"k", "d"} {
		r.acquired(t, key, time.Second)
		r.mustQueue(t, waitCmd(key, "w-"+key, 0))
	}
	r.clock.Advance(1500 * time.Millisecond)
	r.apply(t, Command{Op: OpAcquire, Key: []byte("other"), TTL: time.Second}) // any entry
	if len(r.ended) != 0 {
		t.Fatalf("a clock past the deadline alone handed locks over: %q", r.ended)
	}
	fire := func() []string {
		t.Helper()
		n := len(r.ended)
		var due []locker.Due
		for _, d := range r.fsm.CollectDue(16) {
			if d.Key != "other" {
				due = append(due, d)
			}
		}
		r.apply(t, Command{Op: OpFire, Term: 1, Due: due})
		return r.endedSince(n)
	}
	got := fire()
	if len(got) != 1 || !bytes.HasPrefix([]byte(got[0]), []byte("w-k k ")) {
		t.Fatalf("the expiry through OpFire ended %q, want w-k granted", got)
	}
	if got := fire(); len(got) != 0 {
		t.Fatalf("the lock-delay ended early: %q", got)
	}
	r.clock.Advance(2 * time.Second)
	if got := fire(); len(got) != 1 || !bytes.HasPrefix([]byte(got[0]), []byte("w-d d ")) {
		t.Fatalf("the end of the lock-delay through OpFire ended %q, want w-d granted", got)
	}
}

// TestCancelWait: a queued wait that is cancelled leaves the queue and is
// never granted; one granted before its cancel applied gives its lease
// back, which goes to the next waiter.
func TestCancelWait(t *testing.T) {
	r := newReplica(t, 4)
	tok := r.acquired(t, "k", time.Second)
	r.mustQueue(t, waitCmd("k", "w1", 0))
	r.mustQueue(t, waitCmd("k", "w2", 0))
	r.mustQueue(t, waitCmd("k", "w3", 0))
	if res := r.apply(t, Command{Op: OpCancelWait, Waiter: []byte("w1")}); res[0].N != 0 || res[0].Granted {
		t.Fatalf("CANCEL of a queued wait: %+v", res[0])
	}
	if st, _ := r.fsm.Table().Status([]byte("k")); st.Waiters != 2 {
		t.Fatalf("%d waiters after a cancel, want 2", st.Waiters)
	}
	r.apply(t, Command{Op: OpRelease, Key: []byte("k"), Token: tok})
	if len(r.ended) != 1 || r.ended[0] != fmt.Sprintf("w2 k %d", tok+1) {
		t.Fatalf("after the release: %q, want w2 granted", r.ended)
	}
	// w2's client gave up before it heard of the grant.
	res := r.apply(t, Command{Op: OpCancelWait, Waiter: []byte("w2")})
	if res[0].N != 1 || res[0].Token != tok+1 || res[0].Granted {
		t.Fatalf("CANCEL after the grant: %+v, want its lease %d released", res[0], tok+1)
	}
	if r.fsm.Table().Verify([]byte("k"), tok+1) {
		t.Fatal("the cancelled grant's lease is live")
	}
	if len(r.ended) != 2 || r.ended[1] != fmt.Sprintf("w3 k %d", tok+2) {
		t.Fatalf("after the cancel: %q, want w3 granted", r.ended)
	}
	// Twice, or of an unknown waiter: nothing.
	for _, w := range []string{"w2", "w1", "nobody"} {
		if res := r.apply(t, Command{Op: OpCancelWait, Waiter: []byte(w)}); !reflect.DeepEqual(res[0], Result{}) {
			t.Fatalf("CANCEL %s again: %+v", w, res[0])
		}
	}
	if !r.fsm.Table().Verify([]byte("k"), tok+2) {
		t.Fatal("w3's lease was ended by a stale cancel")
	}
}

// TestWaitDeadline: a queued wait whose deadline passes on the leader's
// clock is ended by OpFire, in the term that collected it only: a deposed
// leader's decision does not apply.
func TestWaitDeadline(t *testing.T) {
	r := newReplica(t, 4)
	r.apply(t, Command{Op: OpTerm, Term: 3, Floor: 1})
	r.acquired(t, "k", time.Hour)
	r.mustQueue(t, waitCmd("k", "w1", 0)) // 5s
	r.clock.Advance(4 * time.Second)
	r.mustQueue(t, waitCmd("k", "w2", 0))
	if due := r.fsm.CollectDue(16); len(due) != 0 {
		t.Fatalf("due before any deadline: %+v", due)
	}
	r.clock.Advance(time.Second)
	due := r.fsm.CollectDue(16)
	if len(due) != 1 || due[0].Kind != locker.DueWait || due[0].Key != "w1" {
		t.Fatalf("CollectDue = %+v, want w1's wait", due)
	}
	if again := r.fsm.CollectDue(16); len(again) != 0 {
		t.Fatalf("reported again within the retry interval: %+v", again)
	}
	r.apply(t, Command{Op: OpTerm, Term: 4, Floor: 1})
	if res := r.apply(t, Command{Op: OpFire, Term: 3, Due: due}); res[0].N != 0 || len(r.ended) != 0 {
		t.Fatalf("a deposed leader's FIRE ended %d waits: %q", res[0].N, r.ended)
	}
	r.clock.Advance(locker.DueRetry)
	due = r.fsm.CollectDue(16)
	if len(due) != 1 || due[0].Key != "w1" {
		t.Fatalf("after the retry interval: %+v, want w1 again", due)
	}
	if res := r.apply(t, Command{Op: OpFire, Term: 4, Due: due}); res[0].N != 1 || !slices.Equal(r.ended, []string{"w1 k 0"}) {
		t.Fatalf("FIRE of the current term: %+v, ended %q; want w1 ended ungranted", res[0], r.ended)
	}
	if st, _ := r.fsm.Table().Status([]byte("k")); st.Waiters != 1 {
		t.Fatalf("%d waiters, want w2 alone", st.Waiters)
	}
	// A stale item (w1 again) changes nothing.
	if res := r.apply(t, Command{Op: OpFire, Term: 4, Due: due}); res[0].N != 0 {
		t.Fatalf("a stale wait item ended %d", res[0].N)
	}
}

// TestWaitSharedAndSemaphore: readers waiting behind a writer are granted
// together; a semaphore hands a freed permit to one waiter; an owner's
// second WAIT takes its first one's place, which ends with token 0.
func TestWaitSharedAndSemaphore(t *testing.T) {
	r := newReplica(t, 4)
	writer := r.acquired(t, "rw", time.Second)
	for _, id := range []string{"r1", "r2"} {
		c := waitCmd("rw", id, 0)
		c.Shared = true
		r.mustQueue(t, c)
	}
	r.mustQueue(t, waitCmd("rw", "w", 0))
	r.apply(t, Command{Op: OpRelease, Key: []byte("rw"), Token: writer})
	if want := []string{fmt.Sprintf("r1 rw %d", writer+1), fmt.Sprintf("r2 rw %d", writer+2)}; !slices.Equal(r.ended, want) {
		t.Fatalf("readers: %q, want %q", r.ended, want)
	}

	r.apply(t, Command{Op: OpCreate, Key: []byte("sem"), Options: locker.CreateOptions{Limit: 2}})
	p1, p2 := r.acquired(t, "sem", time.Second), r.acquired(t, "sem", time.Second)
	n := len(r.ended)
	own := waitCmd("sem", "s1", 0)
	own.Owner = []byte("alice")
	r.mustQueue(t, own)
	r.mustQueue(t, waitCmd("sem", "s2", 0))
	own.Waiter = []byte("s1-retry")
	r.mustQueue(t, own)
	if got := r.endedSince(n); !slices.Equal(got, []string{"s1 sem 0"}) {
		t.Fatalf("an owner's second WAIT: %q, want s1 superseded", got)
	}
	if res := r.apply(t, waitCmd("sem", "s2", 0)); !errors.Is(res[0].Err, ErrWaiterExists) {
		t.Fatalf("a WAIT with a queued waiter id: %+v", res[0])
	}
	n = len(r.ended)
	r.apply(t, Command{Op: OpRelease, Key: []byte("sem"), Token: p1})
	got := r.endedSince(n)
	if len(got) != 1 || !bytes.HasPrefix([]byte(got[0]), []byte("s1-retry sem ")) {
		t.Fatalf("a permit freed: %q, want s1-retry (in s1's place) granted", got)
	}
	r.apply(t, Command{Op: OpRelease, Key: []byte("sem"), Token: p2})
	if got := r.endedSince(n + 1); len(got) != 1 || !bytes.HasPrefix([]byte(got[0]), []byte("s2 sem ")) {
		t.Fatalf("another permit freed: %q, want s2 granted", got)
	}
}

// TestSnapshotMidQueue: a replica restored from a snapshot taken with
// waiters queued hands the lock to the same waiters, in the same order,
// with the same tokens, and times their waits out no earlier than their
// deadlines.
func TestSnapshotMidQueue(t *testing.T) {
	r := newReplica(t, 4)
	r.apply(t, Command{Op: OpTerm, Term: 1, Floor: 1})
	tok := r.acquired(t, "k", time.Hour)
	r.mustQueue(t, waitCmd("k", "a", 0))
	r.mustQueue(t, waitCmd("k", "b", 0))
	r.mustQueue(t, waitCmd("k", "urgent", 3))
	r.clock.Advance(2 * time.Second) // 3s left on each wait
	snap := snapshotBytes(t, r)
	restored := newReplica(t, 32)
	restored.clock.Advance(time.Hour) // another clock entirely
	restore(t, restored, snap)
	restored.index = r.index
	if !bytes.Equal(dump(t, restored), dump(t, r)) {
		t.Fatalf("restored:\n%s\nwant:\n%s", dump(t, restored), dump(t, r))
	}
	restored.clock.Advance(2900 * time.Millisecond)
	if due := restored.fsm.CollectDue(16); len(due) != 0 {
		t.Fatalf("the restored waits are due before their time: %+v", due)
	}
	restored.clock.Advance(100 * time.Millisecond)
	if due := restored.fsm.CollectDue(16); len(due) != 3 {
		t.Fatalf("the restored waits due at their time: %+v, want 3", due)
	}
	for _, rep := range []*replica{r, restored} {
		rep.apply(t, Command{Op: OpRelease, Key: []byte("k"), Token: tok})
		rep.apply(t, Command{Op: OpCancelWait, Waiter: []byte("urgent")})
		rep.apply(t, Command{Op: OpCancelWait, Waiter: []byte("a")})
	}
	want := []string{fmt.Sprintf("urgent k %d", tok+1), fmt.Sprintf("a k %d", tok+2), fmt.Sprintf("b k %d", tok+3)}
	if !slices.Equal(r.ended, want) || !slices.Equal(restored.ended, want) {
		t.Fatalf("hand-offs: %q and, restored, %q; want %q", r.ended, restored.ended, want)
	}
}

// TestCancelWaitAfterOwnersRetry: the log of chaos finding 1. A WAIT with an
// OWNER is granted from the queue while its client has given up on it; the
// client retries with the same OWNER (on another node) and gets the lease
// back; then the first wait's cancel comes. The cancel must not release the
// lease the retry answered, nor hand its permit to someone else; the cancel
// of a grant nobody claimed still gives it back. ACQUIRE, WAIT and MACQUIRE
// claim alike.
func TestCancelWaitAfterOwnersRetry(t *testing.T) {
	wait := Command{Op: OpWait, Key: []byte("sem"), TTL: time.Second, Owner: []byte("c0-53"), Waiter: []byte("retry"), Wait: time.Second}
	for _, retry := range []struct {
		name    string
		cmd     Command
		restore bool // the retry applies on a replica restored from a snapshot taken after the grant
	}{
		{"WAIT", wait, false},
		{"ACQUIRE", Command{Op: OpAcquire, Key: []byte("sem"), TTL: time.Second, Owner: []byte("c0-53")}, false},
		{"MACQUIRE", Command{Op: OpAcquireAll, Keys: [][]byte{[]byte("sem")}, TTL: time.Second, Owner: []byte("c0-53")}, false},
		{"WAIT after a restore", wait, true},
	} {
		t.Run(retry.name, func(t *testing.T) {
			r := newReplica(t, 4)
			r.apply(t, Command{Op: OpCreate, Key: []byte("sem"), Options: locker.CreateOptions{Limit: 2}})
			p1, p2 := r.acquired(t, "sem", time.Second), r.acquired(t, "sem", time.Second)
			first := waitCmd("sem", "first", 1)
			first.Owner = []byte("c0-53")
			r.mustQueue(t, first)
			r.apply(t, Command{Op: OpRelease, Key: []byte("sem"), Token: p1})
			if len(r.ended) != 1 || r.ended[0] != fmt.Sprintf("first sem %d", p2+1) {
				t.Fatalf("after a release: %q, want first granted %d", r.ended, p2+1)
			}
			granted := p2 + 1
			if retry.restore {
				snap := snapshotBytes(t, r)
				restored := newReplica(t, 8)
				restore(t, restored, snap)
				restored.index = r.index
				r = restored
			}
			res := r.apply(t, retry.cmd)
			tok := res[0].Token
			if retry.cmd.Op == OpAcquireAll && res[0].Granted {
				tok = res[0].Tokens[0]
			}
			if !res[0].Granted || tok != granted {
				t.Fatalf("the owner's retry: %+v, want its lease %d back", res[0], granted)
			}
			if res := r.apply(t, Command{Op: OpCancelWait, Waiter: []byte("first")}); !reflect.DeepEqual(res[0], Result{}) {
				t.Fatalf("CANCEL of a grant the owner's retry claimed: %+v, want nothing done", res[0])
			}
			if !r.fsm.Table().Verify([]byte("sem"), granted) {
				t.Fatal("the cancel of the first wait released the lease its owner's retry was answered with")
			}
			if res := r.apply(t, Command{Op: OpAcquire, Key: []byte("sem"), TTL: time.Second}); res[0].Granted {
				t.Fatalf("a third permit of a LIMIT 2 semaphore: %+v", res[0])
			}
		})
	}
}
