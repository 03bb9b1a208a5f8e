package server

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/contention"
	"github.com/leasehold/leasehold/protocol"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

func withLockStatsTop(n int) option { return func(c *Config) { c.LockStatsTop = n } }

// lockStatsReply reads LOCKSTATS' reply: per lock, its field/value pairs.
func lockStatsReply(t *testing.T, rdb *redis.Client, args ...any) []map[string]string {
	t.Helper()
	raw, err := rdb.Do(ctx(t), append([]any{"LOCKSTATS"}, args...)...).Slice()
	if err != nil {
		t.Fatalf("LOCKSTATS %v: %v", args, err)
	}
	var locks []map[string]string
	for _, l := range raw {
		pairs := l.([]any)
		m := make(map[string]string, len(pairs)/2)
		for i := 0; i+1 < len(pairs); i += 2 {
			switch v := pairs[i+1].(type) {
			case int64:
				m[pairs[i].(string)] = strconv.FormatInt(v, 10)
			default:
				m[pairs[i].(string)] = v.(string)
			}
		}
		locks = append(locks, m)
	}
	return locks
}

func ms(t *testing.T, m map[string]string, field string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(m[field], 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", field, m[field], err)
	}
	return f
}

// threeSignificant reports whether s is a decimal number written with at
// most three significant digits and no exponent ("60000", "20.5", "0.159").
func threeSignificant(s string) bool {
	if _, err := strconv.ParseFloat(s, 64); err != nil || strings.ContainsAny(s, "eE+-") {
		return false
	}
	digits := strings.TrimLeft(strings.Replace(s, ".", "", 1), "0")
	if !strings.Contains(s, ".") {
		digits = strings.TrimRight(digits, "0")
	}
	return len(digits) <= 3
}

func TestLockStatsContendedLock(t *testing.T) {
	ts := startServer(t, withLockStatsTop(contention.DefaultTop))
	c := ctx(t)
	holder, waiter, late := ts.client(), ts.client(), ts.client()

	// hot: held, one waiter handed the lease at release, one that times out.
	tok, err := holder.Do(c, "ACQUIRE", "hot", "30000").Int64()
	if err != nil {
		t.Fatal(err)
	}
	handed := make(chan int64, 1)
	go func() {
		got, _ := waiter.Do(c, "ACQUIRE", "hot", "30000", "WAIT", "10000").Int64()
		handed <- got
	}()
	waitForWaiters(t, ts, "hot", 1)
	if err := late.Do(c, "ACQUIRE", "hot", "30000", "WAIT", "50").Err(); err != redis.Nil {
		t.Fatalf("the late waiter: %v, want nil after its wait", err)
	}
	if n, err := holder.Do(c, "RELEASE", "hot", tok).Int(); err != nil || n != 1 {
		t.Fatalf("RELEASE: %d, %v", n, err)
	}
	var tok2 int64
	select {
	case tok2 = <-handed:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was never handed the lease")
	}
	if n, err := waiter.Do(c, "RELEASE", "hot", tok2).Int(); err != nil || n != 1 {
		t.Fatalf("RELEASE of the handed lease: %d, %v", n, err)
	}
	// cold: one uncontended cycle. brief: a lease that expires, seen
	// through its event (the statistics count it before it is published).
	cold, _ := holder.Do(c, "ACQUIRE", "cold", "30000").Int64()
	holder.Do(c, "RELEASE", "cold", cold)
	sub := ts.client().Subscribe(c, protocol.EventChannelPrefix+"brief")
	if _, err := sub.Receive(c); err != nil {
		t.Fatal(err)
	}
	if err := holder.Do(c, "ACQUIRE", "brief", "20").Err(); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := sub.ReceiveMessage(c)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(msg.Payload, "expired") {
			break
		}
	}

	locks := lockStatsReply(t, holder)
	if len(locks) != 3 {
		t.Fatalf("LOCKSTATS: %d locks, want 3: %v", len(locks), locks)
	}
	hot := locks[0]
	want := map[string]string{"key": "hot", "acquisitions": "2", "waits": "2", "timeouts": "1", "expiries": "0"}
	for f, v := range want {
		if hot[f] != v {
			t.Errorf("hot %s = %q, want %q (%v)", f, hot[f], v, hot)
		}
	}
	// The late waiter waited its 50 ms; the p99 of two waits is the longer.
	if p99 := ms(t, hot, "wait_p99_ms"); p99 < 50 || p99 > 10000 {
		t.Errorf("hot wait_p99_ms = %v, want at least the late waiter's 50", p99)
	}
	// The first lease was held past the late waiter's 50 ms wait.
	if p99 := ms(t, hot, "hold_p99_ms"); p99 < 50 {
		t.Errorf("hot hold_p99_ms = %v, want at least 50", p99)
	}
	if len(hot) != 9 {
		t.Errorf("hot has fields %v, want 9", hot)
	}
	// Durations come to three significant digits, not a bucket's bound to
	// the microsecond ("57.343"): the estimates are within 1.6%.
	for _, l := range locks {
		for _, f := range []string{"wait_p50_ms", "wait_p99_ms", "hold_p50_ms", "hold_p99_ms"} {
			if !threeSignificant(l[f]) {
				t.Errorf("%s %s = %q, want at most three significant digits", l["key"], f, l[f])
			}
		}
	}

	byExpiries := lockStatsReply(t, holder, "BY", "expiries")
	if byExpiries[0]["key"] != "brief" || byExpiries[0]["expiries"] != "1" {
		t.Errorf("LOCKSTATS BY expiries: first %v, want brief with 1 expiry", byExpiries[0])
	}
	if top := lockStatsReply(t, holder, "TOP", "1", "BY", "ACQUISITIONS"); len(top) != 1 || top[0]["key"] != "hot" {
		t.Errorf("LOCKSTATS TOP 1 BY ACQUISITIONS = %v, want hot alone", top)
	}
	got, err := ts.LockStats(2, "")
	if err != nil || len(got) != 2 || got[0].Key != "hot" || got[0].Waits != 2 {
		t.Errorf("Server.LockStats(2, \"\") = %+v, %v", got, err)
	}

	// redis-cli prints the flat pairs a line each.
	host, port := ts.hostPort()
	res := runTool(t, "", redisTool(t, "redis-cli"), "-h", host, "-p", port, "LOCKSTATS", "TOP", "1")
	if res.exit != 0 || !strings.HasPrefix(res.stdout, "key\nhot\nacquisitions\n2\nwaits\n2\ntimeouts\n1\nexpiries\n0\nwait_p50_ms\n") {
		t.Errorf("redis-cli LOCKSTATS TOP 1: exit %d\n%s%s", res.exit, res.stdout, res.stderr)
	}
}

func TestLockStatsErrors(t *testing.T) {
	rdb := startServer(t, withLockStatsTop(contention.DefaultTop)).client()
	c := ctx(t)
	badOrder := "ERR BY must be one of waits, wait-time, hold-time, expiries, acquisitions"
	badTop := "ERR TOP must be an integer between 1 and 100000"
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"TOP", "0"}, badTop},
		{[]any{"TOP", "-1"}, badTop},
		{[]any{"TOP", "many"}, badTop},
		{[]any{"TOP", "100001"}, badTop},
		{[]any{"BY", "popularity"}, badOrder},
		{[]any{"BY"}, "ERR syntax error"},
		{[]any{"TOP", "1", "TOP", "2"}, "ERR syntax error"},
		{[]any{"SORT", "waits"}, "ERR syntax error"},
	} {
		err := rdb.Do(c, append([]any{"LOCKSTATS"}, tc.args...)...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("LOCKSTATS %q: %v, want %q", tc.args, err, tc.want)
		}
	}
	off := startServer(t, withLockStatsTop(0)).client()
	if err := off.Do(c, "LOCKSTATS").Err(); err == nil || err.Error() != "ERR lock statistics are off (--lockstats-top 0)" {
		t.Errorf("LOCKSTATS with --lockstats-top 0: %v", err)
	}
	if got, _ := off.ConfigGet(c, "lockstats-top").Result(); got["lockstats-top"] != "0" {
		t.Errorf("CONFIG GET lockstats-top = %v", got)
	}
}

// TestLockStatsOnByDefault: a server with the default config keeps lock
// statistics, and --lockstats-top 0 is what turns them off.
func TestLockStatsOnByDefault(t *testing.T) {
	if got := DefaultConfig().LockStatsTop; got != contention.DefaultTop {
		t.Fatalf("DefaultConfig().LockStatsTop = %d, want %d", got, contention.DefaultTop)
	}
	rdb := startServer(t).client()
	c := ctx(t)
	if err := rdb.Do(c, "ACQUIRE", "k", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.Do(c, "LOCKSTATS").Slice(); err != nil || len(got) != 1 {
		t.Fatalf("LOCKSTATS with the defaults = %v, %v; want the one lock", got, err)
	}
}

// TestLockStatsOrdersAgree: every order the protocol parses, the statistics
// sort by.
func TestLockStatsOrdersAgree(t *testing.T) {
	if !slices.Equal(protocol.LockStatsOrders, contention.Orders) {
		t.Fatalf("protocol orders %q, contention orders %q", protocol.LockStatsOrders, contention.Orders)
	}
}

// TestLockStatsKeyPatterns: a user limited to some keys sees those locks only.
func TestLockStatsKeyPatterns(t *testing.T) {
	ts := startServer(t, withLockStatsTop(contention.DefaultTop), withACLFile(t, "user admin on >adminpw ~* &* +@all\nuser jobs on >jobspw ~jobs:* +@read\n"))
	c := ctx(t)
	admin := ts.userClient("admin", "adminpw")
	for _, k := range []string{"jobs:1", "secret"} {
		if err := admin.Do(c, "ACQUIRE", k, "30000").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if got := lockStatsReply(t, admin); len(got) != 2 {
		t.Fatalf("admin sees %v, want 2 locks", got)
	}
	got := lockStatsReply(t, ts.userClient("jobs", "jobspw"))
	if len(got) != 1 || got[0]["key"] != "jobs:1" {
		t.Fatalf("jobs sees %v, want jobs:1 alone", got)
	}
}

// TestLockStatsCluster: each node counts the changes it applies, so a
// follower reports the leader's grants and releases too.
func TestLockStatsCluster(t *testing.T) {
	t.Parallel() // a cluster test (cluster_test.go)
	nodes := startCluster(t, 2, func(string) option { return withLockStatsTop(contention.DefaultTop) })
	leader := waitLeader(t, nodes...)
	c := ctx(t)
	tok, err := leader.client().Do(c, "ACQUIRE", "hot", "30000").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.client().Do(c, "RELEASE", "hot", tok).Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitFor(t, n.id+" counts hot's grant and release", func() bool {
			got, err := n.LockStats(0, "acquisitions")
			return err == nil && len(got) == 1 && got[0].Key == "hot" && got[0].Acquisitions == 1 && got[0].HoldP99 > 0
		})
	}
	if got := lockStatsReply(t, nodes[1].client()); len(got) != 1 || got[0]["key"] != "hot" {
		t.Fatalf("LOCKSTATS on n2 = %v", got)
	}
	// A wait is counted by the node that served it, whichever leads.
	if _, err := leader.client().Do(c, "ACQUIRE", "busy", "30000").Int64(); err != nil {
		t.Fatal(err)
	}
	// The wait is counted from when it queued, a forward and a commit
	// after its deadline was set (75 ms of a 100 ms wait went so once, in
	// CI under load): a wait long enough that half of it is surely left.
	if err := nodes[1].client().Do(c, "ACQUIRE", "busy", "30000", "WAIT", "600").Err(); err != redis.Nil {
		t.Fatalf("the wait on n2: %v, want nil at its deadline", err)
	}
	got, err := nodes[1].LockStats(0, "waits")
	if err != nil || len(got) == 0 || got[0].Key != "busy" || got[0].Waits != 1 || got[0].Timeouts != 1 || got[0].WaitP99 < 300*time.Millisecond {
		t.Fatalf("n2's LockStats = %+v, %v; want busy with 1 wait of about 600ms (less the forward and commit that queued it), timed out", got, err)
	}
}

// TestLockCycleAllocatesNothing: a granted ACQUIRE and the RELEASE of its
// token allocate nothing, with lock statistics off and on, on locks the
// sketch tracks and on more locks than it holds (each displacing another).
func TestLockCycleAllocatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		top, keys int
	}{{"off", 0, 1024}, {"on, tracked", 100, 64}, {"on, displacing", 100, 1024}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.LockStatsTop = tc.top
			srv, err := New(cfg, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			cy := newCycler(srv, tc.keys)
			cycle := func() { cy.cycle(t) }
			for range 2 * tc.keys { // every buffer grown to fit
				cycle()
			}
			if allocs := testing.AllocsPerRun(2*tc.keys, cycle); allocs != 0 {
				t.Fatalf("%v allocations per lock cycle, want 0", allocs)
			}
		})
	}
}
