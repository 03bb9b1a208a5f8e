package lockfsm

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// waitAllCmd is an OpWaitAll of waiter for keys.
func waitAllCmd(waiter string, keys ...string) Command {
	c := Command{Op: OpWaitAll, TTL: 10 * time.Second, Waiter: []byte(waiter), Wait: 5 * time.Second}
	for _, k := range keys {
		c.Keys = append(c.Keys, []byte(k))
	}
	return c
}

// snapshotInto restores from's snapshot into a new replica with shards
// shards and returns it.
func snapshotInto(t *testing.T, from *replica, shards int) *replica {
	t.Helper()
	to := newReplica(t, shards)
	restore(t, to, snapshotBytes(t, from))
	to.index = from.index
	if !bytes.Equal(dump(t, to), dump(t, from)) {
		t.Fatalf("restored:\n%s\nwant:\n%s", dump(t, to), dump(t, from))
	}
	return to
}

// TestWaitAll: MACQUIRE ... WAIT takes its keys in key order, holding each
// while it waits for the next, moves on within the apply of the entry that
// frees the key it waits for, and is reported to OnGrant with its tokens in
// the order of its keys. A replica restored from a snapshot taken half way
// goes on in step.
func TestWaitAll(t *testing.T) {
	r := newReplica(t, 4)
	if res := r.apply(t, waitAllCmd("free", "x", "y")); !res[0].Granted || res[0].Queued || len(res[0].Tokens) != 2 {
		t.Fatalf("MACQUIRE WAIT of free locks: %+v", res[0])
	}
	b := r.acquired(t, "b", time.Minute)
	c := r.acquired(t, "c", time.Minute)
	r.mustQueue(t, waitAllCmd("w", "c", "b", "a"))
	if st, _ := r.fsm.Table().Status([]byte("a")); !st.Held {
		t.Fatal("a, first in key order, is not held while b is waited for")
	}
	r.apply(t, Command{Op: OpRelease, Key: []byte("b"), Token: b})
	if len(r.ended) != 0 {
		t.Fatalf("granted with c still held: %q", r.ended)
	}
	if st, _ := r.fsm.Table().Status([]byte("c")); st.Waiters != 1 {
		t.Fatalf("c has %d waiters, want the MACQUIRE", st.Waiters)
	}
	restored := snapshotInto(t, r, 16)
	for _, rep := range []*replica{r, restored} {
		rep.apply(t, Command{Op: OpRelease, Key: []byte("c"), Token: c})
		if len(rep.ended) != 1 {
			t.Fatalf("after the release of c: %q, want w granted", rep.ended)
		}
	}
	if r.ended[0] != restored.ended[0] {
		t.Fatalf("the restored replica granted %q, the other %q", restored.ended[0], r.ended[0])
	}
	var got [3]uint64
	if _, err := fmt.Sscanf(r.ended[0], "w c %d,%d,%d", &got[0], &got[1], &got[2]); err != nil {
		t.Fatalf("OnGrant %q: %v", r.ended[0], err)
	}
	for j, k := range []string{"c", "b", "a"} {
		if st, _ := r.fsm.Table().Status([]byte(k)); st.Token != got[j] || st.TTL != 10*time.Second {
			t.Fatalf("%s: %+v, want token %d for the full ttl", k, st, got[j])
		}
	}
	if !bytes.Equal(dump(t, r), dump(t, restored)) {
		t.Fatal("the replicas differ after the grant")
	}
}

// TestWaitAllCancelAndDeadline: a MACQUIRE wait that gives up (its cancel,
// or its deadline through OpFire) gives back the keys it took on its way;
// one granted before its cancel applied gives back every lease.
func TestWaitAllCancelAndDeadline(t *testing.T) {
	r := newReplica(t, 4)
	r.apply(t, Command{Op: OpTerm, Term: 2, Floor: 1})
	b := r.acquired(t, "b", time.Hour)
	r.mustQueue(t, waitAllCmd("w1", "a", "b"))
	if res := r.apply(t, Command{Op: OpCancelWait, Waiter: []byte("w1")}); res[0].N != 0 {
		t.Fatalf("CANCEL of a queued MACQUIRE: %+v", res[0])
	}
	if st, _ := r.fsm.Table().Status([]byte("a")); st.Held {
		t.Fatal("a, taken on the way, is still held after the cancel")
	}

	r.mustQueue(t, waitAllCmd("w2", "a", "b"))
	r.clock.Advance(5 * time.Second)
	due := r.fsm.CollectDue(16)
	if len(due) != 1 || due[0].Kind != locker.DueWait || due[0].Key != "w2" {
		t.Fatalf("CollectDue = %+v, want w2's wait", due)
	}
	if res := r.apply(t, Command{Op: OpFire, Term: 2, Due: due}); res[0].N != 1 || !slices.Equal(r.ended, []string{"w2 b 0"}) {
		t.Fatalf("FIRE: %+v, ended %q; want w2 ended ungranted", res[0], r.ended)
	}
	if st, _ := r.fsm.Table().Status([]byte("a")); st.Held {
		t.Fatal("a is still held after the deadline")
	}

	r.mustQueue(t, waitAllCmd("w3", "a", "b"))
	r.apply(t, Command{Op: OpRelease, Key: []byte("b"), Token: b})
	if len(r.ended) != 2 {
		t.Fatalf("after the release: %q, want w3 granted", r.ended)
	}
	res := r.apply(t, Command{Op: OpCancelWait, Waiter: []byte("w3")})
	if res[0].N != 2 {
		t.Fatalf("CANCEL after the grant: %+v, want both leases released", res[0])
	}
	for _, k := range []string{"a", "b"} {
		if st, _ := r.fsm.Table().Status([]byte(k)); st.Held {
			t.Fatalf("%s is held after the granted MACQUIRE's cancel", k)
		}
	}
}

// TestWaitAllFreesForOthers: a MACQUIRE wait that moves on, or gives up,
// within an apply may free a lock another wait stands behind; every wait
// moved is carried on within the same apply, alike on a replica restored
// from a snapshot.
func TestWaitAllFreesForOthers(t *testing.T) {
	r := newReplica(t, 4)
	r.apply(t, Command{Op: OpTerm, Term: 2, Floor: 1})
	b := r.acquired(t, "b", time.Hour)
	r.mustQueue(t, waitAllCmd("m1", "a", "b")) // holds a, waits for b
	r.mustQueue(t, waitCmd("a", "s1", 0))      // waits for a
	r.mustQueue(t, waitAllCmd("m2", "a", "c")) // waits for a, behind s1
	restored := snapshotInto(t, r, 1)
	for _, rep := range []*replica{r, restored} {
		// m1 gives up: a goes to s1.
		rep.apply(t, Command{Op: OpCancelWait, Waiter: []byte("m1")})
		if len(rep.ended) != 1 || !bytes.HasPrefix([]byte(rep.ended[0]), []byte("s1 a ")) {
			t.Fatalf("after m1's cancel: %q, want s1 granted", rep.ended)
		}
	}
	var s1 uint64
	fmt.Sscanf(r.ended[0], "s1 a %d", &s1)
	for _, rep := range []*replica{r, restored} {
		// s1 releases: a goes to m2, which takes c at once, in the same apply.
		rep.apply(t, Command{Op: OpRelease, Key: []byte("a"), Token: s1})
		if len(rep.ended) != 2 || !bytes.HasPrefix([]byte(rep.ended[1]), []byte("m2 a ")) {
			t.Fatalf("after s1's release: %q, want m2 granted", rep.ended)
		}
	}
	if r.ended[1] != restored.ended[1] || !bytes.Equal(dump(t, r), dump(t, restored)) {
		t.Fatalf("the replicas differ: %q and %q", r.ended, restored.ended)
	}
	if !r.fsm.Table().Verify([]byte("b"), b) {
		t.Fatal("b's holder lost its lease")
	}
}
