package command

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestShutdownIsGraceful stops the binary on a data directory with SIGTERM
// while one client holds an EPHEMERAL lease and another is parked in
// ACQUIRE ... WAIT, under every fsync policy and on both transports. The
// waiter must be told that the server is shutting down, the process must
// exit 0, and on the next start the EPHEMERAL lease must be released (its
// release journalled and synced before the exit) while an ordinary
// acknowledged lease is still held.
func TestShutdownIsGraceful(t *testing.T) {
	t.Parallel()
	for _, fsync := range []string{"always", "everysec", "no"} {
		for _, loops := range []string{"1", "0"} {
			t.Run(fsync+"/io-loops="+loops, func(t *testing.T) {
				t.Parallel()
				testShutdownIsGraceful(t, "--fsync", fsync, "--io-loops", loops)
			})
		}
	}
}

func testShutdownIsGraceful(t *testing.T, extra ...string) {
	dir := t.TempDir()
	p, rdb := crashServe(t, dir, extra...)
	probe := newShutdownProbe(t, rdb)
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0\nstderr: %s", exit, p.stderr)
	}
	probe.told(t)
	if l := lineWith(p.logLines(), "shut down"); l == nil {
		t.Errorf("no \"shut down\" line in the log:\n%s", p.stderr)
	}
	p, rdb = crashServe(t, dir, extra...)
	probe.kept(t, rdb)
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Errorf("exit status %d after the second SIGTERM\nstderr: %s", exit, p.stderr)
	}
}

// shutdownProbe is what a clean shutdown must handle, set up on the server
// rdb talks to: an ordinary lease, an EPHEMERAL lease on a connection of its
// own, and a request parked in ACQUIRE ... WAIT behind the first.
type shutdownProbe struct {
	held, eph any        // the leases' tokens
	waited    chan error // the parked request's reply
}

func newShutdownProbe(t *testing.T, rdb *redis.Client) *shutdownProbe {
	t.Helper()
	addr := rdb.Options().Addr
	held, err := crashDo(rdb, "ACQUIRE", "probe-held", crashTTL.Milliseconds(), "OWNER", "keeper")
	if err != nil {
		t.Fatalf("ACQUIRE probe-held: %v", err)
	}
	eph, err := crashDo(crashClient(t, addr), "ACQUIRE", "probe-eph", crashTTL.Milliseconds(), "EPHEMERAL")
	if err != nil {
		t.Fatalf("ACQUIRE probe-eph EPHEMERAL: %v", err)
	}
	g := &shutdownProbe{held: held, eph: eph, waited: make(chan error, 1)}
	waiter := crashClient(t, addr)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		defer cancel()
		g.waited <- waiter.Do(ctx, "ACQUIRE", "probe-held", crashTTL.Milliseconds(), "WAIT", 60000).Err()
	}()
	waitBlocked(t, rdb, 1)
	return g
}

// told checks, after the SIGTERM, that the parked request was told why its
// wait ended.
func (g *shutdownProbe) told(t *testing.T) {
	t.Helper()
	select {
	case err := <-g.waited:
		var re redis.Error
		if !errors.As(err, &re) || !strings.HasPrefix(err.Error(), "SHUTDOWN ") {
			t.Errorf("the parked ACQUIRE ... WAIT got %v, want a SHUTDOWN error reply", err)
		}
	case <-time.After(commandTimeout):
		t.Fatal("the parked ACQUIRE ... WAIT got no reply")
	}
}

// kept checks, after the restart, that the ordinary lease is held and the
// EPHEMERAL one was released by the shutdown.
func (g *shutdownProbe) kept(t *testing.T, rdb *redis.Client) {
	t.Helper()
	if v, err := crashDo(rdb, "VERIFY", "probe-held", g.held); err != nil || v != int64(1) {
		t.Errorf("after the restart VERIFY probe-held %v = %v, %v; want 1: an acknowledged lease was lost", g.held, v, err)
	}
	if v, err := crashDo(rdb, "VERIFY", "probe-eph", g.eph); err != nil || v != int64(0) {
		t.Errorf("after the restart VERIFY probe-eph %v = %v, %v; want 0: the EPHEMERAL lease outlived its connection", g.eph, v, err)
	}
}

// TestShutdownTimeout: a client that pipelines commands with large replies
// and never reads them holds the shutdown up only for --shutdown-timeout
// (here far below the 10s default and p.stop's 5s), then its connection is
// closed regardless, that is logged, and the exit status is still 0.
func TestShutdownTimeout(t *testing.T) {
	t.Parallel()
	for _, loops := range []string{"1", "0"} {
		t.Run("io-loops="+loops, func(t *testing.T) {
			t.Parallel()
			// One reply larger than the sockets hold: the server stops
			// running a client's commands once 64 KiB of its output waits,
			// so only a single reply can leave that much unsent.
			const size = 24 << 20
			p, addr := serveBinary(t, serveArgs("--shutdown-timeout", "300ms", "--io-loops", loops, "--max-bulk-len", strconv.Itoa(size)))
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			big := strings.Repeat("x", size)
			frame := []byte(fmt.Sprintf("*2\r\n$4\r\nPING\r\n$%d\r\n%s\r\n", len(big), big))
			nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := nc.Write(frame); err != nil {
				t.Fatal(err)
			}
			waitOutputHeld(t, addr)
			start := time.Now()
			if exit := p.stop(syscall.SIGTERM); exit != 0 {
				t.Errorf("exit status %d after SIGTERM, want 0\nstderr: %s", exit, p.stderr)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("the shutdown took %s with --shutdown-timeout 300ms", took)
			}
			var cut bool
			for _, l := range p.logLines() {
				cut = cut || l["level"] == "warn" && strings.HasPrefix(fmt.Sprint(l["message"]), "shutdown timeout")
			}
			if !cut {
				t.Errorf("no \"shutdown timeout\" warning in the log:\n%s", p.stderr)
			}
		})
	}
}

// waitBlocked polls INFO until n clients are parked in a WAIT.
func waitBlocked(t *testing.T, rdb *redis.Client, n int) {
	t.Helper()
	want := "blocked_clients:" + strconv.Itoa(n)
	deadline := time.After(commandTimeout)
	for {
		v, err := crashDo(rdb, "INFO", "clients")
		if err != nil {
			t.Fatalf("INFO clients: %v", err)
		}
		if s, _ := v.(string); strings.Contains(s, want+"\r\n") {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("INFO clients never said %s: %v", want, v)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitOutputHeld polls INFO until a connection of the server at addr has
// had more output unsent than its socket took at once: a reply far larger
// than the socket buffers is waiting for its client.
func waitOutputHeld(t *testing.T, addr string) {
	t.Helper()
	rdb := client(t, addr)
	deadline := time.After(commandTimeout)
	for {
		v, err := crashDo(rdb, "INFO", "clients")
		if err != nil {
			t.Fatalf("INFO clients: %v", err)
		}
		s, _ := v.(string)
		if _, peak, ok := strings.Cut(s, "client_output_buffer_peak:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(peak, "\r\n", 2)[0])); err == nil && n >= 1<<20 {
				return
			}
		}
		select {
		case <-deadline:
			t.Fatalf("no connection ever held a megabyte of output: %v", v)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
