package server

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/contention"
	"github.com/leasehold/leasehold/protocol"
	"github.com/rs/zerolog"
	"github.com/tidwall/redcon"
)

// BenchmarkHotPath measures what the server does per request between the
// socket reads and writes: parse a RESP frame, look the command up, run it
// against the lock table and build the reply. It reports allocations per
// command; a syscall-free loop makes the number repeatable.
func BenchmarkHotPath(b *testing.B) {
	cases := []struct {
		name  string
		frame func(i int) string
	}{
		{"ping", func(int) string { return "*1\r\n$4\r\nPING\r\n" }},
		{"acquire", func(i int) string {
			k := fmt.Sprintf("lock:%07d", i)
			return fmt.Sprintf("*3\r\n$7\r\nACQUIRE\r\n$%d\r\n%s\r\n$5\r\n30000\r\n", len(k), k)
		}},
		{"acquire+release", func(i int) string {
			// The token is unknown here, so RELEASE answers 0: same work.
			k := fmt.Sprintf("lock:%07d", i)
			return fmt.Sprintf("*3\r\n$7\r\nACQUIRE\r\n$%d\r\n%s\r\n$5\r\n30000\r\n*3\r\n$7\r\nRELEASE\r\n$%d\r\n%s\r\n$1\r\n1\r\n", len(k), k, len(k), k)
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			cfg := DefaultConfig()
			srv, err := New(cfg, zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			// A stream of distinct frames, replayed in a loop.
			var stream bytes.Buffer
			const frames = 4096
			for i := range frames {
				stream.WriteString(tc.frame(i))
			}
			src := &replay{data: stream.Bytes()}
			c := newConn(srv, "bench", "bench")
			c.wr = redcon.NewWriter(io.Discard)
			c.rd = protocol.NewReader(src, cfg.Limits)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				args, err := c.rd.ReadCommand()
				if err != nil {
					b.Fatal(err)
				}
				c.dispatch(args)
				if i%64 == 63 {
					c.flush()
				}
			}
		})
	}
}

// replay serves data over and over, in 16 KiB reads like a socket.
type replay struct {
	data []byte
	off  int
}

func (r *replay) Read(p []byte) (int, error) {
	if r.off == len(r.data) {
		r.off = 0
	}
	n := copy(p[:min(len(p), 16<<10)], r.data[r.off:])
	r.off += n
	return n, nil
}

// BenchmarkHandOff measures a lock passing from one client to a waiting one
// over real loopback connections: from the holder's RELEASE leaving to the
// waiter's token arriving. Each iteration the two swap roles.
func BenchmarkHandOff(b *testing.B) {
	ts := startServer(b)
	x, y := ts.dial(), ts.dial()
	x.send("ACQUIRE h 60000\r\n")
	tok := x.reply().(int64)
	holder, waiter := x, y
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		waiter.send("ACQUIRE h 60000 WAIT 60000\r\n")
		waitForWaitersB(b, ts, "h")
		start := time.Now()
		holder.send(fmt.Sprintf("RELEASE h %d\r\n", tok))
		next, ok := waiter.reply().(int64)
		lat = append(lat, time.Since(start))
		if !ok {
			b.Fatal("waiter got no token")
		}
		holder.reply() // the RELEASE's :1
		tok = next
		holder, waiter = waiter, holder
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// waitForWaitersB spins until key has a waiter, bounded in time.
func waitForWaitersB(b *testing.B, ts *testServer, key string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, _ := ts.Table().Status([]byte(key)); st.Waiters > 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the waiter never queued")
		}
	}
}

// BenchmarkHotPathCycle dispatches granted ACQUIREs and the RELEASEs of their
// tokens, the path a lock cycle takes; it must not allocate.
func BenchmarkHotPathCycle(b *testing.B) {
	srv, err := New(DefaultConfig(), zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	cy := newCycler(srv, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cy.cycle(b)
	}
}

// BenchmarkLockStatsCost is the price of the contention statistics on a
// lock cycle (ACQUIRE, RELEASE): over a million random keys, each seen about
// once, as redis-benchmark -r 1000000 sends them, the workload where a
// heavy-hitters sketch has the most to do; and over 64 keys, every one
// tracked, where every event updates its lock's statistics. The
// sub-benchmarks are the same cycle with the statistics off and on; compare
// them in one run, and interleave runs (-count 1, alternately) on a noisy
// machine.
func BenchmarkLockStatsCost(b *testing.B) {
	for _, keys := range []string{"random", "tracked"} {
		for _, tc := range []struct {
			name string
			top  int
		}{{"off", 0}, {"on", contention.DefaultTop}} {
			b.Run(keys+"/"+tc.name, func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.LockStatsTop = tc.top
				srv, err := New(cfg, zerolog.Nop())
				if err != nil {
					b.Fatal(err)
				}
				defer srv.Close()
				var cy *cycler
				if keys == "random" {
					cy = newCycler(srv, 0)
					cy.random = rand.New(rand.NewPCG(1, 2))
					cy.space = 1000000
				} else {
					cy = newCycler(srv, 64)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					cy.cycle(b)
				}
			})
		}
	}
}

// cycler runs lock cycles on a connection of srv with no socket, over its
// keys in turn: ACQUIRE a key, then RELEASE it with the token. With random
// set, the keys are drawn from "lock:0000000" up to space instead.
type cycler struct {
	c                *conn
	out              bytes.Buffer
	keys             [][]byte
	acquire, release [][]byte
	tok              []byte
	n                int
	random           *rand.Rand
	space            int
	keyBuf           []byte
}

func newCycler(srv *Server, keys int) *cycler {
	cy := &cycler{
		keys:    make([][]byte, keys),
		acquire: [][]byte{[]byte("ACQUIRE"), nil, []byte("30000")},
		release: [][]byte{[]byte("RELEASE"), nil, nil},
	}
	cy.c = newConn(srv, "test", "test")
	cy.c.wr = redcon.NewWriter(&cy.out)
	for i := range cy.keys {
		cy.keys[i] = []byte(fmt.Sprintf("lock:%07d", i))
	}
	return cy
}

// cycle takes and gives back the next key's lock, failing tb unless it was
// granted and released.
func (cy *cycler) cycle(tb testing.TB) {
	var k []byte
	if cy.random != nil {
		n := cy.random.IntN(cy.space)
		cy.keyBuf = append(cy.keyBuf[:0], "lock:"...)
		for d := 1000000; d > 0; d /= 10 { // "lock:%07d" without fmt
			cy.keyBuf = append(cy.keyBuf, byte('0'+n/d%10))
		}
		k = cy.keyBuf
	} else {
		k = cy.keys[cy.n%len(cy.keys)]
	}
	cy.n++
	cy.acquire[1] = k
	cy.c.dispatch(cy.acquire)
	cy.c.flush()
	reply := cy.out.Bytes()
	if len(reply) < 4 || reply[0] != ':' {
		tb.Fatalf("ACQUIRE answered %q", reply)
	}
	cy.tok = append(cy.tok[:0], reply[1:len(reply)-2]...)
	cy.out.Reset()
	cy.release[1], cy.release[2] = k, cy.tok
	cy.c.dispatch(cy.release)
	cy.c.flush()
	if cy.out.String() != ":1\r\n" {
		tb.Fatalf("RELEASE answered %q", cy.out.String())
	}
	cy.out.Reset()
}
