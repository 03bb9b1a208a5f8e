package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"
)

// The replies of a cluster in transition, as protocol/errors.go words them.
const (
	tryAgainText  = "TRYAGAIN no cluster leader is ready (election in progress); nothing was done, try again"
	uncertainText = "UNCERTAIN the leader was lost before the outcome was known: the command may or may not have been applied; retry ACQUIRE with the same OWNER, or check STATUS"
)

// fault is what a front does with one command.
type fault int

const (
	pass             fault = iota // forward it and pass the reply on
	tryAgain                      // answer TRYAGAIN without forwarding: nothing ran
	uncertainApplied              // forward it, then answer UNCERTAIN instead of the reply
	uncertainDropped              // answer UNCERTAIN without forwarding: it was not applied
)

// front is a RESP server in front of a real one that answers chosen
// commands as a cluster in transition would: TRYAGAIN, or UNCERTAIN with
// the command applied or not. rule picks the fault for each command, by
// its name (upper case) and the count of that name's commands so far (1
// for the first).
type front struct {
	t    *testing.T
	addr string
	rdb  *redis.Client // to the real server

	mu     sync.Mutex // guards counts, rule
	counts map[string]int
	rule   func(name string, n int) fault

	faults atomic.Int64 // commands answered with a fault
}

func startFront(t *testing.T, target string, rule func(name string, n int) fault) *front {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{t: t, addr: ln.Addr().String(), counts: map[string]int{}, rule: rule,
		rdb: redis.NewClient(&redis.Options{Addr: target, MaxRetries: -1, Protocol: 2})}
	srv := redcon.NewServer(f.addr, f.handle, nil, nil)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
		f.rdb.Close()
	})
	return f
}

// count is how many commands named name came so far.
func (f *front) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[name]
}

// setRule replaces the rule.
func (f *front) setRule(rule func(name string, n int) fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rule = rule
}

func (f *front) handle(conn redcon.Conn, cmd redcon.Command) {
	name := strings.ToUpper(string(cmd.Args[0]))
	f.mu.Lock()
	f.counts[name]++
	what := f.rule(name, f.counts[name])
	f.mu.Unlock()
	switch what {
	case tryAgain:
		f.faults.Add(1)
		conn.WriteError(tryAgainText)
		return
	case uncertainDropped:
		f.faults.Add(1)
		conn.WriteError(uncertainText)
		return
	}
	args := make([]any, len(cmd.Args))
	for i, a := range cmd.Args {
		args[i] = string(a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := f.rdb.Do(ctx, args...).Result()
	if what == uncertainApplied {
		f.faults.Add(1)
		conn.WriteError(uncertainText)
		return
	}
	writeReply(conn, v, err)
}

// writeReply writes a go-redis result back as RESP2.
func writeReply(conn redcon.Conn, v any, err error) {
	var re redis.Error
	switch {
	case errors.Is(err, redis.Nil):
		conn.WriteNull()
		return
	case errors.As(err, &re):
		conn.WriteError(re.Error())
		return
	case err != nil:
		conn.WriteError("ERR front: " + err.Error())
		return
	}
	switch v := v.(type) {
	case int64:
		conn.WriteInt64(v)
	case string:
		conn.WriteBulkString(v)
	case []any:
		conn.WriteArray(len(v))
		for _, e := range v {
			writeReply(conn, e, nil)
		}
	case nil:
		conn.WriteNull()
	default:
		conn.WriteError(fmt.Sprintf("ERR front: reply of type %T", v))
	}
}

// only returns a rule that answers the named command's first n with f.
func only(name string, n int, f fault) func(string, int) fault {
	return func(cmd string, i int) fault {
		if cmd == name && i <= n {
			return f
		}
		return pass
	}
}

// retryClient is a Client of addrs with retries that fit in a test.
func retryClient(t *testing.T, addrs []string, adjust ...func(*leasehold.Config)) *leasehold.Client {
	t.Helper()
	return newClient(t, "", append([]func(*leasehold.Config){func(c *leasehold.Config) {
		c.Addrs = addrs
		c.Redis.DialTimeout = time.Second
		c.RetryTimeout = 3 * time.Second
	}}, adjust...)...)
}

// Each call's answer to a cluster in transition, one fault at a time, in
// front of a single server that holds the truth.
func TestRetryRules(t *testing.T) {
	t.Parallel()
	srv := lockserver.Start(t)
	table := srv.Server.Table()
	ctx := testContext(t)

	t.Run("acquire granted before UNCERTAIN gets the same lease back", func(t *testing.T) {
		f := startFront(t, srv.Addr, only("ACQUIRE", 1, uncertainApplied))
		c := retryClient(t, []string{f.addr})
		l, err := c.Acquire(ctx, "a1", 30*time.Second, leasehold.NoKeepAlive())
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		defer l.Release(ctx)
		st, ok := table.Status([]byte("a1"))
		if !ok || st.Token != l.Token() || st.Owner != l.Owner() {
			t.Fatalf("the table has %+v, want token %d of owner %q", st, l.Token(), l.Owner())
		}
		if st.LastToken != l.Token() {
			t.Errorf("last token %d, want %d: the retry was granted anew", st.LastToken, l.Token())
		}
		if f.count("ACQUIRE") != 2 {
			t.Errorf("%d ACQUIREs, want 2", f.count("ACQUIRE"))
		}
	})

	t.Run("acquire with an Owner of one's own is retried with it", func(t *testing.T) {
		f := startFront(t, srv.Addr, only("ACQUIRE", 2, uncertainApplied))
		c := retryClient(t, []string{f.addr})
		l, err := c.Acquire(ctx, "a2", 30*time.Second, leasehold.Owner("mine"), leasehold.NoKeepAlive())
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		defer l.Release(ctx)
		if st, _ := table.Status([]byte("a2")); st.Owner != "mine" || st.Token != l.Token() {
			t.Fatalf("the table has %+v, want token %d of owner mine", st, l.Token())
		}
	})

	t.Run("acquire dropped with UNCERTAIN is granted by the retry", func(t *testing.T) {
		f := startFront(t, srv.Addr, only("ACQUIRE", 1, uncertainDropped))
		c := retryClient(t, []string{f.addr})
		l, err := c.Acquire(ctx, "a3", 30*time.Second, leasehold.NoKeepAlive())
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		l.Release(ctx)
	})

	t.Run("release applied before UNCERTAIN counts as released", func(t *testing.T) {
		f := startFront(t, srv.Addr, only("RELEASE", 1, uncertainApplied))
		c := retryClient(t, []string{f.addr})
		l, err := c.Acquire(ctx, "r1", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Lease.Release: %v, want nil", err)
		}
		if st, ok := table.Status([]byte("r1")); ok && st.Held {
			t.Fatalf("r1 still held: %+v", st)
		}
		tok, err := c.TryAcquire(ctx, "r1b", time.Minute, leasehold.NoKeepAlive())
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.Release(ctx, "r1b", tok.Token()); !ok || err != nil {
			t.Fatalf("Client.Release after an applied UNCERTAIN = %v, %v; want true", ok, err)
		}
		// Without an UNCERTAIN, a lease that is not held is not released.
		if ok, err := c.Release(ctx, "r1b", tok.Token()); ok || err != nil {
			t.Fatalf("Client.Release of a released lease = %v, %v; want false", ok, err)
		}
	})

	t.Run("extend is retried and keeps the lease", func(t *testing.T) {
		f := startFront(t, srv.Addr, only("EXTEND", 1, uncertainApplied))
		c := retryClient(t, []string{f.addr})
		l, err := c.Acquire(ctx, "e1", 30*time.Second, leasehold.NoKeepAlive())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		before := l.Deadline()
		if err := l.Extend(ctx, time.Minute); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		if !l.Deadline().After(before) {
			t.Errorf("Deadline %v did not move past %v", l.Deadline(), before)
		}
		if st, _ := table.Status([]byte("e1")); st.TTL < 50*time.Second {
			t.Errorf("ttl on the server %s, want about a minute", st.TTL)
		}
	})

	t.Run("reads and writes go on through TRYAGAIN", func(t *testing.T) {
		f := startFront(t, srv.Addr, func(string, int) fault { return pass })
		c := retryClient(t, []string{f.addr})
		l, err := c.Acquire(ctx, "t1", 30*time.Second, leasehold.NoKeepAlive())
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"VERIFY", "STATUS", "EXTEND", "RELEASE"} {
			f.setRule(only(name, 5, tryAgain))
			var err error
			switch name {
			case "VERIFY":
				var ok bool
				ok, err = l.Verify(ctx)
				if !ok && err == nil {
					err = errors.New("not live")
				}
			case "STATUS":
				_, err = c.Status(ctx, "t1")
			case "EXTEND":
				err = l.Extend(ctx, 30*time.Second)
			case "RELEASE":
				err = l.Release(ctx)
			}
			if err != nil {
				t.Errorf("%s through 5 TRYAGAINs: %v", name, err)
			}
		}
		if n := f.faults.Load(); n != 20 {
			t.Errorf("%d TRYAGAINs answered, want 20", n)
		}
	})

	t.Run("UNCERTAIN to the end is ErrUncertain", func(t *testing.T) {
		f := startFront(t, srv.Addr, func(name string, _ int) fault {
			if name == "ACQUIRE" {
				return uncertainDropped
			}
			return pass
		})
		c := retryClient(t, []string{f.addr}, func(c *leasehold.Config) { c.RetryTimeout = 300 * time.Millisecond })
		start := time.Now()
		_, err := c.Acquire(ctx, "u1", 30*time.Second)
		if !errors.Is(err, leasehold.ErrUncertain) {
			t.Fatalf("Acquire: %v, want ErrUncertain", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Acquire took %s with a retry timeout of 300ms", d)
		}
		if f.count("ACQUIRE") < 2 {
			t.Errorf("%d ACQUIREs: not retried", f.count("ACQUIRE"))
		}
		// A TRYAGAIN after the UNCERTAIN leaves it unknown all the same.
		f.setRule(func(name string, n int) fault {
			if name == "RELEASE" {
				if n == 1 {
					return uncertainDropped
				}
				return tryAgain
			}
			return pass
		})
		if _, err := c.Release(ctx, "u1", 1); !errors.Is(err, leasehold.ErrUncertain) {
			t.Fatalf("Release: %v, want ErrUncertain", err)
		}
		// The caller's context bounds the retries too.
		f.setRule(func(string, int) fault { return tryAgain })
		c2 := retryClient(t, []string{f.addr}, func(c *leasehold.Config) { c.RetryTimeout = time.Minute })
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start = time.Now()
		if _, err := c2.Verify(cctx, "u1", 1); !redis.HasErrorPrefix(err, "TRYAGAIN") && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Verify: %v, want TRYAGAIN or the deadline", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Verify took %s with a context of 300ms", d)
		}
	})

	t.Run("FORCE-RELEASE of every lease is not sent twice", func(t *testing.T) {
		f := startFront(t, srv.Addr, only("FORCE-RELEASE", 1, uncertainApplied))
		c := retryClient(t, []string{f.addr})
		if _, err := c.ForceRelease(ctx, "f1", 0); !errors.Is(err, leasehold.ErrUncertain) {
			t.Fatalf("ForceRelease: %v, want ErrUncertain", err)
		}
		if f.count("FORCE-RELEASE") != 1 {
			t.Errorf("%d FORCE-RELEASEs, want 1", f.count("FORCE-RELEASE"))
		}
	})

	t.Run("RetryTimeout 0 retries nothing", func(t *testing.T) {
		f := startFront(t, srv.Addr, only("STATUS", 100, tryAgain))
		c := retryClient(t, []string{f.addr}, func(c *leasehold.Config) {
			c.RetryTimeout = 0
			c.Redis.MaxRetries = -1
		})
		if _, err := c.Status(ctx, "z"); !redis.HasErrorPrefix(err, "TRYAGAIN") {
			t.Fatalf("Status: %v, want TRYAGAIN", err)
		}
		if n := f.faults.Load(); n != 1 {
			t.Errorf("%d STATUS sent, want 1", n)
		}
	})
}

// A node that answers TRYAGAIN (cut off from the majority, say) is passed
// over: the calls go to the next address, and stay there.
func TestTryAgainMovesToNextAddress(t *testing.T) {
	srv := lockserver.Start(t)
	f := startFront(t, srv.Addr, func(name string, _ int) fault {
		switch name {
		case "HELLO", "CLIENT", "AUTH", "PING":
			return pass
		}
		return tryAgain
	})
	c := retryClient(t, []string{f.addr, srv.Addr})
	ctx := testContext(t)
	l, err := c.Acquire(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	first := f.faults.Load()
	if first == 0 {
		t.Fatal("the first address answered no TRYAGAIN: the test tests nothing")
	}
	for range 20 {
		if ok, err := l.Verify(ctx); !ok || err != nil {
			t.Fatalf("Verify: %v, %v", ok, err)
		}
		if _, err := c.Status(ctx, "k"); err != nil {
			t.Fatalf("Status: %v", err)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := f.faults.Load(); n != first {
		t.Errorf("%d more commands went to the node that answers TRYAGAIN", n-first)
	}
}
