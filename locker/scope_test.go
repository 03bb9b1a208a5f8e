package locker

import (
	"testing"
	"time"
)

// TestScopedReleaseAndExtend: a lease is ended or renewed through
// ReleaseScoped and ExtendScoped only when its owner begins with the scope,
// for an exclusive lease, a reader of a shared lock and a semaphore's
// permit; a nil scope takes in every lease, an anonymous one too.
func TestScopedReleaseAndExtend(t *testing.T) {
	alice, bob := []byte("alice\x00"), []byte("bob\x00")
	for _, tc := range []struct {
		name  string
		setup func(tb *Table)
		mode  Mode
	}{
		{"exclusive", func(*Table) {}, Exclusive},
		{"shared", func(*Table) {}, Shared},
		{"semaphore", func(tb *Table) {
			if _, err := tb.Create([]byte("k"), CreateOptions{Limit: 3}); err != nil {
				t.Fatal(err)
			}
		}, Exclusive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, _ := newTestTable(t)
			tc.setup(tb)
			k := []byte("k")
			take := func(owner string) uint64 {
				tok, ok, err := tb.Acquire(&Request{Key: k, TTL: time.Minute, Owner: []byte(owner), Mode: tc.mode})
				if !ok || err != nil {
					t.Fatalf("Acquire(%q) = %v, %v", owner, ok, err)
				}
				return tok
			}
			tok := take("alice\x00job")
			if ok, _ := tb.ExtendScoped(k, tok, time.Hour, bob); ok {
				t.Fatal("ExtendScoped renewed a lease out of its scope")
			}
			if tb.ReleaseScoped(k, tok, bob) || !tb.Verify(k, tok) {
				t.Fatal("ReleaseScoped ended a lease out of its scope")
			}
			if ok, _ := tb.ExtendScoped(k, tok, time.Hour, alice); !ok {
				t.Fatal("ExtendScoped refused a lease in its scope")
			}
			if !tb.ReleaseScoped(k, tok, alice) || tb.Verify(k, tok) {
				t.Fatal("ReleaseScoped did not end a lease in its scope")
			}
			if tc.mode == Exclusive && tc.name == "exclusive" {
				// An owner shorter than the scope is out of it, not a panic.
				tok = take("al")
				if tb.ReleaseScoped(k, tok, alice) {
					t.Fatal("ReleaseScoped ended a lease whose owner is shorter than the scope")
				}
				tb.Release(k, tok)
			}
			anon := take("")
			if tb.ReleaseScoped(k, anon, alice) {
				t.Fatal("ReleaseScoped ended an anonymous lease under a scope")
			}
			if !tb.ReleaseScoped(k, anon, nil) {
				t.Fatal("ReleaseScoped with a nil scope refused a lease")
			}
		})
	}
}
