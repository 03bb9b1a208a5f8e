package admin

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestStatusLocks: a held lock's row has its holder, owners with spaces
// whole, and its queue in the order it will be served: the later waiter
// with the better priority first.
func TestStatusLocks(t *testing.T) {
	ls := lockserver.Start(t)
	ctx := context.Background()
	if err := ls.Client().Do(ctx, "ACQUIRE", "k", "30000", "OWNER", "a b").Err(); err != nil {
		t.Fatal(err)
	}
	for n, w := range []struct{ owner, prio string }{{"low", "0"}, {"high", "5"}} {
		go ls.Client().Do(ctx, "ACQUIRE", "k", "1000", "OWNER", w.owner, "WAIT", "10000", "PRIORITY", w.prio)
		testutil.Eventually(t, 10*time.Second, "the waiter queued", func() bool {
			st, ok := ls.Server.Table().Status([]byte("k"))
			return ok && st.Waiters == n+1
		})
	}
	_, locks := statusLocks(ls.Server.Table(), 0, 100)
	if len(locks) != 1 {
		t.Fatalf("locks %+v, want one", locks)
	}
	l := locks[0]
	if l.Key != "k" || !l.Held || len(l.Holders) != 1 || l.Holders[0].Owner != "a b" || l.Holders[0].TTL <= 0 {
		t.Fatalf("lock %+v", l)
	}
	if l.QueueTotal != 2 || l.Queue[0].Owner != "high" || l.Queue[0].Priority != 5 || l.Queue[1].Owner != "low" {
		t.Fatalf("queue %+v", l.Queue)
	}
}
