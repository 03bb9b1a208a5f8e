package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/protocol"
	"github.com/redis/go-redis/v9"
)

// readEOF reads until the server closes the connection (bounded by the
// connection's deadline) and returns the bytes read before the close and the
// error that ended the read.
func readEOF(rc *rawConn) (string, error) {
	var b bytes.Buffer
	for {
		c, err := rc.r.ReadByte()
		if err != nil {
			return b.String(), err
		}
		b.WriteByte(c)
	}
}

// wantClosed checks that the server closed rc cleanly: EOF with nothing more
// to read.
func wantClosed(t testing.TB, rc *rawConn) {
	t.Helper()
	rest, err := readEOF(rc)
	if !errors.Is(err, io.EOF) || rest != "" {
		t.Fatalf("want EOF, got %v after %q", err, rest)
	}
}

// stillServes checks on a fresh connection that the server answers.
func stillServes(t testing.TB, ts *testServer) {
	t.Helper()
	rc := ts.dial()
	rc.send("PING\r\n" + resp("ACQUIRE", "alive", "10000"))
	rc.expect("PONG")
	tok, ok := rc.reply().(int64)
	if !ok || tok <= 0 {
		t.Fatal("ACQUIRE on a fresh connection did not grant a token")
	}
	rc.send(resp("RELEASE", "alive", fmt.Sprint(tok)))
	rc.expect(int64(1))
}

func TestMalformed(t *testing.T) {
	const maxBulk = 4096
	ts := startServer(t, func(c *Config) { c.Limits.MaxBulkLen = maxBulk })
	big := func(prefix string, n int, fill byte) string { return prefix + strings.Repeat(string(fill), n) }
	inlineMax := DefaultConfig().Limits.MaxInlineLen

	for _, tc := range []struct {
		name, in, msg string
	}{
		{"huge bulk length", "*1\r\n$9223372036854775807\r\nxx\r\n", "invalid bulk length"},
		{"bulk length overflows int64", "*1\r\n$92233720368547758070\r\n", "invalid bulk length"},
		{"negative bulk length", "*1\r\n$-1\r\n", "invalid bulk length"},
		{"huge multibulk", "*10000000000\r\n", "invalid multibulk length"},
		{"multibulk over the limit", fmt.Sprintf("*%d\r\n", DefaultConfig().Limits.MaxMultibulk+1), "invalid multibulk length"},
		{"multibulk not a number", "*abc\r\n", "invalid multibulk length"},
		{"multibulk CR without LF", "*1\rx\n", "invalid multibulk length"},
		{"bulk length not a number", "*1\r\n$abc\r\n", "invalid bulk length"},
		{"expected dollar", "*1\r\nfoo\r\n", "expected '$', got 'f'"},
		{"expected dollar, second arg", "*2\r\n$4\r\nECHO\r\n:1\r\n", "expected '$', got ':'"},
		{"bulk not followed by CRLF", "*1\r\n$3\r\nfooXY", "expected CRLF after bulk data"},
		{"inline over 64 KiB", big("", inlineMax+1, 'a'), "too big inline request"},
		{"inline over 64 KiB with spaces", big("ECHO ", inlineMax+1-5, 'b'), "too big inline request"},
		{"multibulk header over 64 KiB", big("*", inlineMax, '1'), "too big mbulk count string"},
		{"bulk header over 64 KiB", big("*1\r\n$", inlineMax, '1'), "too big bulk count string"},
		{"bulk over max bulk len", fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n", maxBulk+1), "invalid bulk length"},
		{"unbalanced double quote", "ECHO \"abc\r\n", "unbalanced quotes in request"},
		{"unbalanced single quote", "ECHO 'abc\r\n", "unbalanced quotes in request"},
		{"closing quote glued to text", "ECHO \"a\"b\r\n", "unbalanced quotes in request"},
		{"error after a good command", "PING\r\n*abc\r\n", "invalid multibulk length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := ts.dial()
			rc.send(tc.in)
			if strings.HasPrefix(tc.in, "PING\r\n") {
				rc.expect("PONG")
			}
			if got, want := rc.line(), "-ERR Protocol error: "+tc.msg; got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
			wantClosed(t, rc)
			stillServes(t, ts)
		})
	}

	// Frames Redis ignores are not errors.
	rc := ts.dial()
	rc.send("*0\r\n*-1\r\n*-5\r\n" + resp("ECHO", "after"))
	rc.expect("after")
	// The longest allowed bulk and inline line are accepted.
	rc.send(resp("ECHO", strings.Repeat("z", maxBulk)))
	rc.expect(strings.Repeat("z", maxBulk))
	rc.send("ECHO " + strings.Repeat("y", inlineMax-5) + "\n")
	rc.expect(strings.Repeat("y", inlineMax-5))

	cn := stickyConn(t, ts.client())
	if got := infoField(t, cn, "stats", "total_protocol_errors"); got != "20" {
		t.Errorf("total_protocol_errors = %s, want 20", got)
	}
}

func TestTrickledLargeArgument(t *testing.T) {
	ts := startServer(t)
	rc := ts.dial() // its deadline bounds the test
	payload := make([]byte, 512<<10)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	frame := []byte(resp("ECHO", string(payload)) + resp("PING"))

	// One byte per write for the first 4 KiB and the last 64 bytes, so that
	// every header and the CRLFs are split at every position; 32 KiB chunks
	// in between.
	start := time.Now()
	for off := 0; off < len(frame); {
		n := 32 << 10
		if off < 4<<10 || off >= len(frame)-64 {
			n = 1
		}
		n = min(n, len(frame)-off)
		if _, err := rc.Write(frame[off : off+n]); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
		off += n
	}
	if got := rc.reply(); got != string(payload) {
		s, _ := got.(string)
		t.Fatalf("ECHO of 512 KiB trickled: got %T of %d bytes", got, len(s))
	}
	rc.expect("PONG")
	t.Logf("trickled %d bytes in %v", len(frame), time.Since(start))
}

func TestIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	ts := startServer(t, func(c *Config) { c.IdleTimeout = idle })

	for _, tc := range []struct{ name, prefix string }{
		{"between commands", ""},
		{"mid-command", "*2\r\n$4\r\nECHO\r\n$5\r\nab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := ts.dial()
			// One write, so that the PONG proves the prefix was read too.
			rc.send("PING\r\n" + tc.prefix)
			rc.expect("PONG")
			start := time.Now()
			// dial's deadline (10 s) bounds the wait.
			rest, err := readEOF(rc)
			took := time.Since(start)
			if !errors.Is(err, io.EOF) || rest != "" {
				t.Fatalf("want EOF, got %v after %q", err, rest)
			}
			if took < idle/2 || took > 5*time.Second {
				t.Fatalf("closed after %v, want about %v", took, idle)
			}
		})
	}
	stillServes(t, ts)
}

func TestMaxClients(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxClients = 2 })

	first, second := ts.dial(), ts.dial()
	// A reply proves each is registered before the third connects.
	for _, rc := range []*rawConn{first, second} {
		rc.send("PING\r\n")
		rc.expect("PONG")
	}
	third := ts.dial()
	if got := third.line(); got != "-ERR max number of clients reached" {
		t.Fatalf("third connection got %q", got)
	}
	wantClosed(t, third)

	for i, rc := range []*rawConn{first, second} {
		key := fmt.Sprintf("mc%d", i)
		rc.send(resp("ACQUIRE", key, "1000"))
		if tok, ok := rc.reply().(int64); !ok || tok <= 0 {
			t.Fatalf("connection %d: ACQUIRE did not grant", i)
		}
	}
	first.send(resp("INFO", "stats"))
	info, _ := first.reply().(string)
	if !strings.Contains(info, "rejected_connections:1\r\n") {
		t.Fatalf("INFO stats = %q, want rejected_connections:1", info)
	}
	first.send(resp("INFO", "clients"))
	info, _ = first.reply().(string)
	if !strings.Contains(info, "connected_clients:2\r\n") {
		t.Fatalf("INFO clients = %q, want connected_clients:2", info)
	}
}

// setHandler replaces a command's handler on one server instance. Taking the
// server's mutex orders the write before every connection accepted after it
// (startConn takes the same mutex), which is what the race detector needs.
func setHandler(ts *testServer, name string, h handler) {
	ts.t.Helper()
	i := protocol.LookupIndex([]byte(name))
	if i < 0 {
		ts.t.Fatalf("no command %q", name)
	}
	ts.Server.mu.Lock()
	ts.Server.handlers[i] = h
	ts.Server.mu.Unlock()
}

func TestHandlerPanic(t *testing.T) {
	ts := startServer(t)
	setHandler(ts, "ping", func(*conn, [][]byte) error { panic("boom") })

	rc := ts.dial()
	rc.send(resp("ECHO", "before"))
	rc.expect("before")
	rc.send("PING\r\n")
	wantClosed(t, rc)

	// Other connections, and the lock table, are unharmed.
	other := ts.dial()
	other.send(resp("ACQUIRE", "p", "1000") + resp("ECHO", "fine"))
	if tok, ok := other.reply().(int64); !ok || tok <= 0 {
		t.Fatal("ACQUIRE after a panic did not grant")
	}
	other.expect("fine")
	rdb := ts.client()
	if got := infoField(t, rdb, "stats", "total_handler_panics"); got != "1" {
		t.Fatalf("total_handler_panics = %s, want 1", got)
	}
	// A second panic on yet another connection is contained too.
	again := ts.dial()
	again.send("PING\r\n")
	wantClosed(t, again)
	if got := infoField(t, rdb, "stats", "total_handler_panics"); got != "2" {
		t.Fatalf("total_handler_panics = %s, want 2", got)
	}
}

func TestCloseWithClients(t *testing.T) {
	ts := startServer(t)

	idle := ts.dial()
	idle.send("PING\r\n")
	idle.expect("PONG")

	// Mid-command: the partial frame goes in the same write as a PING, so
	// that the PONG proves the server has read it. (Bytes still unread in
	// the kernel when the server closes would make it send RST, not FIN.)
	partial := ts.dial()
	partial.send("PING\r\n*2\r\n$4\r\nECHO\r\n$10\r\nab")
	partial.expect("PONG")

	inline := ts.dial()
	inline.send("PING\r\nACQUIRE k 10") // mid-line
	inline.expect("PONG")

	rdb := redis.NewClient(&redis.Options{Addr: ts.addr, MaxRetries: -1})
	defer rdb.Close()
	do(t, rdb, "PING").Str("PONG")

	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- ts.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with clients connected")
	}
	t.Logf("Close took %v", time.Since(start))

	for name, rc := range map[string]*rawConn{"idle": idle, "partial": partial, "inline": inline} {
		if rest, err := readEOF(rc); !errors.Is(err, io.EOF) || rest != "" {
			t.Errorf("%s client: want EOF, got %v after %q", name, err, rest)
		}
	}
	if err := rdb.Ping(ctx(t)).Err(); err == nil {
		t.Error("go-redis PING succeeded after Close")
	}
	if nc, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		nc.Close()
		t.Error("a new connection was accepted after Close")
	}
	if err := ts.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCloseWaitsForRunningHandler(t *testing.T) {
	ts := startServer(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	setHandler(ts, "echo", func(c *conn, args [][]byte) error {
		close(entered)
		<-release
		c.wr.WriteBulk(args[1])
		return nil
	})

	rc := ts.dial()
	rc.send(resp("ECHO", "slow"))
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("handler not entered")
	}
	closed := make(chan error, 1)
	go func() { closed <- ts.Close() }()
	select {
	case <-closed:
		close(release)
		t.Fatal("Close returned while a handler was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return once the handler finished")
	}
	// The connection was closed under the handler: its reply may or may not
	// have gone out, but the stream ends cleanly.
	rest, err := readEOF(rc)
	if !errors.Is(err, io.EOF) || (rest != "" && rest != "$4\r\nslow\r\n") {
		t.Fatalf("want EOF, got %v after %q", err, rest)
	}
}

// TestRandomSplits sends a mixed stream of RESP and inline commands in writes
// of random sizes, so that every kind of frame is split at many boundaries,
// and checks every reply (redcon's TestRandomCommands, end to end).
func TestRandomSplits(t *testing.T) {
	ts := startServer(t)
	rng := rand.New(rand.NewPCG(1, 2))
	type token struct{} // a granted token, whose value cannot be predicted
	var stream bytes.Buffer
	var want []any
	for i := range 500 {
		switch rng.IntN(5) {
		case 0:
			stream.WriteString("PING\r\n")
			want = append(want, "PONG")
		case 1:
			p := make([]byte, rng.IntN(300))
			for j := range p {
				p[j] = byte(rng.IntN(256))
			}
			stream.WriteString(resp("ECHO", string(p)))
			want = append(want, string(p))
		case 2:
			p := make([]byte, 1+rng.IntN(40))
			var q strings.Builder
			for j := range p {
				p[j] = byte(rng.IntN(256))
				fmt.Fprintf(&q, `\x%02x`, p[j])
			}
			fmt.Fprintf(&stream, "echo \"%s\"\r\n", q.String())
			want = append(want, string(p))
		case 3:
			stream.WriteString(resp("ACQUIRE", fmt.Sprintf("split:%d", i), "60000", "OWNER", "me"))
			want = append(want, token{})
		case 4:
			stream.WriteString(resp("VERIFY", "split:none", "1"))
			want = append(want, int64(0))
		}
	}

	rc := ts.dial() // its deadline bounds the test
	wrote := make(chan error, 1)
	go func() {
		b := stream.Bytes()
		for len(b) > 0 {
			n := min(1+rng.IntN(300), len(b))
			if _, err := rc.Write(b[:n]); err != nil {
				wrote <- err
				return
			}
			b = b[n:]
		}
		wrote <- nil
	}()
	for i, w := range want {
		got := rc.reply()
		if _, ok := w.(token); ok {
			if n, ok := got.(int64); !ok || n <= 0 {
				t.Fatalf("reply %d: %#v, want a token", i, got)
			}
			continue
		}
		if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", w) {
			t.Fatalf("reply %d: %#v, want %#v", i, got, w)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}
