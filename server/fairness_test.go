package server

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

// docsReply returns the bytes of one COMMAND DOCS reply, a reply some 700
// times the size of its command: what a client asks for to make the server
// build output it never reads.
func docsReply(t *testing.T, ts *testServer) []byte {
	t.Helper()
	rc := ts.dial()
	defer rc.Close()
	rc.send("COMMAND DOCS\r\nPING\r\n")
	rc.SetReadDeadline(time.Now().Add(30 * time.Second))
	var all []byte
	buf := make([]byte, 64<<10)
	for !bytes.HasSuffix(all, []byte("+PONG\r\n")) {
		n, err := rc.r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, buf[:n]...)
	}
	return all[:len(all)-len("+PONG\r\n")]
}

// outputPeak reads INFO's client_output_buffer_peak.
func outputPeak(t *testing.T, rdb doer) int {
	t.Helper()
	n, err := strconv.Atoi(infoField(t, rdb, "clients", "client_output_buffer_peak"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNonReadingClientOutputIsBounded is the report's reply amplification: a
// client pipelines commands with large replies and never reads. The server
// used to run them all and hold every reply (a few such commands made GBs);
// now it stops running them once the unsent output reaches outputPause, so
// what it holds stays under outputPause plus one reply, and the replies
// still all arrive, in order, once the client reads.
func TestNonReadingClientOutputIsBounded(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	docs := docsReply(t, ts)
	const n = 1000 // some 10 MB of replies: more than the socket buffers take
	attacker := ts.dial()
	attacker.send(strings.Repeat("COMMAND DOCS\r\n", n))
	// Once the output the socket refused reaches outputPause, the server
	// has stopped running the client's commands.
	testutil.Eventually(t, 30*time.Second, "the server to hold output for the client", func() bool {
		return outputPeak(t, rdb) >= outputPause
	})
	do(t, rdb, "PING").Str("PONG")
	if peak := outputPeak(t, rdb); peak >= outputPause+len(docs) {
		t.Fatalf("the server held %d bytes of output for a client that does not read: want less than %d (outputPause) + %d (one reply)",
			peak, outputPause, len(docs))
	}

	attacker.SetReadDeadline(time.Now().Add(60 * time.Second))
	got := make([]byte, n*len(docs))
	if _, err := io.ReadFull(attacker.r, got); err != nil {
		t.Fatalf("reading the replies: %v", err)
	}
	if !bytes.Equal(got, bytes.Repeat(docs, n)) {
		t.Fatal("the replies arrived changed or out of order")
	}
}
