package server

import (
	"bufio"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/rs/zerolog"
)

// TestCloseAnswersParkedWaits: Close ends every parked WAIT, ACQUIRE's and
// MACQUIRE's, with the SHUTDOWN error rather than a silent hang-up, and
// grants nothing to them.
func TestCloseAnswersParkedWaits(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	do(t, rdb, "ACQUIRE", "busy", 60000).Token()
	single := ts.dial()
	single.send("ACQUIRE busy 60000 WAIT 30000\r\n")
	multi := ts.dial()
	multi.send("MACQUIRE 60000 2 free busy WAIT 30000\r\n")
	waitForWaiters(t, ts, "busy", 2)

	if err := ts.run.Close(); err != nil {
		t.Fatal(err)
	}
	for name, rc := range map[string]*rawConn{"ACQUIRE": single, "MACQUIRE": multi} {
		rc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if got := rc.line(); got != "-SHUTDOWN server is shutting down" {
			t.Errorf("parked %s got %q, want the SHUTDOWN error", name, got)
		}
		if !rc.closed() {
			t.Errorf("parked %s: the connection is still open after Close", name)
		}
	}
	if st, _ := ts.Table().Status([]byte("free")); st.Held {
		t.Errorf("free is held after the MACQUIRE that took it on its way was told SHUTDOWN: %+v", st)
	}
}

// TestCloseWaitsForTheFirstClose: a second Close (ListenAndServe's, after
// Serve returned) must not return while the first is still shutting down,
// or the process exits before the EPHEMERAL leases are released and the
// log is synced. Once either returns, the data directory is free and holds
// the release.
func TestCloseWaitsForTheFirstClose(t *testing.T) {
	dir := t.TempDir()
	p := startPersist(t, dir)
	held := do(t, p.rdb, "ACQUIRE", "held", 60000).Token()
	side := p.run.Dial(t)
	rc := &rawConn{t: t, Conn: side, r: bufio.NewReader(side)}
	rc.send("ACQUIRE eph 60000 EPHEMERAL\r\n")
	eph := token(t, rc)

	closed := make(chan error, 2)
	for range 2 {
		go func() { closed <- p.srv.Close() }()
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	srv, err := New(persistConfig(t, dir), zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatalf("a Close returned, and the data directory cannot be opened: %v", err)
	}
	defer srv.Close()
	if !srv.Table().Verify([]byte("held"), uint64(held)) {
		t.Error("the acknowledged lease on held was lost")
	}
	if srv.Table().Verify([]byte("eph"), uint64(eph)) {
		t.Error("the EPHEMERAL lease on eph is held after a clean shutdown")
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestShutdownTimeoutBoundsClose: a client that pipelines commands with
// large replies and never reads them cannot hold the shutdown up beyond
// its timeout; its connection is closed regardless, and that is logged.
func TestShutdownTimeoutBoundsClose(t *testing.T) {
	const timeout = 300 * time.Millisecond
	logs := &testutil.SyncBuffer{}
	ts := startServerLogging(t, zerolog.New(logs), func(c *Config) { c.ShutdownTimeout = timeout })
	rc := ts.dial()
	big := strings.Repeat("x", 512<<10)
	frame := "*2\r\n$4\r\nPING\r\n$" + strconv.Itoa(len(big)) + "\r\n" + big + "\r\n"
	sent := 0
	rc.SetWriteDeadline(time.Now().Add(time.Second))
	for range 32 { // 16 MiB of replies, far more than the sockets hold
		if _, err := rc.Write([]byte(frame)); err != nil {
			break // the server stopped reading: its replies wait for us
		}
		sent++
	}
	// What is tested needs replies the server holds unsent: on a loaded
	// machine it may have run only a few commands by now, whose replies
	// the sockets' buffers took whole.
	testutil.Eventually(t, 10*time.Second, "replies held unsent", func() bool {
		return ts.StatsSnapshot().Clients.OutputBufferPeak > 0
	})
	start := time.Now()
	if err := ts.run.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > timeout+2*time.Second {
		t.Errorf("Close took %s with a shutdown timeout of %s", took, timeout)
	}
	if !strings.Contains(logs.String(), "shutdown timeout") {
		t.Errorf("no \"shutdown timeout\" in the log (sent %d commands):\n%s", sent, logs)
	}
}

// TestShutdownTimeoutValidated: the bound is positive; Validate refuses
// anything else rather than shut down without one.
func TestShutdownTimeoutValidated(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		cfg := DefaultConfig()
		cfg.ShutdownTimeout = d
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "shutdown timeout") {
			t.Errorf("Validate with a shutdown timeout of %s = %v, want it refused", d, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
}
