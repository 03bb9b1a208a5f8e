package server

import (
	"fmt"
	"testing"
	"time"
)

// waitUntilFree polls until key is free or gone, bounded in time: a
// connection's close is handled by the server on its own schedule.
func waitUntilFree(t *testing.T, ts *testServer, key string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if st, ok := ts.Table().Status([]byte(key)); !ok || !st.Held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still held after its connection closed", key)
		}
		ts.Table().ExpireDue()
	}
}

func TestEphemeralLeaseEndsWithItsConnection(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	side := ts.dial()
	side.send("ACQUIRE sidecar 600000 EPHEMERAL\r\n")
	tok := token(t, side)
	side.send("ACQUIRE plain 600000\r\n") // not ephemeral: survives the close
	token(t, side)
	side.send("ACQUIRE gone 600000 EPHEMERAL\r\n")
	gone := token(t, side)
	side.send(fmt.Sprintf("RELEASE gone %d\r\n", gone))
	side.reply()
	do(t, rdb, "VERIFY", "sidecar", tok).Is(1)

	side.Close()
	waitUntilFree(t, ts, "sidecar")
	wantStatus(t, status(t, rdb, "plain"), map[string]string{"state": "held"})
	if next := do(t, rdb, "ACQUIRE", "sidecar", 1000).Token(); next <= uint64(tok) {
		t.Fatalf("token after the ephemeral lease %d <= %d", next, tok)
	}
}

// TestEphemeralLeaseFromTheQueue: a lease handed to a waiting EPHEMERAL
// request is also released when that connection closes.
func TestEphemeralLeaseFromTheQueue(t *testing.T) {
	ts := startServer(t)
	holder := ts.dial()
	holder.send("ACQUIRE q 600000\r\n")
	tok := token(t, holder)
	w := ts.dial()
	w.send("ACQUIRE q 600000 WAIT 20000 EPHEMERAL\r\n")
	waitForWaiters(t, ts, "q", 1)
	holder.send(fmt.Sprintf("RELEASE q %d\r\n", tok))
	holder.reply()
	token(t, w)
	w.Close()
	waitUntilFree(t, ts, "q")
}
