package server

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestClientThatDoesNotRead pipelines commands whose replies (32 MiB) far
// exceed the socket buffers, without reading them, so the server meets a full
// socket. It must neither stall other clients nor lose or reorder the replies
// the slow client finally reads.
func TestClientThatDoesNotRead(t *testing.T) {
	ts := startServer(t)
	slow := ts.dial()
	const perChunk = 64
	sent := 0
	slow.SetWriteDeadline(time.Now().Add(2 * time.Second))
	for sent < 8_000 {
		// COMMAND's large replies fill the server's socket buffer fast; the
		// numbered ECHOs let the reader check order and completeness.
		var b strings.Builder
		for i := range perChunk {
			fmt.Fprintf(&b, "COMMAND\r\nECHO seq:%d\r\n", sent+i)
		}
		if _, err := slow.Write([]byte(b.String())); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			break // the server stopped reading: it is pushing back
		}
		sent += perChunk
	}
	slow.SetWriteDeadline(time.Time{})

	other := ts.dial()
	other.send("PING\r\n")
	if got := other.line(); got != "+PONG" {
		t.Fatalf("another client got %q while one client did not read", got)
	}

	// The slow client now reads: the echoes arrive complete and in order, up
	// to the last whole chunk it wrote.
	slow.SetReadDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReaderSize(slow.Conn, 1<<16)
	next := 0
	for next < sent {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after echo %d of %d: %v", next, sent, err)
		}
		if seq, ok := strings.CutPrefix(strings.TrimSpace(line), "seq:"); ok {
			if seq != fmt.Sprint(next) {
				t.Fatalf("echo seq:%s arrived where seq:%d was due", seq, next)
			}
			next++
		}
	}
}
