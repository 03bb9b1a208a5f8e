package locker

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// fillSemaphore creates key as a semaphore of n permits and takes them all,
// each with an owner of ownerLen bytes, and returns the tokens in order.
func fillSemaphore(t *testing.T, tb *Table, key string, n, ownerLen int) []uint64 {
	t.Helper()
	if _, err := tb.Create([]byte(key), CreateOptions{Limit: n}); err != nil {
		t.Fatal(err)
	}
	toks := make([]uint64, n)
	for i := range toks {
		owner := fmt.Sprintf("%0*d", ownerLen, i)
		toks[i] = mustAcquire(t, tb, key, time.Minute, owner)
	}
	return toks
}

func holderTokensOf(hs []Holder) []uint64 {
	toks := make([]uint64, len(hs))
	for i, h := range hs {
		toks[i] = h.Token
	}
	return toks
}

// TestStatusListsAtMostStatusHolders: a lock with more live leases than
// StatusHolders lists the oldest StatusHolders and counts them all.
func TestStatusListsAtMostStatusHolders(t *testing.T) {
	tb, _ := newTestTable(t)
	for _, n := range []int{1, StatusHolders - 1, StatusHolders, StatusHolders + 1, 3*StatusHolders + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			key := fmt.Sprint("sem", n)
			toks := fillSemaphore(t, tb, key, n, 8)
			st, ok := tb.Status([]byte(key))
			listed := min(n, StatusHolders)
			if !ok || st.HoldersTotal != n || len(st.Holders) != listed {
				t.Fatalf("Status: found %v, %d holders listed of %d; want %d of %d", ok, len(st.Holders), st.HoldersTotal, listed, n)
			}
			if got := holderTokensOf(st.Holders); !slices.Equal(got, toks[:listed]) {
				t.Fatalf("listed tokens %v, want the oldest %v", got, toks[:listed])
			}
			if h := st.Holders[listed-1]; h.Owner != fmt.Sprintf("%08d", listed-1) || h.TTL != time.Minute {
				t.Fatalf("last listed holder %+v", h)
			}
		})
	}
}

func TestStatusHoldersTotal(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.LockDelay = time.Second })
	mustAcquire(t, tb, "x", time.Second, "")
	mustAcquireShared(t, tb, "r", time.Second, "")
	mustAcquireShared(t, tb, "r", 2*time.Second, "")
	tb.Create([]byte("free"), CreateOptions{})
	for key, want := range map[string]int{"x": 1, "r": 2, "free": 0} {
		if st, _ := tb.Status([]byte(key)); st.HoldersTotal != want || len(st.Holders) != want {
			t.Errorf("%s: %d of %d holders, want %d", key, len(st.Holders), st.HoldersTotal, want)
		}
	}
	// An expired reader in its lock-delay is no lease: not counted.
	clock.Advance(time.Second)
	if st, _ := tb.Status([]byte("r")); st.HoldersTotal != 1 || len(st.Holders) != 1 || st.DelayLeft != time.Second {
		t.Fatalf("a reader expired into its lock-delay: %+v", st)
	}
}

// TestStatusCopiesOnlyWhatItLists: Status's work under the shard lock does
// not grow with the number of holders: it allocated every holder's entry
// (3 MB for a full semaphore) before it was capped.
func TestStatusCopiesOnlyWhatItLists(t *testing.T) {
	tb, _ := newTestTable(t)
	fillSemaphore(t, tb, "big", 20000, 16)
	const runs = 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		if st, _ := tb.Status([]byte("big")); st.HoldersTotal != 20000 {
			t.Fatalf("total %d", st.HoldersTotal)
		}
	}
	runtime.ReadMemStats(&after)
	// A listed holder costs its Holder (48 bytes) and at most its share of
	// the slice's growth; 20000 of them would be a megabyte a call.
	perCall := (after.TotalAlloc - before.TotalAlloc) / runs
	if limit := uint64(4 * 48 * StatusHolders); perCall > limit {
		t.Fatalf("Status of a 20000-holder semaphore allocated %d bytes a call, want at most %d", perCall, limit)
	}
}

func TestHoldersPages(t *testing.T) {
	tb, _ := newTestTable(t)
	toks := fillSemaphore(t, tb, "sem", 250, 4)
	for _, count := range []int{1, 7, 100, 249, 250, 251, 1000} {
		var got []Holder
		cursor, pages := uint64(0), 0
		for {
			next, page := tb.Holders([]byte("sem"), cursor, count, nil)
			if len(page) > count {
				t.Fatalf("COUNT %d: a page of %d", count, len(page))
			}
			got = append(got, page...)
			pages++
			if next == 0 {
				break
			}
			if next <= cursor {
				t.Fatalf("COUNT %d: cursor went from %d to %d", count, cursor, next)
			}
			cursor = next
		}
		if !slices.Equal(holderTokensOf(got), toks) {
			t.Fatalf("COUNT %d: tokens %v, want %v", count, holderTokensOf(got), toks)
		}
		if want := (250 + count - 1) / count; pages != want {
			t.Errorf("COUNT %d: %d pages, want %d", count, pages, want)
		}
		if got[17].Owner != "0017" || got[17].TTL != time.Minute {
			t.Fatalf("holder %+v", got[17])
		}
	}
}

func TestHoldersOfLocksAndUnknownKeys(t *testing.T) {
	tb, _ := newTestTable(t)
	x := mustAcquire(t, tb, "x", time.Second, "me")
	r1 := mustAcquireShared(t, tb, "r", time.Second, "a")
	r2 := mustAcquireShared(t, tb, "r", time.Second, "b")
	tb.Create([]byte("free"), CreateOptions{})
	dst := []Holder{{Token: 1}}
	for _, tc := range []struct {
		key    string
		cursor uint64
		count  int
		next   uint64
		want   []uint64
	}{
		{"x", 0, 10, 0, []uint64{x}},
		{"x", x - 1, 1, 0, []uint64{x}},
		{"x", x, 10, 0, nil},
		{"r", 0, 10, 0, []uint64{r1, r2}},
		{"r", 0, 1, r1, []uint64{r1}},
		{"r", r1, 1, 0, []uint64{r2}}, // the last holder: the walk is over
		{"r", r2 - 1, 10, 0, []uint64{r2}},
		{"r", r2, 10, 0, nil},
		{"r", math.MaxUint64, 10, 0, nil},
		{"r", 0, 0, r1, []uint64{r1}}, // a count below 1 counts as 1
		{"free", 0, 10, 0, nil},
		{"nope", 0, 10, 0, nil},
	} {
		next, got := tb.Holders([]byte(tc.key), tc.cursor, tc.count, dst)
		if next != tc.next || !slices.Equal(holderTokensOf(got[1:]), tc.want) || got[0].Token != 1 {
			t.Errorf("Holders(%s, %d, %d) = %d, %v; want %d, %v after dst's own", tc.key, tc.cursor, tc.count, next, holderTokensOf(got), tc.next, tc.want)
		}
	}
	if _, got := tb.Holders([]byte("x"), 0, 1, nil); got[0] != (Holder{Token: x, Owner: "me", TTL: time.Second}) {
		t.Fatalf("exclusive holder %+v", got[0])
	}
	if _, got := tb.Holders([]byte("r"), 0, 1, nil); got[0] != (Holder{Token: r1, Owner: "a", TTL: time.Second, Shared: true}) {
		t.Fatalf("reader %+v", got[0])
	}
}

// TestHoldersWalkWhileHoldersComeAndGo: between pages, leases are released,
// granted, extended and expire (some into a lock-delay). Every lease live for
// the whole walk is listed exactly once, no lease twice, and every lease
// listed was live when its page was read.
func TestHoldersWalkWhileHoldersComeAndGo(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 13))
			tb, clock := newTestTable(t)
			key := []byte("sem")
			const limit = 300
			tb.Create(key, CreateOptions{Limit: limit, LockDelay: 5 * time.Millisecond, LockDelaySet: true})
			live := map[uint64]bool{}
			acquire := func() {
				ttl := time.Duration(5+rng.IntN(200)) * time.Millisecond
				if tok, ok, _ := tb.Acquire(&Request{Key: key, TTL: ttl}); ok {
					live[tok] = true
				}
			}
			for range limit - 20 {
				acquire()
			}
			alive := func() {
				for tok := range live {
					if !tb.Verify(key, tok) {
						delete(live, tok)
					}
				}
			}
			alive()
			throughout := map[uint64]bool{} // live at the start, not yet seen gone
			for tok := range live {
				throughout[tok] = true
			}
			seen := map[uint64]bool{}
			cursor := uint64(0)
			for pages := 0; ; pages++ {
				if pages > limit {
					t.Fatal("the walk does not end")
				}
				next, page := tb.Holders(key, cursor, 1+rng.IntN(40), nil)
				for _, h := range page {
					if seen[h.Token] {
						t.Fatalf("token %d listed twice", h.Token)
					}
					if !tb.Verify(key, h.Token) {
						t.Fatalf("token %d listed but not live", h.Token)
					}
					seen[h.Token] = true
				}
				if next == 0 {
					break
				}
				cursor = next
				// Changes between pages.
				for range rng.IntN(10) {
					toks := slices.Sorted(maps.Keys(live))
					switch op := rng.IntN(4); {
					case op == 0 && len(toks) > 0:
						tok := toks[rng.IntN(len(toks))]
						tb.Release(key, tok)
						delete(live, tok)
						delete(throughout, tok)
					case op == 1 && len(toks) > 0:
						tb.Extend(key, toks[rng.IntN(len(toks))], time.Duration(1+rng.IntN(200))*time.Millisecond)
					case op == 2:
						acquire()
					default:
						clock.Advance(time.Duration(rng.IntN(4)) * time.Millisecond)
					}
				}
				alive()
				for tok := range throughout {
					if !live[tok] {
						delete(throughout, tok)
					}
				}
			}
			for tok := range throughout {
				if !seen[tok] {
					t.Fatalf("token %d, live for the whole walk, never listed", tok)
				}
			}
		})
	}
}

// TestHoldersPageEndsAtAMegabyteOfOwners: with owners as long as MaxKeyLen
// allows, a page of 1000 holders would be a reply of 64 MB; it ends once
// its owners pass a megabyte, and the walk goes on from there.
func TestHoldersPageEndsAtAMegabyteOfOwners(t *testing.T) {
	tb, _ := newTestTable(t, func(c *Config) { c.MaxKeyLen = MaxKeyLenLimit })
	const n, ownerLen = 40, 60000
	toks := fillSemaphore(t, tb, "sem", n, ownerLen)
	var got []uint64
	pages := 0
	for cursor := uint64(0); ; {
		next, page := tb.Holders([]byte("sem"), cursor, 1000, nil)
		pages++
		bytes := 0
		for _, h := range page {
			bytes += len(h.Owner)
			got = append(got, h.Token)
		}
		if bytes-ownerLen >= HolderPageBytes {
			t.Fatalf("a page of %d holders, %d bytes of owners", len(page), bytes)
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	perPage := (HolderPageBytes + ownerLen - 1) / ownerLen // the one that passes the megabyte ends it
	if want := (n + perPage - 1) / perPage; pages != want || !slices.Equal(got, toks) {
		t.Fatalf("%d pages of %d holders, want %d of %d", pages, len(got), want, n)
	}
}
