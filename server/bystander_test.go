package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/protocol"
)

// The bystander: issue 13's promise is that a healthy holder that renews on
// time never loses its lease because of another client. Each attack below
// runs against a server while a bystander connection holds a 1 s lease and
// renews it every 250 ms; the test fails if one renewal finds the lease gone
// or does not come back before the lease would have run out. How long the
// renewals took is reported (t.Logf, and BenchmarkBystanderUnderAttack's
// p99-ms for make bench), not asserted: the machine is shared and noisy.

const (
	bystanderTTL   = time.Second
	bystanderEvery = 250 * time.Millisecond
	// attackBound bounds any one attack's running time, and so the test's.
	attackBound = 4 * time.Second
)

// attack drives one hostile pattern against addr. It returns once the
// attack's input is sent, or its bound is reached, whichever comes first;
// what it leaves running (connections that never read) ends with the test.
type attack struct {
	name  string
	setup func(t testing.TB, addr string) // untimed: builds what the attack needs
	run   func(t testing.TB, addr string)
}

var attacks = []attack{
	{
		// A semaphore whose STATUS reply is megabytes; the attacker
		// pipelines many and reads none.
		name: "big STATUS pipelined, never read",
		setup: func(t testing.TB, addr string) {
			owner := strings.Repeat("o", 512)
			var b strings.Builder
			b.WriteString("CREATE sem LIMIT 4096\r\n")
			for i := range 4096 {
				fmt.Fprintf(&b, "ACQUIRE sem 600000 OWNER %s%d\r\n", owner, i)
			}
			pipeline(t, addr, b.String(), 4097)
		},
		run: func(t testing.TB, addr string) {
			nc := dialAttacker(t, addr)
			writeBounded(t, nc, strings.Repeat("STATUS sem\r\n", 40))
		},
	},
	{
		// One write of a million PINGs: the server must not serve them all
		// before it looks at anyone else. The attacker reads its replies.
		name: "a million PINGs in one write",
		run: func(t testing.TB, addr string) {
			nc := dialAttacker(t, addr)
			const n = 1_000_000
			done := drainReplies(nc, n)
			writeBounded(t, nc, strings.Repeat("PING\r\n", n))
			<-done
		},
	},
	{
		// A client that writes megabytes, more than the sockets hold,
		// before it reads anything (TestClientWritingBeforeReadingDoesNotDeadlock
		// writes more; here the attacker shares the test's process and its
		// two cores with the bystander, and a larger one starves both).
		name: "8 MB written before reading",
		run: func(t testing.TB, addr string) {
			nc := dialAttacker(t, addr)
			const n = 8 << 20 / len("PING\r\n")
			writeBounded(t, nc, strings.Repeat("PING\r\n", n))
			<-drainReplies(nc, n)
		},
	},
	{
		// The costliest LOCKS MATCH the bounds allow, over long names,
		// pipelined.
		name: "costly LOCKS MATCH pipelined",
		setup: func(t testing.TB, addr string) {
			var b strings.Builder
			for i := range 2000 {
				fmt.Fprintf(&b, "CREATE %05d%s\r\n", i, strings.Repeat("a", 1000))
			}
			pipeline(t, addr, b.String(), 2000)
		},
		run: func(t testing.TB, addr string) {
			nc := dialAttacker(t, addr)
			pattern := "*" + strings.Repeat("[a-z]", 50) + "b"
			const n = 100
			done := drainReplies(nc, 2*n) // a cursor's array and its names' array
			writeBounded(t, nc, strings.Repeat("LOCKS 0 MATCH "+pattern+" COUNT 100000\r\n", n))
			<-done
		},
	},
	{
		// MRELEASE with the most pairs a call may name, pipelined.
		name: "largest MRELEASE pipelined",
		run: func(t testing.TB, addr string) {
			nc := dialAttacker(t, addr)
			var one strings.Builder
			one.WriteString("MRELEASE")
			for i := range protocol.MaxMultiKeys {
				fmt.Fprintf(&one, " k%d 1", i)
			}
			one.WriteString("\r\n")
			const n = 200
			done := drainReplies(nc, n)
			writeBounded(t, nc, strings.Repeat(one.String(), n))
			<-done
		},
	},
	{
		// Many pattern subscribers, then lock churn whose events every
		// pattern could be asked about.
		name: "many PSUBSCRIBE patterns and churn",
		run: func(t testing.TB, addr string) {
			for c := range 10 {
				nc := dialAttacker(t, addr)
				var b strings.Builder
				b.WriteString("PSUBSCRIBE")
				for i := range protocol.MaxSubscribeArgs {
					fmt.Fprintf(&b, " __lock__:p%d-%d*x", c, i)
				}
				b.WriteString("\r\n")
				writeBounded(t, nc, b.String())
			}
			nc := dialAttacker(t, addr)
			// Fresh keys with short leases: every ACQUIRE grants (an
			// event) and every lease expires (another).
			const n = 40_000
			done := drainReplies(nc, n)
			var b strings.Builder
			for i := range n {
				fmt.Fprintf(&b, "ACQUIRE churn%d 100\r\n", i)
			}
			writeBounded(t, nc, b.String())
			<-done
		},
	},
	{
		// A subscriber that listens to every event and never reads, while
		// another client makes events.
		name: "subscriber that never reads",
		run: func(t testing.TB, addr string) {
			sub := dialAttacker(t, addr)
			writeBounded(t, sub, "PSUBSCRIBE *\r\n")
			nc := dialAttacker(t, addr)
			const n = 50_000
			done := drainReplies(nc, n)
			var b strings.Builder
			owner := strings.Repeat("w", 200)
			for i := range n {
				fmt.Fprintf(&b, "ACQUIRE ev%d 100 OWNER %s\r\n", i, owner)
			}
			writeBounded(t, nc, b.String())
			<-done
		},
	},
}

func TestBystanderKeepsItsLeaseUnderAttack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs each attack for seconds")
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			renewals := runUnderAttack(t, a)
			t.Logf("%d renewals, p50 %v, p99 %v, max %v", len(renewals), percentile(renewals, 50), percentile(renewals, 99), percentile(renewals, 100))
		})
	}
}

// BenchmarkBystanderUnderAttack reports the bystander's renewal latency
// under each attack: p99-ms is the figure issue 13 holds to 50 ms.
func BenchmarkBystanderUnderAttack(b *testing.B) {
	for _, a := range attacks {
		b.Run(a.name, func(b *testing.B) {
			var all []time.Duration
			for range b.N {
				all = append(all, runUnderAttack(b, a)...)
			}
			b.ReportMetric(float64(percentile(all, 99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(percentile(all, 100).Microseconds())/1000, "max-ms")
		})
	}
}

// runUnderAttack starts a server, sets the attack up, takes the bystander's
// lease, runs the attack while the bystander renews, and returns how long
// each renewal took. It fails tb if the bystander lost its lease.
func runUnderAttack(tb testing.TB, a attack) []time.Duration {
	ts := startServer(tb)
	if a.setup != nil {
		a.setup(tb, ts.addr)
	}
	by, err := newBystander(ts.addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer by.nc.Close()
	stop := make(chan struct{})
	result := make(chan error, 1)
	go func() { result <- by.renew(stop) }()

	a.run(tb, ts.addr)
	// The server may still be working through what the attack left; the
	// bystander goes on renewing for two whole leases.
	timer := time.NewTimer(2 * bystanderTTL)
	select {
	case err = <-result:
		timer.Stop()
	case <-timer.C:
		close(stop)
		err = <-result
	}
	if err != nil {
		tb.Fatalf("bystander: %v", err)
	}
	return by.latencies
}

// bystander holds a lease and renews it on time.
type bystander struct {
	nc        net.Conn
	r         *bufio.Reader
	token     string
	latencies []time.Duration
}

func newBystander(addr string) (*bystander, error) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	by := &bystander{nc: nc, r: bufio.NewReader(nc)}
	reply, _, err := by.call(fmt.Sprintf("ACQUIRE bystander %d OWNER bystander\r\n", bystanderTTL.Milliseconds()))
	if err != nil {
		nc.Close()
		return nil, err
	}
	if !strings.HasPrefix(reply, ":") {
		nc.Close()
		return nil, fmt.Errorf("ACQUIRE answered %q", reply)
	}
	by.token = reply[1:]
	return by, nil
}

// renew extends the lease every bystanderEvery until stop, and fails when
// a renewal finds the lease gone or its reply does not come while the lease
// could still be live.
func (by *bystander) renew(stop <-chan struct{}) error {
	tick := time.NewTicker(bystanderEvery)
	defer tick.Stop()
	lastRenewed := time.Now()
	for {
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
		by.nc.SetDeadline(lastRenewed.Add(bystanderTTL))
		reply, took, err := by.call(fmt.Sprintf("EXTEND bystander %s %d\r\n", by.token, bystanderTTL.Milliseconds()))
		if err != nil {
			return fmt.Errorf("renewal %d (%v after the last one): %w", len(by.latencies)+1, time.Since(lastRenewed), err)
		}
		if reply != ":1" {
			return fmt.Errorf("renewal %d found the lease gone: EXTEND answered %q", len(by.latencies)+1, reply)
		}
		by.latencies = append(by.latencies, took)
		lastRenewed = time.Now().Add(-took) // the server renewed at most took ago
	}
}

func (by *bystander) call(cmd string) (reply string, took time.Duration, err error) {
	start := time.Now()
	if _, err := io.WriteString(by.nc, cmd); err != nil {
		return "", 0, err
	}
	line, err := by.r.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), time.Since(start), err
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

// dialAttacker opens a connection the test closes when it ends.
func dialAttacker(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// writeBounded writes s, giving up quietly at attackBound: a server that
// stops reading a client's input is within its rights.
func writeBounded(t testing.TB, nc net.Conn, s string) {
	t.Helper()
	nc.SetWriteDeadline(time.Now().Add(attackBound))
	defer nc.SetWriteDeadline(time.Time{})
	if _, err := io.WriteString(nc, s); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !isConnReset(err) {
		t.Fatal(err)
	}
}

func isConnReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// drainReplies reads n reply lines from nc (simple replies only: the
// attacks that read use commands whose replies it can count by their
// first line or skip) in the background, and closes the channel it returns
// when they are read, the connection ends, or attackBound passes.
func drainReplies(nc net.Conn, n int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc.SetReadDeadline(time.Now().Add(attackBound + 2*time.Second))
		r := bufio.NewReaderSize(nc, 1<<16)
		for read := 0; read < n; {
			line, err := r.ReadSlice('\n')
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
			if len(line) > 0 && depthZeroReply(line[0]) {
				read++
			}
		}
	}()
	return done
}

// depthZeroReply reports whether a line starting with c can be a whole
// top-level reply or the head of one. The attacks that read get simple
// replies, integers, nils and arrays whose elements are bulk strings
// ($ headers and their payload lines do not count).
func depthZeroReply(c byte) bool { return c == '+' || c == '-' || c == ':' || c == '*' || c == '_' }

// pipeline sends cmds on a fresh connection and reads n reply lines, for
// untimed setup; the replies must be simple (integers, nil, OK).
func pipeline(t testing.TB, addr, cmds string, n int) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() {
		defer wg.Done()
		_, werr = io.WriteString(nc, cmds)
	}()
	r := bufio.NewReader(nc)
	for i := range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("setup reply %d: %v", i, err)
		}
		if strings.HasPrefix(line, "-") || strings.HasPrefix(line, "$-1") || strings.HasPrefix(line, "_") {
			t.Fatalf("setup reply %d: %s", i, strconv.Quote(line))
		}
	}
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
}
