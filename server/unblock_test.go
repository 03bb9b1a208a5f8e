package server

import (
	"fmt"
	"testing"
)

// clientID asks rc's connection for its CLIENT ID.
func clientID(t *testing.T, rc *rawConn) int64 {
	t.Helper()
	rc.send("CLIENT ID\r\n")
	id, ok := rc.reply().(int64)
	if !ok || id <= 0 {
		t.Fatalf("CLIENT ID: %#v", id)
	}
	return id
}

// TestClientUnblockEndsAWait parks a waiter behind a holder, ends its wait
// from another connection, and checks the waiter's reply, that it left the
// queue and took nothing, and that its connection goes on serving.
func TestClientUnblockEndsAWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wait    string // the waiting command; "held" is taken first
		reason  string // CLIENT UNBLOCK's optional argument
		want    any    // the waiter's reply
		keysOut []string
	}{
		{name: "acquire, no reason", wait: "ACQUIRE held 30000 WAIT 20000", want: nil},
		{name: "acquire, timeout", wait: "ACQUIRE held 30000 WAIT 20000", reason: " timeout", want: nil},
		{name: "acquire, error", wait: "ACQUIRE held 30000 WAIT 20000", reason: " ERROR",
			want: respError("UNBLOCKED client unblocked via CLIENT UNBLOCK")},
		{name: "shared acquire, error", wait: "ACQUIRE held 30000 WAIT 20000 SHARED", reason: " error",
			want: respError("UNBLOCKED client unblocked via CLIENT UNBLOCK")},
		// MACQUIRE takes "free" first, then waits for "held": unblocked,
		// it gives "free" back.
		{name: "macquire, timeout", wait: "MACQUIRE 30000 2 free held WAIT 20000", reason: " TIMEOUT", want: nil,
			keysOut: []string{"free"}},
		{name: "macquire, error", wait: "MACQUIRE 30000 2 free held WAIT 20000", reason: " ERROR",
			want: respError("UNBLOCKED client unblocked via CLIENT UNBLOCK"), keysOut: []string{"free"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t)
			holder := ts.dial()
			holder.send("ACQUIRE held 30000\r\n")
			held := token(t, holder)

			waiter := ts.dial()
			id := clientID(t, waiter)
			waiter.send(tc.wait + "\r\nPING\r\n") // the PING runs once the wait ends
			waitForWaiters(t, ts, "held", 1)
			// The lock's queue lists the waiter a moment before its
			// connection parks, which is what CLIENT UNBLOCK finds.
			waitBlocked(t, ts.client(), 1)

			other := ts.dial()
			other.send(fmt.Sprintf("CLIENT UNBLOCK %d%s\r\n", id, tc.reason))
			if got := other.reply(); got != int64(1) {
				t.Fatalf("CLIENT UNBLOCK of a waiting client: %#v, want 1", got)
			}
			if got := waiter.reply(); got != tc.want {
				t.Fatalf("waiter's reply: %#v, want %#v", got, tc.want)
			}
			if got := waiter.reply(); got != "PONG" {
				t.Fatalf("the command pipelined behind the wait: %#v", got)
			}
			waitForWaiters(t, ts, "held", 0)
			rdb := ts.client()
			if got := infoField(t, rdb, "clients", "blocked_clients"); got != "0" {
				t.Fatalf("blocked_clients = %s after the unblock", got)
			}
			for _, k := range tc.keysOut {
				if st, ok := ts.Table().Status([]byte(k)); ok && st.Held {
					t.Fatalf("%s still held by the unblocked wait: %+v", k, st)
				}
			}

			// Nothing is waiting now: a second unblock finds nobody.
			other.send(fmt.Sprintf("CLIENT UNBLOCK %d%s\r\n", id, tc.reason))
			if got := other.reply(); got != int64(0) {
				t.Fatalf("second CLIENT UNBLOCK: %#v, want 0", got)
			}
			// The release hands the lock to nobody: the waiter is gone.
			holder.send(fmt.Sprintf("RELEASE held %d\r\n", held))
			if got := holder.reply(); got != int64(1) {
				t.Fatalf("release: %#v", got)
			}
			if st := ts.Table().Stats(); st.Held != 0 {
				t.Fatalf("%d leases held after the release; the unblocked waiter took one", st.Held)
			}
		})
	}
}

func TestClientUnblockErrors(t *testing.T) {
	ts := startServer(t)
	rc := ts.dial()
	self := clientID(t, rc)
	for _, tc := range []struct {
		cmd  string
		want any
	}{
		{"CLIENT UNBLOCK 999999", int64(0)},                // no such client
		{fmt.Sprintf("CLIENT UNBLOCK %d", self), int64(0)}, // not waiting: it is running this
		{"CLIENT UNBLOCK 0 ERROR", int64(0)},
		{"CLIENT UNBLOCK abc", respError("ERR value is not an integer or out of range")},
		{"CLIENT UNBLOCK -1", int64(0)}, // Redis reads a signed id
		{"CLIENT UNBLOCK 18446744073709551615", respError("ERR value is not an integer or out of range")},
		{"CLIENT UNBLOCK 1 LATER", respError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")},
		{"CLIENT UNBLOCK abc LATER", respError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")}, // the reason first
		{"CLIENT UNBLOCK", respError("ERR wrong number of arguments for 'client|unblock' command")},
		{"CLIENT UNBLOCK 1 ERROR x", respError("ERR wrong number of arguments for 'client|unblock' command")},
	} {
		rc.send(tc.cmd + "\r\n")
		if got := rc.reply(); got != tc.want {
			t.Errorf("%s: %#v, want %#v", tc.cmd, got, tc.want)
		}
	}
}

// TestClientUnblockRacesTheGrant releases the lock and unblocks its waiter
// at the same moment, many times, in both orders: whichever wins, the
// waiter's reply and the table agree. A token means the waiter holds the
// lock; nil means nobody does. The release going first is the subtle case:
// the lease is handed over but not yet delivered when the unblock comes,
// which then says 1 and must not take the token away.
func TestClientUnblockRacesTheGrant(t *testing.T) {
	ts := startServer(t)
	holder, waiter, other := ts.dial(), ts.dial(), ts.dial()
	id := clientID(t, waiter)
	granted, unblocked, grantedDespiteOne := 0, 0, 0
	for i := range 200 {
		key := fmt.Sprintf("race%d", i)
		holder.send("ACQUIRE " + key + " 30000\r\n")
		held := token(t, holder)
		waiter.send("ACQUIRE " + key + " 30000 WAIT 20000\r\n")
		waitForWaiters(t, ts, key, 1)
		// Both go out before either reply is read.
		release := fmt.Sprintf("RELEASE %s %d\r\n", key, held)
		unblock := fmt.Sprintf("CLIENT UNBLOCK %d\r\n", id)
		if i%2 == 0 {
			holder.send(release)
			other.send(unblock)
		} else {
			other.send(unblock)
			holder.send(release)
		}
		holder.reply()
		said := other.reply() // 1 or 0: the grant may have ended the wait first
		got := waiter.reply()
		if _, ok := got.(int64); ok && said == int64(1) {
			grantedDespiteOne++
		}
		st, _ := ts.Table().Status([]byte(key))
		switch got := got.(type) {
		case int64:
			granted++
			if st.Token != uint64(got) {
				t.Fatalf("round %d: waiter got token %d, lock holds %d", i, got, st.Token)
			}
		case nil:
			unblocked++
			if st.Token != 0 {
				t.Fatalf("round %d: waiter got nil, lock holds %d", i, st.Token)
			}
		default:
			t.Fatalf("round %d: waiter's reply %#v", i, got)
		}
	}
	t.Logf("%d granted (%d of them though the unblock said 1), %d unblocked", granted, grantedDespiteOne, unblocked)
}
