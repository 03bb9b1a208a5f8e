package leasehold_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
)

// clusterAddrs are the nodes' RESP addresses, first before the rest.
func clusterAddrs(first *lockserver.Node, nodes []*lockserver.Node) []string {
	addrs := []string{first.Addr}
	for _, n := range nodes {
		if n != first {
			addrs = append(addrs, n.Addr)
		}
	}
	return addrs
}

// A lease held through the loss of the cluster's leader: its renewals and
// the holder's calls go on through another address once a new leader is
// elected, the lease is never lost, and nobody else is granted the lock
// meanwhile.
func TestClusterLeaseSurvivesLeaderLoss(t *testing.T) {
	t.Parallel()
	// Closing the leader hands its leadership over, most often before
	// the transfer's time runs out: an election follows instead, as after
	// a crash.
	nodes := lockserver.StartCluster(t, 3, func(c *cluster.Config) { c.TransferTimeout = time.Nanosecond })
	leader, err := lockserver.WaitLeader(nodes...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	// The leader first, so that the connections go to it.
	c := retryClient(t, clusterAddrs(leader, nodes))
	other := retryClient(t, clusterAddrs(leader, nodes))
	const ttl = 3 * time.Second // renewed every 1s, lost 300ms before its deadline
	l, err := c.Acquire(ctx, "job", ttl)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}

	var rest []*lockserver.Node
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	// The holder keeps calling from before the leader is closed until well
	// after: every call answers, those made during the election included.
	killed := make(chan time.Time, 1)
	calls := make(chan error, 1)
	running := make(chan struct{}) // closed once a round of calls has answered
	go func() {
		var at time.Time
		for n := 0; ; n++ {
			select {
			case at = <-killed:
			default:
			}
			if !at.IsZero() && time.Since(at) > 2*ttl {
				calls <- nil
				return
			}
			if ok, err := l.Verify(ctx); err != nil || !ok {
				calls <- fmt.Errorf("Verify %d: %v, %v", n, ok, err)
				return
			}
			if err := l.Extend(ctx, ttl); err != nil {
				calls <- fmt.Errorf("Extend %d: %v", n, err)
				return
			}
			if _, err := other.TryAcquire(ctx, "job", ttl); !errors.Is(err, leasehold.ErrNotAcquired) {
				calls <- fmt.Errorf("another client's TryAcquire %d of the held lock: %v, want ErrNotAcquired", n, err)
				return
			}
			if n == 0 {
				close(running)
			}
			time.Sleep(20 * time.Millisecond) // a holder's pace, not a synchronisation
		}
	}()
	select { // the calls run before the loss
	case <-running:
	case err := <-calls:
		t.Fatalf("the holder's calls before the loss: %v", err)
	}
	closed := time.Now()
	if err := leader.Close(); err != nil {
		t.Logf("closing the leader: %v", err)
	}
	killed <- closed
	next, err := lockserver.WaitLeader(rest...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s leads %s after %s was closed", next.ID, time.Since(closed).Round(time.Millisecond), leader.ID)
	select {
	case err := <-calls:
		if err != nil {
			t.Fatalf("the holder's calls through the failover: %v", err)
		}
	case <-time.After(4 * ttl):
		t.Fatal("the holder's calls did not end")
	}
	select {
	case <-l.Lost():
		t.Fatalf("the lease was lost: %v", l.Err())
	default:
	}
	if !l.Deadline().After(closed.Add(ttl)) {
		t.Errorf("Deadline %v: no renewal confirmed after the leader was closed", l.Deadline())
	}
	st, err := other.Status(ctx, "job")
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.Token != l.Token() || st.Owner != l.Owner() || st.LastToken != l.Token() {
		t.Fatalf("Status %+v; want the lease %d of %q, and no token granted after it", st, l.Token(), l.Owner())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	l2, err := other.TryAcquire(ctx, "job", ttl, leasehold.NoKeepAlive())
	if err != nil {
		t.Fatalf("TryAcquire after the release: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %d after %d", l2.Token(), l.Token())
	}
	l2.Release(ctx)
}

// A client whose first address is a follower: the follower forwards to the
// leader, or, on a server that does not, answers TRYAGAIN and the client
// moves on to the next address; either way the calls answer.
func TestClusterFollowerFirst(t *testing.T) {
	t.Parallel()
	nodes := lockserver.StartCluster(t, 3)
	leader, err := lockserver.WaitLeader(nodes...)
	if err != nil {
		t.Fatal(err)
	}
	var follower *lockserver.Node
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}
	ctx := testContext(t)
	if err := follower.Client().Do(ctx, "VERIFY", "k", 1).Err(); err == nil {
		t.Logf("follower %s answers VERIFY itself: it forwards to the leader", follower.ID)
	}
	c := retryClient(t, clusterAddrs(follower, nodes))
	start := time.Now()
	l, err := c.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatalf("Acquire through a follower first: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Acquire took %s", d)
	}
	for range 10 {
		if ok, err := l.Verify(ctx); !ok || err != nil {
			t.Fatalf("Verify: %v, %v", ok, err)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
