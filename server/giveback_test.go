package server

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// A WAIT granted as its connection closes is given back, but not when its
// OWNER's retry on another connection was answered with the lease first:
// the retry renews the owner's lease and returns its token, so releasing
// that token would end the lease the retry's client holds (a lost lock).
// The race needs the grant to reach the closed connection after the retry
// ran; the test sets that order up on the server's table directly.
func TestGiveBackSparesTheOwnersRetry(t *testing.T) {
	ts := startServer(t)
	tb := ts.Table()
	held, ok, err := tb.Acquire(&locker.Request{Key: []byte("k"), TTL: time.Minute})
	if err != nil || !ok {
		t.Fatal(err)
	}
	granted := make(chan uint64, 1)
	w := &locker.Wait{Notify: func(tok uint64) { granted <- tok }}
	if _, ok, err := tb.AcquireWait(&locker.Request{Key: []byte("k"), TTL: time.Minute, Owner: []byte("me"), Wait: time.Minute}, w); ok || err != nil {
		t.Fatalf("the wait: %v, %v; want queued", ok, err)
	}
	tb.Release([]byte("k"), held)
	token := <-granted

	c := ctx(t)
	retry, err := ts.client().Do(c, "ACQUIRE", "k", 60000, "OWNER", "me").Uint64()
	if err != nil || retry != token {
		t.Fatalf("the owner's retry: %d, %v; want the lease %d", retry, err, token)
	}
	gone := &conn{srv: ts.Server}
	gone.giveBack(&blockState{key: "k", wait: w}, waitOutcome{granted: true, token: token})
	if ok, err := ts.client().Do(c, "VERIFY", "k", token).Int(); err != nil || ok != 1 {
		t.Fatalf("VERIFY after the give-back: %d, %v; the retry's lease was released", ok, err)
	}

	// Without a retry, the lease goes back to the table.
	w2 := &locker.Wait{Notify: func(tok uint64) { granted <- tok }}
	if _, ok, _ := tb.AcquireWait(&locker.Request{Key: []byte("k"), TTL: time.Minute, Wait: time.Minute}, w2); ok {
		t.Fatal("the second wait was granted at once")
	}
	ts.client().Do(c, "RELEASE", "k", token)
	second := <-granted
	gone.giveBack(&blockState{key: "k", wait: w2}, waitOutcome{granted: true, token: second})
	if ok, err := ts.client().Do(c, "VERIFY", "k", second).Int(); err != nil || ok != 0 {
		t.Fatalf("VERIFY after the give-back of an untouched grant: %d, %v; want 0", ok, err)
	}
}
