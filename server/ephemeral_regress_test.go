package server

import (
	"fmt"
	"testing"
)

// The documented OWNER retry: the client's first connection broke (the
// server has not noticed yet), it reconnects and retries with the same OWNER
// and EPHEMERAL, and gets its lease (same token) back on the new connection.
// When the server later notices the old connection is gone, closeConn /
// serve's defer releases that token, taking the lease from the live
// connection that now holds it.
func TestEphemeralTieMovesWithOwnerRetry(t *testing.T) {
	ts := startServer(t)
	old := ts.dial()
	old.send("ACQUIRE k 30000 OWNER worker-1 EPHEMERAL\r\n")
	tok := token(t, old)

	retry := ts.dial()
	retry.send("ACQUIRE k 30000 OWNER worker-1 EPHEMERAL\r\n")
	if got := token(t, retry); got != tok {
		t.Fatalf("retry got token %d, want the same %d", got, tok)
	}

	old.send("QUIT\r\n") // the server notices the old connection is gone
	old.reply()
	if !old.closed() {
		t.Fatal("QUIT did not close")
	}
	retry.send(fmt.Sprintf("VERIFY k %d\r\n", tok))
	if got := retry.reply(); got != int64(1) {
		t.Errorf("the retried lease %d held EPHEMERAL by a live connection was released when the old connection closed", tok)
	}
}
