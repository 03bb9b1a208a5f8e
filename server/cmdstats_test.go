package server

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"github.com/leasehold/leasehold/internal/cmdstats"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/stats"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/internal/tlstest"
)

// transports runs f against a server on each transport: goroutines
// (--io-loops 0) and one event loop.
func transports(t *testing.T, f func(t *testing.T, opts ...option)) {
	for _, loops := range []int{0, 1} {
		name := map[int]string{0: "goroutines", 1: "event loop"}[loops]
		t.Run(name, func(t *testing.T) {
			f(t, func(c *Config) { c.IOLoops = loops })
		})
	}
}

// commandStatsOf is the figures of command name, zero if it has none.
func commandStatsOf(s *Server, name string) stats.CommandStats {
	for _, st := range s.StatsSnapshot().Commands {
		if st.Name == name {
			return st
		}
	}
	return stats.CommandStats{Name: name}
}

// TestCommandStats: commands sent by a client are counted by name and
// outcome, in Stats and INFO commandstats and latencystats; the bytes it
// sent and read are counted; unknown names count as "unknown".
func TestCommandStats(t *testing.T) {
	transports(t, func(t *testing.T, opts ...option) {
		ts := startServer(t, opts...)
		rc := ts.dial()
		sent, read := 0, 0
		send := func(cmd string) string {
			t.Helper()
			rc.send(cmd)
			sent += len(cmd)
			l := rc.line()
			read += len(l) + 2
			return l
		}
		const pings = 7
		for range pings {
			if l := send("PING\r\n"); l != "+PONG" {
				t.Fatalf("PING: %q", l)
			}
		}
		for i := range 3 {
			if l := send(fmt.Sprintf("ACQUIRE k%d 60000\r\n", i)); !strings.HasPrefix(l, ":") {
				t.Fatalf("ACQUIRE: %q", l)
			}
		}
		// Failed: the command ran and answered an error.
		if l := send("ACQUIRE k 1x\r\n"); !strings.HasPrefix(l, "-") {
			t.Fatalf("ACQUIRE with a bad TTL: %q", l)
		}
		// Rejected: wrong arity, and names not in the table.
		if l := send("ACQUIRE\r\n"); !strings.HasPrefix(l, "-ERR wrong number") {
			t.Fatalf("ACQUIRE without a key: %q", l)
		}
		hostile := "*1\r\n$27\r\ncmdstat_evil:calls=1\r\n# X\r\n\r\n"
		for _, cmd := range []string{"NOSUCHCOMMAND\r\n", hostile} {
			if l := send(cmd); !strings.HasPrefix(l, "-ERR unknown command") {
				t.Fatalf("%q: %q", cmd, l)
			}
		}

		ping := commandStatsOf(ts.Server, "ping")
		if ping.Calls != pings || ping.Failed != 0 || ping.Rejected != 0 {
			t.Errorf("ping: %+v, want %d calls", ping, pings)
		}
		var inBuckets uint64
		for _, n := range ping.Buckets {
			inBuckets += n
		}
		if inBuckets != pings || ping.Duration <= 0 {
			t.Errorf("ping: %d calls in the histogram, duration %v", inBuckets, ping.Duration)
		}
		acq := commandStatsOf(ts.Server, "acquire")
		if acq.Calls != 4 || acq.Failed != 1 || acq.Rejected != 1 {
			t.Errorf("acquire: %+v, want 4 calls, 1 failed, 1 rejected", acq)
		}
		unknown := commandStatsOf(ts.Server, cmdstats.Unknown)
		if unknown.Calls != 0 || unknown.Rejected != 2 {
			t.Errorf("unknown: %+v, want 2 rejected", unknown)
		}
		for _, st := range ts.StatsSnapshot().Commands {
			if st.Calls == 0 && st.Rejected == 0 {
				t.Errorf("%s listed without a call", st.Name)
			}
		}

		// Bytes: the server read at least what was sent, and wrote at
		// least what was read (its write is counted once the socket took
		// it, which may be just after the client has it).
		testutil.Eventually(t, 5*time.Second, "bytes counted", func() bool {
			tr := ts.StatsSnapshot().Traffic
			return tr.NetInputBytes >= uint64(sent) && tr.NetOutputBytes >= uint64(read)
		})
		if tr := ts.StatsSnapshot().Traffic; tr.NetInputBytes != uint64(sent) {
			t.Errorf("net input %d bytes, the client sent %d", tr.NetInputBytes, sent)
		}

		info := do(t, ts.client(), "INFO", "commandstats").Text()
		for _, want := range []string{
			"# Commandstats\r\n",
			fmt.Sprintf("cmdstat_ping:calls=%d,usec=", pings),
			",rejected_calls=1,failed_calls=1\r\n",
			"cmdstat_unknown:calls=0,usec=0,usec_per_call=0.00,rejected_calls=2,failed_calls=0\r\n",
		} {
			if !strings.Contains(info, want) {
				t.Errorf("INFO commandstats lacks %q:\n%s", want, info)
			}
		}
		if strings.Contains(info, "evil") || strings.Contains(info, "nosuch") || strings.Contains(info, "# X") {
			t.Errorf("a client's command name made it into INFO commandstats:\n%s", info)
		}
		lat := do(t, ts.client(), "INFO", "latencystats").Text()
		if !strings.Contains(lat, "latency_percentiles_usec_ping:p50=") || strings.Contains(lat, "_unknown:") {
			t.Errorf("INFO latencystats:\n%s", lat)
		}
		stats := do(t, ts.client(), "INFO", "stats").Text()
		for _, want := range []string{"total_net_input_bytes:", "total_net_output_bytes:", "idle_timeout_disconnections:0\r\n"} {
			if !strings.Contains(stats, want) {
				t.Errorf("INFO stats lacks %q:\n%s", want, stats)
			}
		}
		// As in Redis, the sections of a line per command are left out of
		// INFO and INFO default, and in INFO all and everything.
		for _, args := range [][]any{{"INFO"}, {"INFO", "default"}} {
			if text := do(t, ts.client(), args...).Text(); strings.Contains(text, "cmdstat_") || strings.Contains(text, "# Latencystats") {
				t.Errorf("%v has the command sections", args)
			}
		}
		for _, args := range [][]any{{"INFO", "all"}, {"INFO", "everything"}} {
			if text := do(t, ts.client(), args...).Text(); !strings.Contains(text, "cmdstat_ping:") || !strings.Contains(text, "# Latencystats") {
				t.Errorf("%v lacks the command sections", args)
			}
		}
	})
}

// TestIdleClosesCounted: a connection the idle timeout closes is counted,
// on either transport, and one the server closes at shutdown is not.
func TestIdleClosesCounted(t *testing.T) {
	transports(t, func(t *testing.T, opts ...option) {
		ts := startServer(t, append(opts, withIdleTimeout(200*time.Millisecond))...)
		rc := ts.dial()
		rc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if !rc.closed() {
			t.Fatal("the idle connection was not closed")
		}
		testutil.Eventually(t, 5*time.Second, "the idle close counted", func() bool {
			return ts.StatsSnapshot().Traffic.IdleCloses == 1
		})
		busy := ts.dial()
		busy.send("PING\r\n")
		if l := busy.line(); l != "+PONG" {
			t.Fatalf("PING: %q", l)
		}
		if err := ts.run.Close(); err != nil {
			t.Fatal(err)
		}
		if n := ts.StatsSnapshot().Traffic.IdleCloses; n != 1 {
			t.Errorf("%d idle closes after a shutdown closed a connection, want 1", n)
		}
	})
}

// TestNetBytesTLS: under TLS the bytes counted are the socket's, the
// records with their overhead, not the plaintext, on either transport.
func TestNetBytesTLS(t *testing.T) {
	transports(t, func(t *testing.T, opts ...option) {
		f := tlstest.New(t, t.TempDir())
		ts := startServer(t, append(opts, withTLS(f, "yes"))...)
		tc, err := tls.Dial("tcp", ts.TLSAddr().String(), f.ClientConfig(t, "alice"))
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		in0 := ts.StatsSnapshot().Traffic.NetInputBytes
		rd := bufio.NewReader(tc)
		const pings = 10
		for range pings {
			if _, err := tc.Write([]byte("PING\r\n")); err != nil { // a record each
				t.Fatal(err)
			}
			if l, err := rd.ReadString('\n'); err != nil || l != "+PONG\r\n" {
				t.Fatalf("PING over TLS: %q, %v", l, err)
			}
		}
		// Each record carries at least a 16-byte tag besides its 6 bytes.
		if in := ts.StatsSnapshot().Traffic.NetInputBytes - in0; in < pings*(6+16) {
			t.Errorf("%d bytes in counted for %d PINGs in records of their own", in, pings)
		}
	})
}

// TestInfoCountsItsRound: INFO commandstats counts the commands pipelined
// before it, though their round has not ended.
func TestInfoCountsItsRound(t *testing.T) {
	transports(t, func(t *testing.T, opts ...option) {
		ts := startServer(t, opts...)
		rc := ts.dial()
		rc.send("PING\r\nPING\r\nINFO commandstats\r\n")
		for range 2 {
			if l := rc.line(); l != "+PONG" {
				t.Fatalf("PING: %q", l)
			}
		}
		var n int
		if _, err := fmt.Sscanf(rc.line(), "$%d", &n); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, body); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), "cmdstat_ping:calls=2,") {
			t.Errorf("INFO commandstats after two pipelined PINGs:\n%s", body)
		}
	})
}
