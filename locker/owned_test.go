package locker

import (
	"errors"
	"testing"
	"time"
)

// TestNoRenew: a request with NoRenew is refused when its owner holds the
// lock already, as Redis's SET NX is on a key that exists; without, the
// owner's lease is renewed and its token returned again.
func TestNoRenew(t *testing.T) {
	tb, _ := newTestTable(t)
	req := Request{Key: []byte("k"), TTL: time.Minute, Owner: []byte("v1"), NoRenew: true}
	tok, ok, err := tb.Acquire(&req)
	if !ok || err != nil {
		t.Fatalf("first NoRenew Acquire = %v, %v", ok, err)
	}
	if _, ok, err := tb.Acquire(&req); ok || err != nil {
		t.Fatalf("NoRenew Acquire by the holder = %v, %v; want refused", ok, err)
	}
	req.NoRenew = false
	if again, ok, _ := tb.Acquire(&req); !ok || again != tok {
		t.Fatalf("Acquire by the holder = %d, %v; want its token %d again", again, ok, tok)
	}
	if st, _ := tb.Status([]byte("k")); st.Owner != "v1" {
		t.Fatalf("owner %q, want v1", st.Owner)
	}
	all := Request{Keys: [][]byte{[]byte("a"), []byte("k")}, TTL: time.Minute, Owner: []byte("v1"), NoRenew: true}
	if _, ok, err := tb.AcquireAll(&all); ok || err != nil {
		t.Fatalf("NoRenew AcquireAll over the owner's own lease = %v, %v; want refused", ok, err)
	}
	all.Keys = [][]byte{[]byte("a"), []byte("b")}
	if _, ok, err := tb.AcquireAll(&all); !ok || err != nil {
		t.Fatalf("NoRenew AcquireAll of free locks = %v, %v", ok, err)
	}
}

func TestReleaseOwned(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("k")
	if got := tb.ReleaseOwned(k, []byte("v1"), nil); got != NotHeld {
		t.Fatalf("ReleaseOwned of a free lock = %v, want NotHeld", got)
	}
	tok := mustAcquire(t, tb, "k", time.Minute, "alice\x00v1")
	tests := []struct {
		name  string
		owner string
		nilO  bool
		scope []byte
		want  Owned
	}{
		{"another owner", "alice\x00v2", false, nil, HeldByOther},
		{"the owner, out of scope", "alice\x00v1", false, []byte("bob\x00"), HeldByOther},
		{"any owner, out of scope", "", true, []byte("bob\x00"), HeldByOther},
		{"the owner, in scope", "alice\x00v1", false, []byte("alice\x00"), OwnedDone},
	}
	for _, tt := range tests {
		owner := []byte(tt.owner)
		if tt.nilO {
			owner = nil
		}
		if got := tb.ReleaseOwned(k, owner, tt.scope); got != tt.want {
			t.Fatalf("%s: ReleaseOwned = %v, want %v", tt.name, got, tt.want)
		}
	}
	if tb.Verify(k, tok) {
		t.Fatal("the lease is live after its owner's release")
	}
	// Any owner (DEL): every live lease, the readers of a shared lock too.
	for _, o := range []string{"r1", "r2"} {
		if _, ok, _ := tb.Acquire(&Request{Key: []byte("rw"), TTL: time.Minute, Owner: []byte(o), Mode: Shared}); !ok {
			t.Fatal("shared Acquire refused")
		}
	}
	if got := tb.ReleaseOwned([]byte("rw"), []byte("r2"), nil); got != OwnedDone {
		t.Fatalf("ReleaseOwned of one reader = %v", got)
	}
	if st, _ := tb.Status([]byte("rw")); st.HoldersTotal != 1 || st.Holders[0].Owner != "r1" {
		t.Fatalf("holders after r2's release: %+v", st.Holders)
	}
	if got := tb.ReleaseOwned([]byte("rw"), nil, nil); got != OwnedDone {
		t.Fatalf("ReleaseOwned(any) = %v", got)
	}
	if _, ok := tb.Status([]byte("rw")); ok {
		t.Fatal("the shared lock stays after every reader was released")
	}
	// A release hands the lock to a waiter, with a higher token.
	tok = mustAcquire(t, tb, "q", time.Minute, "v1")
	var handed uint64
	w := &Wait{Notify: func(tok uint64) { handed = tok }}
	if _, ok, _ := tb.AcquireWait(&Request{Key: []byte("q"), TTL: time.Minute, Owner: []byte("v2"), Wait: time.Minute}, w); ok {
		t.Fatal("a wait was granted over a held lock")
	}
	if got := tb.ReleaseOwned([]byte("q"), []byte("v1"), nil); got != OwnedDone || handed <= tok {
		t.Fatalf("ReleaseOwned = %v, handed over with token %d; want done, above %d", got, handed, tok)
	}
}

func TestExtendOwned(t *testing.T) {
	tb, clock := newTestTable(t)
	k := []byte("k")
	if got, err := tb.ExtendOwned(k, []byte("v1"), nil, time.Minute, false); got != NotHeld || err != nil {
		t.Fatalf("ExtendOwned of a free lock = %v, %v", got, err)
	}
	tok := mustAcquire(t, tb, "k", 10*time.Second, "v1")
	if got, _ := tb.ExtendOwned(k, []byte("v2"), nil, time.Minute, false); got != HeldByOther {
		t.Fatalf("ExtendOwned by another = %v", got)
	}
	clock.Advance(4 * time.Second)
	if got, err := tb.ExtendOwned(k, []byte("v1"), nil, 20*time.Second, false); got != OwnedDone || err != nil {
		t.Fatalf("ExtendOwned = %v, %v", got, err)
	}
	if st, _ := tb.Status(k); st.TTL != 20*time.Second {
		t.Fatalf("ttl %v after replacing it, want 20s", st.TTL)
	}
	clock.Advance(5 * time.Second)
	if got, _ := tb.ExtendOwned(k, []byte("v1"), nil, 10*time.Second, true); got != OwnedDone {
		t.Fatalf("ExtendOwned(add) = %v", got)
	}
	if st, _ := tb.Status(k); st.TTL != 25*time.Second || st.Token != tok {
		t.Fatalf("ttl %v, token %d after adding 10s to 15s left; want 25s, %d", st.TTL, st.Token, tok)
	}
	// PEXPIRE: any owner.
	if got, _ := tb.ExtendOwned(k, nil, nil, time.Second, false); got != OwnedDone {
		t.Fatalf("ExtendOwned(any) = %v", got)
	}
	if got, err := tb.ExtendOwned(k, []byte("v1"), nil, 25*time.Hour, false); !errors.Is(err, ErrTTLRange) || got != NotHeld {
		t.Fatalf("ExtendOwned past the max ttl = %v, %v; want ErrTTLRange", got, err)
	}
	if got, err := tb.ExtendOwned(k, []byte("v1"), nil, 24*time.Hour, true); !errors.Is(err, ErrTTLRange) {
		t.Fatalf("ExtendOwned(add) past the max ttl = %v, %v; want ErrTTLRange", got, err)
	}
	if st, _ := tb.Status(k); st.TTL != time.Second {
		t.Fatalf("ttl %v after a refused extension, want 1s as it was", st.TTL)
	}
	clock.Advance(time.Second)
	if got, _ := tb.ExtendOwned(k, []byte("v1"), nil, time.Minute, false); got != NotHeld {
		t.Fatalf("ExtendOwned of an expired lease = %v, want NotHeld", got)
	}
}

// TestExtendAllOwned: all the owner's leases move, or none does.
func TestExtendAllOwned(t *testing.T) {
	tb, _ := newTestTable(t)
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for _, k := range keys[:2] {
		mustAcquire(t, tb, string(k), 10*time.Second, "v1")
	}
	ttlOf := func(k string) time.Duration { st, _ := tb.Status([]byte(k)); return st.TTL }
	if got, err := tb.ExtendAllOwned(keys, []byte("v1"), time.Minute); got != NotHeld || err != nil {
		t.Fatalf("ExtendAllOwned with c free = %v, %v; want NotHeld", got, err)
	}
	if ttlOf("a") != 10*time.Second || ttlOf("b") != 10*time.Second {
		t.Fatal("a refused ExtendAllOwned moved a lease")
	}
	mustAcquire(t, tb, "c", 10*time.Second, "v2")
	if got, _ := tb.ExtendAllOwned(keys, []byte("v1"), time.Minute); got != HeldByOther {
		t.Fatalf("ExtendAllOwned with c another's = %v; want HeldByOther", got)
	}
	if got, err := tb.ExtendAllOwned(keys[:2], []byte("v1"), time.Minute); got != OwnedDone || err != nil {
		t.Fatalf("ExtendAllOwned of the owner's = %v, %v", got, err)
	}
	if ttlOf("a") != time.Minute || ttlOf("b") != time.Minute || ttlOf("c") != 10*time.Second {
		t.Fatalf("ttls %v %v %v after extending a and b to 1m", ttlOf("a"), ttlOf("b"), ttlOf("c"))
	}
	if _, err := tb.ExtendAllOwned(keys[:2], []byte("v1"), 0); !errors.Is(err, ErrTTLRange) {
		t.Fatalf("ExtendAllOwned with ttl 0: %v, want ErrTTLRange", err)
	}
}
