package server

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
)

// STATUS of a lock with many holders lists the oldest locker.StatusHolders
// and counts them all; HOLDERS pages through every one. A semaphore of
// 65536 permits with 1 KiB owners made STATUS a 72 MB reply, built under
// the shard lock.

// onEachTransport runs f against a server of each transport: a goroutine
// per connection, and event loops.
func onEachTransport(t *testing.T, f func(t *testing.T, ts *testServer)) {
	for _, tr := range []struct {
		name  string
		loops int
	}{{"goroutines", 0}, {"event loops", 2}} {
		t.Run(tr.name, func(t *testing.T) {
			f(t, startServer(t, func(c *Config) { c.IOLoops = tr.loops }))
		})
	}
}

// holderOwner is the owner of a test's i-th permit: long, as in the report.
func holderOwner(i int) string {
	return fmt.Sprintf("owner-%04d-", i) + strings.Repeat("x", 1000)
}

// holdersPage is HOLDERS's reply: the next cursor and the leases.
func holdersPage(t testing.TB, rdb doer, args ...any) (next uint64, hs []map[string]string) {
	t.Helper()
	r := do(t, rdb, append([]any{"HOLDERS"}, args...)...)
	s := r.Slice()
	cur, ok := s[0].(string)
	if len(s) != 2 || !ok {
		t.Fatalf("want [cursor, holders]: %s", r)
	}
	next, err := strconv.ParseUint(cur, 10, 64)
	if err != nil {
		t.Fatalf("cursor %q: %s", cur, r)
	}
	return next, holdersOf(t, s[1])
}

func TestStatusListsAtMostAHundredHolders(t *testing.T) {
	onEachTransport(t, func(t *testing.T, ts *testServer) {
		rdb := ts.client()
		const n = 250
		do(t, rdb, "CREATE", "sem", "LIMIT", n).Is(1)
		var toks []string
		for i := range n {
			toks = append(toks, strconv.FormatUint(do(t, rdb, "ACQUIRE", "sem", 60000, "OWNER", holderOwner(i)).Token(), 10))
		}
		m := status(t, rdb, "sem")
		if m["holders-total"] != strconv.Itoa(n) || m["mode"] != "permits" || m["state"] != "held" {
			t.Fatalf("STATUS of a %d-permit semaphore held %d times: %v", n, n, m)
		}
		hs := holders(t, rdb, "sem")
		if len(hs) != locker.StatusHolders {
			t.Fatalf("STATUS lists %d holders, want %d", len(hs), locker.StatusHolders)
		}
		for i, h := range hs {
			if h["token"] != toks[i] || h["owner"] != holderOwner(i) {
				t.Fatalf("holder %d is %s/%.10s, want the %d-th oldest %s/%.10s", i, h["token"], h["owner"], i, toks[i], holderOwner(i))
			}
		}
		// A lock with few holders lists them all.
		x := do(t, rdb, "ACQUIRE", "x", 60000).Token()
		if m := status(t, rdb, "x"); m["holders-total"] != "1" || m["holders"] != fmt.Sprint(x, "/") {
			t.Fatalf("STATUS of an exclusive lock: %v", m)
		}
		do(t, rdb, "CREATE", "free").Is(1)
		if m := status(t, rdb, "free"); m["holders-total"] != "0" || m["holders"] != "" {
			t.Fatalf("STATUS of a free lock: %v", m)
		}
	})
}

// TestHoldersPagesEveryHolderOnce walks a semaphore's holders while, between
// pages, leases are released (some already listed, some not) and granted:
// no lease is listed twice, every lease listed was live when its page was
// read, and every lease live when the last page was read is listed.
func TestHoldersPagesEveryHolderOnce(t *testing.T) {
	onEachTransport(t, func(t *testing.T, ts *testServer) {
		rdb := ts.client()
		rng := rand.New(rand.NewPCG(1, 2))
		do(t, rdb, "CREATE", "sem", "LIMIT", 400).Is(1)
		live := map[uint64]bool{}
		owners := map[uint64]string{}
		acquire := func() {
			owner := holderOwner(len(owners))
			tok := do(t, rdb, "ACQUIRE", "sem", 60000, "OWNER", owner).Token()
			live[tok], owners[tok] = true, owner
		}
		for range 300 {
			acquire()
		}
		seen := map[uint64]bool{}
		cursor := uint64(0)
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("the walk does not end")
			}
			count := 1 + rng.IntN(40)
			next, page := holdersPage(t, rdb, "sem", cursor, "COUNT", count)
			if len(page) > count {
				t.Fatalf("COUNT %d: %d holders", count, len(page))
			}
			for _, h := range page {
				tok, err := strconv.ParseUint(h["token"], 10, 64)
				switch {
				case err != nil || tok <= cursor:
					t.Fatalf("token %q listed after cursor %d", h["token"], cursor)
				case seen[tok]:
					t.Fatalf("token %d listed twice", tok)
				case !live[tok]:
					t.Fatalf("token %d listed, but it was released before the page was read", tok)
				case h["owner"] != owners[tok]:
					t.Fatalf("token %d listed with owner %.10s, want %.10s", tok, h["owner"], owners[tok])
				}
				seen[tok] = true
			}
			if next == 0 {
				break
			}
			cursor = next
			for range rng.IntN(6) {
				toks := slices.Sorted(maps.Keys(live))
				if rng.IntN(2) == 0 && len(toks) > 0 {
					tok := toks[rng.IntN(len(toks))]
					do(t, rdb, "RELEASE", "sem", tok).Is(1)
					delete(live, tok)
				} else {
					acquire()
				}
			}
		}
		for tok := range live {
			if !seen[tok] {
				t.Fatalf("token %d, live when the walk ended, never listed", tok)
			}
		}
	})
}

func TestHoldersReplies(t *testing.T) {
	onEachTransport(t, func(t *testing.T, ts *testServer) {
		rdb := ts.client()
		x := do(t, rdb, "ACQUIRE", "x", 60000, "OWNER", "me").Token()
		if next, hs := holdersPage(t, rdb, "x", 0); next != 0 || len(hs) != 1 || hs[0]["token"] != fmt.Sprint(x) || hs[0]["owner"] != "me" {
			t.Fatalf("HOLDERS of an exclusive lock: %d, %v", next, hs)
		}
		if next, hs := holdersPage(t, rdb, "x", x); next != 0 || len(hs) != 0 {
			t.Fatalf("HOLDERS past the last token: %d, %v", next, hs)
		}
		// An unknown lock has no holders, as SSCAN of a missing key.
		if next, hs := holdersPage(t, rdb, "nope", 0); next != 0 || len(hs) != 0 {
			t.Fatalf("HOLDERS of an unknown lock: %d, %v", next, hs)
		}
		do(t, rdb, "HOLDERS", "x", 0, "COUNT", protocol.MaxHoldersCount)
		for _, tc := range []struct {
			args []any
			want string
		}{
			{[]any{"x", 0, "COUNT", protocol.MaxHoldersCount + 1}, protocol.ErrBadHoldersCount.Error()},
			{[]any{"x", 0, "COUNT", 0}, protocol.ErrBadHoldersCount.Error()},
			{[]any{"x", 0, "COUNT", "many"}, protocol.ErrNotInteger.Error()},
			{[]any{"x", 0, "COUNT"}, protocol.ErrSyntax.Error()},
			{[]any{"x", 0, "MATCH", "*"}, protocol.ErrSyntax.Error()},
			{[]any{"x", "-1"}, protocol.ErrBadCursor.Error()},
			{[]any{"x"}, protocol.ArityError("holders").Error()},
		} {
			if got := do(t, rdb, append([]any{"HOLDERS"}, tc.args...)...).Err(tc.want); got != tc.want {
				t.Errorf("HOLDERS %v: %q, want %q", tc.args, got, tc.want)
			}
		}
	})
}
