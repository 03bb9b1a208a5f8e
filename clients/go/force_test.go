package leasehold_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/servertest/lockserver"
)

func TestForceRelease(t *testing.T) {
	srv := lockserver.Start(t).Server
	holder := newClient(t, srv.Addr().String())
	operator := newClient(t, srv.Addr().String())
	ctx := testContext(t)

	if n, err := operator.ForceRelease(ctx, "unknown", 0); err != nil || n != 0 {
		t.Fatalf("ForceRelease of an unknown lock: %d, %v; want 0", n, err)
	}
	l, err := holder.Acquire(ctx, "stuck", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := operator.ForceRelease(ctx, "stuck", l.Token()+1); err != nil || n != 0 {
		t.Fatalf("ForceRelease with another token: %d, %v; want 0", n, err)
	}
	if n, err := operator.ForceRelease(ctx, "stuck", l.Token()); err != nil || n != 1 {
		t.Fatalf("ForceRelease(token): %d, %v; want 1", n, err)
	}
	if ok, err := l.Verify(ctx); err != nil || ok {
		t.Fatalf("the forced lease verifies: %v, %v", ok, err)
	}
	within(t, 5*time.Second, l.Lost(), "the forced lease to count as lost")
	next, err := operator.Acquire(ctx, "stuck", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= l.Token() {
		t.Fatalf("token after ForceRelease %d, want above %d", next.Token(), l.Token())
	}
	if n, err := operator.ForceRelease(ctx, "stuck", 0); err != nil || n != 1 {
		t.Fatalf("ForceRelease(0, every lease): %d, %v; want 1", n, err)
	}
}
