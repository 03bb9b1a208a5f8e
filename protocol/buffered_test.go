package protocol

import (
	"strings"
	"testing"

	"github.com/tidwall/redcon"
)

// TestBufferedReplies checks the one read of redcon's unexported buffer.
func TestBufferedReplies(t *testing.T) {
	var sink strings.Builder
	w := redcon.NewWriter(&sink)
	if n := BufferedReplies(w); n != 0 {
		t.Fatalf("new writer: %d bytes", n)
	}
	w.WriteBulkString("hello")
	w.WriteInt(42)
	want := len("$5\r\nhello\r\n:42\r\n")
	if n := BufferedReplies(w); n != want {
		t.Fatalf("%d bytes buffered, want %d", n, want)
	}
	if err := w.Flush(); err != nil || BufferedReplies(w) != 0 || sink.Len() != want {
		t.Fatalf("after Flush (%v): %d buffered, %d written", err, BufferedReplies(w), sink.Len())
	}
}
