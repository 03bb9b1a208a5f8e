package leasehold_test

import (
	"fmt"
	"slices"
	"testing"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
)

// TestStatusAndHoldersOfABigSemaphore: STATUS lists the oldest 100 holders
// and HoldersTotal counts them all; Holders and HoldersPage read every one.
func TestStatusAndHoldersOfABigSemaphore(t *testing.T) {
	srv := lockserver.Start(t).Server
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)
	const n = 250
	if _, err := c.Create(ctx, "sem", leasehold.Limit(n)); err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for i := range n {
		// Raw ACQUIREs: a Lease each would renew in the background.
		tok, err := c.Redis().Do(ctx, "ACQUIRE", "sem", 60000, "OWNER", fmt.Sprint("o", i)).Uint64()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, tok)
	}
	st, err := c.Status(ctx, "sem")
	if err != nil {
		t.Fatal(err)
	}
	if st.HoldersTotal != n || len(st.Holders) != 100 || st.Holders[99].Token != want[99] || st.Holders[99].Owner != "o99" {
		t.Fatalf("Status lists %d of %d holders, the last %+v", len(st.Holders), st.HoldersTotal, st.Holders[len(st.Holders)-1])
	}

	var got []uint64
	for h, err := range c.Holders(ctx, "sem") {
		if err != nil {
			t.Fatal(err)
		}
		if h.Owner != fmt.Sprint("o", len(got)) {
			t.Fatalf("holder %d: %+v", len(got), h)
		}
		got = append(got, h.Token)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Holders: %v, want %v", got, want)
	}

	got = got[:0]
	pages := 0
	for cursor := uint64(0); ; {
		pages++
		next, hs, err := c.HoldersPage(ctx, "sem", cursor, 60)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			got = append(got, h.Token)
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	if !slices.Equal(got, want) || pages != 5 {
		t.Fatalf("HoldersPage, COUNT 60: %d pages of %v, want 5 of %v", pages, got, want)
	}
	if _, _, err := c.HoldersPage(ctx, "sem", 0, 1001); err == nil {
		t.Error("HoldersPage with a count of 1001: no error")
	}
	for _, err := range c.Holders(ctx, "nothing") {
		t.Fatalf("Holders of an unknown lock yielded (%v)", err)
	}
	c.Close()
	for _, err := range c.Holders(ctx, "sem") {
		if err == nil {
			t.Error("Holders on a closed client yielded no error")
		}
	}
}
