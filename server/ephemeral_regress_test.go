package server

import (
	"fmt"
	"testing"
)

// Regression: after the documented OWNER retry (the first connection broke
// unnoticed; the client retries with the same OWNER and EPHEMERAL on a new
// one and gets the same token back), the old connection's close released
// the lease the live connection now held. The tie must move with the retry.
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
