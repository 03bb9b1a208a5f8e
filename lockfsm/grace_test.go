package lockfsm

import (
	"bytes"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// TestGrace: OpGrace gives every live lease at least the grace from now,
// exclusive and shared alike, shortens none, leaves a lock-delay alone, and
// renews every lease on every replica, so that an expiry the next leader
// collects fires alike everywhere, whatever each replica's clock says.
func TestGrace(t *testing.T) {
	leader, follower := newReplica(t, 4), newReplica(t, 1)
	both := func(cmds ...Command) []Result {
		res := leader.apply(t, cmds...)
		if got := follower.apply(t, cmds...); !bytes.Equal(AppendResults(nil, got), AppendResults(nil, res)) {
			t.Fatalf("the follower answered %+v, the leader %+v", got, res)
		}
		return res
	}
	both(Command{Op: OpCreate, Key: []byte("d"), Options: locker.CreateOptions{LockDelay: time.Hour, LockDelaySet: true}})
	res := both(
		Command{Op: OpAcquire, Key: []byte("short"), TTL: time.Second},
		Command{Op: OpAcquire, Key: []byte("long"), TTL: time.Hour},
		Command{Op: OpAcquire, Key: []byte("rw"), TTL: time.Second, Shared: true},
		Command{Op: OpAcquire, Key: []byte("d"), TTL: time.Second},
	)
	leader.clock.Advance(2 * time.Second) // past every short deadline: only the leader's OpFire ends them
	follower.clock.Advance(500 * time.Millisecond)
	due := leader.fsm.CollectDue(16)
	if len(due) != 3 {
		t.Fatalf("due before the grace: %+v, want short, rw and d", due)
	}
	// d expires (its lock-delay begins); then a new term's grace.
	var fireD []locker.Due
	for _, d := range due {
		if d.Key == "d" {
			fireD = append(fireD, d)
		}
	}
	both(Command{Op: OpFire, Term: 0, Due: fireD})
	if res := both(Command{Op: OpTerm, Term: 2, Floor: 1}, Command{Op: OpGrace, TTL: 10 * time.Second}); res[1].N != 3 {
		t.Fatalf("OpGrace renewed %d leases, want short, long and rw", res[1].N)
	}
	for _, rep := range []*replica{leader, follower} {
		for key, atLeast := range map[string]time.Duration{"short": 10 * time.Second, "long": time.Hour - 2*time.Second} {
			if st, _ := rep.fsm.Table().Status([]byte(key)); !st.Held || st.TTL < atLeast {
				t.Fatalf("%s after the grace: %+v, want at least %s left", key, st, atLeast)
			}
		}
		if st, _ := rep.fsm.Table().Status([]byte("d")); st.Held || !st.Delayed {
			t.Fatalf("d, in its lock-delay, after the grace: %+v", st)
		}
	}
	// What the leader collected before the grace no longer fires: the
	// leases were renewed, alike on both replicas.
	if res := both(Command{Op: OpFire, Term: 2, Due: due}); res[0].N != 0 {
		t.Fatalf("a stale expiry fired %d leases after the grace", res[0].N)
	}
	if !leader.fsm.Table().Verify([]byte("short"), res[0].Token) {
		t.Fatal("short's lease ended")
	}
	if !bytes.Equal(dump(t, leader), dump(t, follower)) {
		t.Fatal("the replicas differ after the grace")
	}
}
