package server

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// Regression: a message queued for a subscriber before it unsubscribed was
// still written after the UNSUBSCRIBE confirmation, where the client, a
// normal connection again, read it as the reply to its next command. As in
// Redis, no message for a channel may follow its unsubscribe reply.
func TestNoMessageAfterUnsubscribeReply(t *testing.T) {
	ts := startServer(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a busy lock
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			tok, ok, _ := ts.Table().Acquire(&locker.Request{Key: []byte("k"), TTL: 30 * time.Second})
			if ok {
				ts.Table().Release([]byte("k"), tok)
			}
			// A busy lock, not a flood: the subscriber must read every
			// message before its UNSUBSCRIBE confirmation.
			time.Sleep(20 * time.Microsecond)
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	rc := ts.dial()
	for i := 0; i < 500; i++ {
		rc.send("SUBSCRIBE __lock__:k\r\n")
		if got := rc.reply(); fmt.Sprint(got) != "[subscribe __lock__:k 1]" {
			t.Fatalf("iteration %d: subscribe confirmation: %v", i, got)
		}
		rc.send("UNSUBSCRIBE\r\nPING\r\n")
		// Messages before the unsubscribe confirmation are fine.
		for {
			got := rc.reply()
			if fmt.Sprint(got) == "[unsubscribe __lock__:k 0]" {
				break
			}
			if a, ok := got.([]any); !ok || a[0] != "message" {
				t.Fatalf("iteration %d: before the unsubscribe confirmation: %#v", i, got)
			}
		}
		// Now a normal connection: the next reply must be PING's.
		if got := rc.reply(); got != "PONG" {
			t.Fatalf("iteration %d: reply to PING after UNSUBSCRIBE is %#v: a message for a channel already left", i, got)
		}
		rc.send("PING\r\n")
		if got := rc.reply(); got != "PONG" {
			t.Fatalf("iteration %d: reply to a later PING is %#v: a message for a channel already left", i, got)
		}
	}
}

// Regression: --idle-timeout closed connections that only listen. As in
// Redis, a subscriber has nothing to send and is spared.
func TestIdleTimeoutSparesSubscribers(t *testing.T) {
	ts := startServer(t, withIdleTimeout(300*time.Millisecond))
	sub := ts.dial()
	sub.send("SUBSCRIBE __lock__:quiet\r\n")
	sub.reply()
	time.Sleep(time.Second)
	if _, _, err := ts.Table().Acquire(&locker.Request{Key: []byte("quiet"), TTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	sub.SetReadDeadline(time.Now().Add(2 * time.Second))
	if l, err := sub.r.ReadString('\n'); err != nil {
		t.Errorf("subscriber was disconnected by the idle timeout: %v (%q)", err, l)
	}
}

// TestSubscribeMissesNoEventAfterItsConfirmation: an event published after
// a client has read its SUBSCRIBE confirmation reaches it. The server used
// to send the confirmation first and join the hub after, and an event in
// between was lost, though the client had been told it listened. The hook
// publishes one exactly there, on both transports.
func TestSubscribeMissesNoEventAfterItsConfirmation(t *testing.T) {
	ts := startServer(t)
	var tok atomic.Uint64
	hook := func() {
		granted, _, err := ts.Server.Table().Acquire(&locker.Request{Key: []byte("gap"), TTL: time.Minute})
		if err != nil {
			t.Error(err)
		}
		tok.Store(granted)
	}
	ts.Server.afterSubscribeFlush.Store(&hook)
	rc := ts.dial()
	rc.send("SUBSCRIBE __lock__:gap\r\n")
	if got := nextMessage(t, rc); !slices.Equal(got, []any{"subscribe", "__lock__:gap", int64(1)}) {
		t.Fatalf("subscribe reply %#v", got)
	}
	// The event goes out on its own; PING's reply may come before or
	// after it, but the event must come (rc's read times out otherwise).
	rc.send("PING\r\n")
	for range 2 {
		got := rc.reply()
		// The hook has stored the token before the event can be written.
		want := []any{"message", "__lock__:gap", fmt.Sprintf("acquired %d", tok.Load())}
		if reflect.DeepEqual(got, want) {
			return
		}
		if !reflect.DeepEqual(got, []any{"pong", ""}) {
			t.Fatalf("got %#v, want the event %#v or PING's reply", got, want)
		}
	}
	t.Fatal("no event after the confirmation")
}
