//go:build linux

package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"golang.org/x/sys/unix"
)

// oneLoop runs the server on a single event loop, so that the connections
// of a test take turns on it; tests of the goroutine transport skip.
func oneLoop(t *testing.T) option {
	if cfg := testConfig(t); cfg.IOLoops == 0 {
		t.Skip("the event loop's rounds only")
	}
	return func(c *Config) { c.IOLoops = 1 }
}

// oneLoopOrGoroutines runs the server on a single event loop, as oneLoop,
// or on the goroutine transport when the tests choose it: for behaviour
// that both transports must have.
func oneLoopOrGoroutines(t *testing.T) option {
	if cfg := testConfig(t); cfg.IOLoops == 0 {
		return func(*Config) {}
	}
	return func(c *Config) { c.IOLoops = 1 }
}

// unsent returns the bytes nc has written that the server's socket has not
// acknowledged (SIOCOUTQ): 0 once they are all in the server's buffer.
func unsent(t *testing.T, nc net.Conn) int {
	t.Helper()
	raw, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	n, ioerr := 0, error(nil)
	raw.Control(func(fd uintptr) { n, ioerr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
	if ioerr != nil {
		t.Fatal(ioerr)
	}
	return n
}

func commandsProcessed(t *testing.T, rdb doer) int {
	t.Helper()
	n, err := strconv.Atoi(infoField(t, rdb, "stats", "total_commands_processed"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPipelineYieldsToOtherClients is the report's 1M pipelined PINGs, made
// deterministic: two clients wait for a lock each, one with a pipeline
// behind its ACQUIRE, the other with an INFO behind its own, and one write
// releases both locks, the pipeline's first. The loop used to run the whole
// pipeline before it served the other client; now it runs a round's worth
// (roundCommands cheap commands, or roundInputBytes of large ones) and
// serves the other client, and the rest of the pipeline, left in the
// reader's buffer where no epoll event reports it, still runs (the loop's
// ready list).
func TestPipelineYieldsToOtherClients(t *testing.T) {
	var mrelease strings.Builder
	mrelease.WriteString("MRELEASE")
	for i := range 300 {
		fmt.Fprintf(&mrelease, " k%03d 1", i)
	}
	mrelease.WriteString("\r\n")
	for _, tc := range []struct {
		name    string
		command string // each answered with a line
		reply   string
		n       int // all in the server's socket buffer at once
		most    int // that may run before the other client is served
	}{
		{"commands", "PING\r\n", "+PONG", 2500, roundCommands},
		{"input bytes", mrelease.String(), ":0", 20, roundInputBytes/mrelease.Len() + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.most >= tc.n {
				t.Fatalf("a pipeline of %d cannot show a bound of %d", tc.n, tc.most)
			}
			ts := startServer(t, oneLoop(t))
			rdb := ts.client()
			tok1 := do(t, rdb, "ACQUIRE", "gate1", 60000).Token()
			tok2 := do(t, rdb, "ACQUIRE", "gate2", 60000).Token()
			attacker, bystander := ts.dial(), ts.dial()
			attacker.send("ACQUIRE gate1 60000 WAIT 30000\r\n" + strings.Repeat(tc.command, tc.n))
			bystander.send("ACQUIRE gate2 60000 WAIT 30000\r\nINFO stats\r\n")
			testutil.Eventually(t, 10*time.Second, "both clients waiting, their commands in the server's socket", func() bool {
				return infoField(t, rdb, "clients", "blocked_clients") == "2" && unsent(t, attacker.Conn) == 0 && unsent(t, bystander.Conn) == 0
			})
			before := commandsProcessed(t, rdb)
			holder := ts.dial()
			holder.send(fmt.Sprintf("RELEASE gate1 %d\r\nRELEASE gate2 %d\r\n", tok1, tok2))
			holder.expect(int64(1))
			holder.expect(int64(1))

			token(t, bystander)
			info := bystander.reply().(string)
			_, after, _ := strings.Cut(info, "total_commands_processed:")
			total, err := strconv.Atoi(strings.Fields(after)[0])
			if err != nil {
				t.Fatalf("INFO: %q", info)
			}
			if ran := total - before - 3; ran > tc.most { // less the RELEASEs and the INFO
				t.Fatalf("the other client was served after %d of the pipeline's %d commands: want at most %d", ran, tc.n, tc.most)
			}

			token(t, attacker)
			attacker.SetReadDeadline(time.Now().Add(30 * time.Second))
			for i := range tc.n {
				if got := attacker.line(); got != tc.reply {
					t.Fatalf("command %d of the pipeline: %q, want %q", i, got, tc.reply)
				}
			}
		})
	}
}

// TestClientWritingBeforeReadingDoesNotDeadlock is the report's 42 MB
// client: it writes all its commands before it reads a reply. Once its
// replies filled the sockets, the server stopped reading it, and each waited
// for the other for ever; Redis keeps reading. Now the loop reads its input
// ahead while its output waits, up to the query buffer limit, and every
// reply arrives once the client reads. The goroutine transport blocked in
// its write instead; now it hands what the socket refuses to a writer
// goroutine and reads ahead meanwhile, as the loop does.
func TestClientWritingBeforeReadingDoesNotDeadlock(t *testing.T) {
	ts := startServer(t, oneLoopOrGoroutines(t))
	rdb := ts.client()
	docs := docsReply(t, ts)
	nc := ts.dialSmallRcvbuf(t)
	// First, replies that fill the sockets: the server holds output.
	const heavy = 1000
	if _, err := nc.Write([]byte(strings.Repeat("COMMAND DOCS\r\n", heavy))); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the server to hold output for the client", func() bool {
		return outputPeak(t, rdb) >= outputPause
	})
	// Then far more input than the socket buffers hold, still unread.
	const echoes = 2000
	var in, want bytes.Buffer
	for i := range echoes {
		arg := fmt.Sprintf("%06d", i) + strings.Repeat("x", 4000)
		fmt.Fprintf(&in, "ECHO %s\r\n", arg)
		fmt.Fprintf(&want, "$%d\r\n%s\r\n", len(arg), arg)
	}
	nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := nc.Write(in.Bytes()); err != nil {
		t.Fatalf("writing %d bytes of commands before reading: %v (the server stopped reading: deadlock)", in.Len(), err)
	}

	nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	got := make([]byte, heavy*len(docs)+want.Len())
	if _, err := io.ReadFull(nc, got); err != nil {
		t.Fatalf("reading the replies: %v", err)
	}
	if !bytes.Equal(got[:heavy*len(docs)], bytes.Repeat(docs, heavy)) || !bytes.Equal(got[heavy*len(docs):], want.Bytes()) {
		t.Fatal("the replies arrived changed or out of order")
	}
}

// TestReadAheadIsBoundedByQueryBuffer checks the bound on reading ahead: a
// client whose replies wait, and that goes on sending, is closed once its
// unread input passes the query buffer limit, as Redis closes it, rather
// than making the server hold whatever it sends.
func TestReadAheadIsBoundedByQueryBuffer(t *testing.T) {
	const limit = 1 << 20
	ts := startServer(t, oneLoopOrGoroutines(t), func(c *Config) { c.Limits.MaxQueryBuffer = limit })
	rdb := ts.client()
	nc := ts.dialSmallRcvbuf(t)
	if _, err := nc.Write([]byte(strings.Repeat("COMMAND DOCS\r\n", 1000))); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the server to hold output for the client", func() bool {
		return outputPeak(t, rdb) >= outputPause
	})
	line := "ECHO " + strings.Repeat("x", 4000) + "\r\n"
	in := []byte(strings.Repeat(line, 4*limit/len(line)))
	nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err := nc.Write(in)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writing %d bytes: %v (the server stopped reading)", len(in), err)
	}
	testutil.Eventually(t, 30*time.Second, "the client's disconnection", func() bool {
		return infoField(t, rdb, "stats", "total_protocol_errors") == "1"
	})
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, nc); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection is still open")
	}
}
