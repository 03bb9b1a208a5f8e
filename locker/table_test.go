package locker

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func newTestTable(t testing.TB, mutate ...func(*Config)) (*Table, *ManualClock) {
	t.Helper()
	clock := &ManualClock{}
	clock.Advance(time.Hour) // an origin far from zero catches origin assumptions
	cfg := DefaultConfig()
	cfg.Shards = 4
	cfg.FirstToken = 1000
	cfg.Clock = clock
	for _, m := range mutate {
		m(&cfg)
	}
	tb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb, clock
}

func mustAcquire(t *testing.T, tb *Table, key string, ttl time.Duration, owner string) uint64 {
	t.Helper()
	tok, ok, err := tb.Acquire(&Request{Key: []byte(key), TTL: ttl, Owner: []byte(owner)})
	if err != nil || !ok {
		t.Fatalf("Acquire(%q) = %d, %v, %v; want a grant", key, tok, ok, err)
	}
	return tok
}

func mustNotAcquire(t *testing.T, tb *Table, key string, ttl time.Duration, owner string) {
	t.Helper()
	tok, ok, err := tb.Acquire(&Request{Key: []byte(key), TTL: ttl, Owner: []byte(owner)})
	if err != nil || ok {
		t.Fatalf("Acquire(%q) = %d, %v, %v; want no grant", key, tok, ok, err)
	}
}

func TestAcquireVerifyReleaseExtend(t *testing.T) {
	tb, clock := newTestTable(t)
	k := []byte("a")
	tok := mustAcquire(t, tb, "a", time.Second, "")
	if tok <= 1000 {
		t.Fatalf("token %d not above FirstToken", tok)
	}
	mustNotAcquire(t, tb, "a", time.Second, "")
	if !tb.Verify(k, tok) || tb.Verify(k, tok+1) || tb.Verify([]byte("b"), tok) {
		t.Fatal("Verify answers wrong")
	}
	clock.Advance(900 * time.Millisecond)
	if ok, err := tb.Extend(k, tok, time.Second); !ok || err != nil {
		t.Fatalf("Extend = %v, %v", ok, err)
	}
	clock.Advance(900 * time.Millisecond) // past the first deadline, inside the extended one
	if !tb.Verify(k, tok) {
		t.Fatal("extended lease lost")
	}
	if ok, _ := tb.Extend(k, tok+1, time.Second); ok {
		t.Fatal("Extend with a wrong token succeeded")
	}
	if tb.Release(k, tok+1) {
		t.Fatal("Release with a wrong token succeeded")
	}
	if !tb.Release(k, tok) || tb.Release(k, tok) {
		t.Fatal("Release should succeed once")
	}
	if tb.Verify(k, tok) {
		t.Fatal("released token still verifies")
	}
	if next := mustAcquire(t, tb, "a", time.Second, ""); next <= tok {
		t.Fatalf("token went from %d to %d", tok, next)
	}
}

func TestExpiryAtExactDeadlineWithoutReaper(t *testing.T) {
	tb, clock := newTestTable(t)
	k := []byte("k")
	tok := mustAcquire(t, tb, "k", 100*time.Millisecond, "")
	clock.Advance(100*time.Millisecond - 1)
	if !tb.Verify(k, tok) {
		t.Fatal("lease expired before its deadline")
	}
	clock.Advance(1)
	if tb.Verify(k, tok) {
		t.Fatal("lease verifies at its deadline")
	}
	if ok, _ := tb.Extend(k, tok, time.Second); ok {
		t.Fatal("expired lease extended")
	}
	if tb.Release(k, tok) {
		t.Fatal("expired lease released")
	}
	if next := mustAcquire(t, tb, "k", time.Second, ""); next <= tok {
		t.Fatalf("token after expiry %d <= %d", next, tok)
	}
	if st := tb.Stats(); st.Expired != 1 {
		t.Fatalf("expired count %d, want 1", st.Expired)
	}
}

func TestReaperReclaimsWithinATick(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.Tick = 10 * time.Millisecond })
	for i := range 1000 {
		mustAcquire(t, tb, fmt.Sprint("k", i), time.Duration(i+1)*time.Millisecond, "")
	}
	if _, err := tb.Create([]byte("created"), CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, tb, "created", 5*time.Millisecond, "")
	for step := 1; step <= 1010; step++ {
		clock.Advance(time.Millisecond)
		tb.ExpireDue()
		st := tb.Stats()
		// Leases k0..k(step-1) are due; the wheel may lag one tick behind.
		due := min(step, 1000)
		if step >= 5 {
			due++ // the created lock's lease
		}
		inWheel := 1001 - st.Expired
		if st.Expired > uint64(due) || uint64(due)-st.Expired > 10 {
			t.Fatalf("at %dms expired %d of %d due (%d still held)", step, st.Expired, due, inWheel)
		}
	}
	st := tb.Stats()
	if st.Held != 0 || st.Locks != 1 || st.Expired != 1001 {
		t.Fatalf("after all deadlines: %+v; want no leases, only the created lock", st)
	}
}

func TestTokensOnlyGrow(t *testing.T) {
	tb, clock := newTestTable(t)
	k := []byte("fenced")
	var last uint64
	next := func(what string) {
		t.Helper()
		tok := mustAcquire(t, tb, "fenced", time.Second, "")
		if tok <= last {
			t.Fatalf("after %s: token %d <= previous %d", what, tok, last)
		}
		last = tok
	}
	next("first grant")
	tb.Release(k, last)
	next("release")
	clock.Advance(time.Second)
	next("expiry")
	clock.Advance(time.Second)
	tb.ExpireDue()
	if _, err := tb.Create(k, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	next("create")
	tb.Release(k, last)
	if ok, err := tb.Delete(k); !ok || err != nil {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if _, err := tb.Create(k, CreateOptions{DefaultTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	next("delete and re-create")
	st, _ := tb.Status(k)
	if st.LastToken != last {
		t.Fatalf("LastToken %d, want %d", st.LastToken, last)
	}
}

func TestOwnerRetry(t *testing.T) {
	tb, clock := newTestTable(t)
	k := []byte("job")
	tok := mustAcquire(t, tb, "job", time.Second, "worker-1")
	clock.Advance(800 * time.Millisecond)
	if again := mustAcquire(t, tb, "job", 2*time.Second, "worker-1"); again != tok {
		t.Fatalf("retry by the owner got token %d, want %d", again, tok)
	}
	st, _ := tb.Status(k)
	if st.TTL != 2*time.Second || st.Owner != "worker-1" {
		t.Fatalf("after retry status %+v; want ttl renewed to 2s", st)
	}
	for _, other := range []string{"worker-2", "", "worker-11", "worker-"} {
		mustNotAcquire(t, tb, "job", time.Second, other)
	}
	// An anonymous holder is not re-entered by another anonymous request.
	mustAcquire(t, tb, "anon", time.Second, "")
	mustNotAcquire(t, tb, "anon", time.Second, "")
	// After expiry the owner gets a new, larger token.
	clock.Advance(2 * time.Second)
	if again := mustAcquire(t, tb, "job", time.Second, "worker-1"); again <= tok {
		t.Fatalf("owner after expiry got %d, want > %d", again, tok)
	}
}

func TestStatus(t *testing.T) {
	tb, clock := newTestTable(t)
	if _, ok := tb.Status([]byte("nope")); ok {
		t.Fatal("status of unknown key")
	}
	tb.Create([]byte("c"), CreateOptions{DefaultTTL: 5 * time.Second})
	st, ok := tb.Status([]byte("c"))
	if want := (Status{DefaultTTL: 5 * time.Second, Created: true, LastToken: 0}); !ok || !reflect.DeepEqual(st, want) {
		t.Fatalf("free created lock: %+v, want %+v", st, want)
	}
	tok := mustAcquire(t, tb, "c", 0, "me")
	clock.Advance(time.Second)
	st, _ = tb.Status([]byte("c"))
	want := Status{Held: true, Token: tok, Owner: "me", TTL: 4 * time.Second, LastToken: tok, DefaultTTL: 5 * time.Second, Created: true,
		Holders: []Holder{{Token: tok, Owner: "me", TTL: 4 * time.Second}}, HoldersTotal: 1}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("held: %+v, want %+v", st, want)
	}
	clock.Advance(4 * time.Second)
	st, _ = tb.Status([]byte("c"))
	if want := (Status{LastToken: tok, DefaultTTL: 5 * time.Second, Created: true}); !reflect.DeepEqual(st, want) {
		t.Fatalf("expired: %+v, want %+v", st, want)
	}
	// A lock made on the fly disappears once free.
	tok = mustAcquire(t, tb, "fly", time.Second, "")
	if st, ok := tb.Status([]byte("fly")); !ok || st.Created || !st.Held {
		t.Fatalf("on-the-fly lock status %+v %v", st, ok)
	}
	tb.Release([]byte("fly"), tok)
	if _, ok := tb.Status([]byte("fly")); ok {
		t.Fatal("free on-the-fly lock still listed")
	}
}

func TestCreateAndDelete(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("d")
	for i, want := range []bool{true, false} {
		if ok, err := tb.Create(k, CreateOptions{}); ok != want || err != nil {
			t.Fatalf("Create #%d = %v, %v; want %v", i, ok, err, want)
		}
	}
	tok := mustAcquire(t, tb, "d", time.Second, "")
	if _, err := tb.Delete(k); !errors.Is(err, ErrInUse) {
		t.Fatalf("Delete of held lock: %v, want ErrInUse", err)
	}
	tb.Release(k, tok)
	if ok, err := tb.Delete(k); !ok || err != nil {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if ok, err := tb.Delete(k); ok || err != nil {
		t.Fatalf("second Delete = %v, %v", ok, err)
	}
	// Create adopts a lock that Acquire made on the fly.
	tok = mustAcquire(t, tb, "adopt", time.Second, "")
	if ok, err := tb.Create([]byte("adopt"), CreateOptions{DefaultTTL: 3 * time.Second}); !ok || err != nil {
		t.Fatalf("Create of on-the-fly lock = %v, %v; want adopted", ok, err)
	}
	tb.Release([]byte("adopt"), tok)
	if st, ok := tb.Status([]byte("adopt")); !ok || !st.Created || st.DefaultTTL != 3*time.Second {
		t.Fatalf("adopted lock after release: %+v %v", st, ok)
	}
}

func TestErrors(t *testing.T) {
	tb, _ := newTestTable(t, func(c *Config) { c.MaxKeyLen = 8; c.MaxTTL = time.Minute })
	long := []byte(strings.Repeat("x", 9))
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"acquire empty key", func() error { _, _, err := tb.Acquire(&Request{Key: nil, TTL: time.Second}); return err }, ErrEmptyKey},
		{"acquire long key", func() error { _, _, err := tb.Acquire(&Request{Key: long, TTL: time.Second}); return err }, ErrKeyTooLong},
		{"acquire long owner", func() error {
			_, _, err := tb.Acquire(&Request{Key: []byte("k"), TTL: time.Second, Owner: long})
			return err
		}, ErrOwnerTooLong},
		{"acquire negative ttl", func() error { _, _, err := tb.Acquire(&Request{Key: []byte("k"), TTL: -1}); return err }, ErrTTLRange},
		{"acquire ttl over max", func() error {
			_, _, err := tb.Acquire(&Request{Key: []byte("k"), TTL: time.Minute + 1})
			return err
		}, ErrTTLRange},
		{"acquire no ttl", func() error { _, _, err := tb.Acquire(&Request{Key: []byte("k"), TTL: 0}); return err }, ErrNoTTL},
		{"create empty key", func() error { _, err := tb.Create(nil, CreateOptions{}); return err }, ErrEmptyKey},
		{"create ttl over max", func() error { _, err := tb.Create([]byte("k"), CreateOptions{DefaultTTL: time.Hour}); return err }, ErrTTLRange},
		{"extend zero ttl", func() error { _, err := tb.Extend([]byte("k"), 1, 0); return err }, ErrTTLRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if st := tb.Stats(); st.Locks != 0 {
		t.Fatalf("failed calls left %d locks behind", st.Locks)
	}
	tb.Create([]byte("nottl"), CreateOptions{})
	if _, _, err := tb.Acquire(&Request{Key: []byte("nottl"), TTL: 0}); !errors.Is(err, ErrNoTTL) {
		t.Fatalf("created lock without default ttl: %v", err)
	}
}

func TestRequireCreate(t *testing.T) {
	tb, _ := newTestTable(t, func(c *Config) { c.RequireCreate = true })
	_, _, err := tb.Acquire(&Request{Key: []byte("missing"), TTL: time.Second})
	var ke *KeyError
	if !errors.Is(err, ErrNoSuchLock) || !errors.As(err, &ke) || ke.Key != "missing" {
		t.Fatalf("got %v; want ErrNoSuchLock naming the key", err)
	}
	tb.Create([]byte("there"), CreateOptions{})
	tok := mustAcquire(t, tb, "there", time.Second, "")
	tb.Release([]byte("there"), tok)
	if _, ok := tb.Status([]byte("there")); !ok {
		t.Fatal("created lock vanished after release")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"shards not a power of two", func(c *Config) { c.Shards = 3 }},
		{"zero shards", func(c *Config) { c.Shards = 0 }},
		{"tick too small", func(c *Config) { c.Tick = time.Microsecond }},
		{"max ttl zero", func(c *Config) { c.MaxTTL = 0 }},
		{"max key len zero", func(c *Config) { c.MaxKeyLen = 0 }},
		{"max key len too big", func(c *Config) { c.MaxKeyLen = MaxKeyLenLimit + 1 }},
		{"first token zero", func(c *Config) { c.FirstToken = 0 }},
		{"first token too big", func(c *Config) { c.FirstToken = 1 << 63 }},
		{"no clock", func(c *Config) { c.Clock = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.mutate(&cfg)
			if _, err := New(cfg); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
}

func TestBootEpochToken(t *testing.T) {
	boot := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	earlier := BootEpochToken(boot)
	later := BootEpochToken(boot.Add(time.Millisecond))
	if later-earlier != 1<<TokenTimeShift {
		t.Fatalf("one millisecond apart gives %d tokens of room, want 2^%d", later-earlier, TokenTimeShift)
	}
	if BootEpochToken(time.Date(2095, 1, 1, 0, 0, 0, 0, time.UTC)) >= MaxSafeToken {
		t.Fatal("tokens leave the float64-exact range before 2095")
	}
	if BootEpochToken(time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)) == 0 {
		t.Fatal("a clock before the epoch must still give a positive first token")
	}
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("default first token %d: %v", cfg.FirstToken, err)
	}
}

func TestScanWhileKeysChange(t *testing.T) {
	tb, _ := newTestTable(t)
	stable := map[string]bool{}
	for i := range 500 {
		k := fmt.Sprintf("stable:%d", i)
		tb.Create([]byte(k), CreateOptions{})
		stable[k] = false
	}
	for i := range 500 {
		tb.Create([]byte(fmt.Sprintf("churn:%d", i)), CreateOptions{})
	}
	var cursor uint64
	calls := 0
	for {
		var keys []string
		cursor, keys = tb.Scan(cursor, 7, nil, nil)
		calls++
		for _, k := range keys {
			if seen, ok := stable[k]; ok {
				if seen {
					t.Fatalf("%s returned twice", k)
				}
				stable[k] = true
			}
		}
		// Churn between calls: delete old keys, add new ones.
		tb.Delete([]byte(fmt.Sprintf("churn:%d", calls)))
		tb.Create([]byte(fmt.Sprintf("new:%d", calls)), CreateOptions{})
		if cursor == 0 {
			break
		}
		if calls > 10000 {
			t.Fatal("scan does not terminate")
		}
	}
	for k, seen := range stable {
		if !seen {
			t.Fatalf("%s never returned", k)
		}
	}
}

func TestScanMatchAndSkipsExpired(t *testing.T) {
	tb, clock := newTestTable(t)
	mustAcquire(t, tb, "user:1", time.Second, "")
	mustAcquire(t, tb, "user:2", 3*time.Second, "")
	mustAcquire(t, tb, "job:1", 3*time.Second, "")
	clock.Advance(2 * time.Second) // user:1 is past its deadline; no reaper ran
	var got []string
	var cursor uint64
	for {
		cursor, got = tb.Scan(cursor, 100, func(k []byte) (bool, bool) { return strings.HasPrefix(string(k), "user:"), true }, got)
		if cursor == 0 {
			break
		}
	}
	if len(got) != 1 || got[0] != "user:2" {
		t.Fatalf("scan returned %v, want [user:2]", got)
	}
}

// TestScanCountIsLocksExamined checks that COUNT bounds the locks examined,
// matching or not, as SCAN's does: a selective filter over a big table must
// not make one call walk the whole of it.
func TestScanCountIsLocksExamined(t *testing.T) {
	tb, _ := newTestTable(t)
	for i := range 1000 {
		tb.Create([]byte(fmt.Sprintf("k%d", i)), CreateOptions{})
	}
	var cursor uint64
	calls, seen := 0, 0
	for {
		examined := 0
		cursor, _ = tb.Scan(cursor, 10, func([]byte) (bool, bool) {
			examined++
			seen++
			return false, true
		}, nil)
		calls++
		if examined > 10 {
			t.Fatalf("call %d examined %d locks, COUNT is 10", calls, examined)
		}
		if cursor == 0 {
			break
		}
		if calls > 10000 {
			t.Fatal("scan does not terminate")
		}
	}
	if seen != 1000 {
		t.Fatalf("the walk examined %d locks, want 1000", seen)
	}
}

// TestScanStopsWhenMatchSaysSo checks that a filter ends a call early by
// answering more=false, and that the next call resumes after that lock: no
// lock is skipped or returned twice.
func TestScanStopsWhenMatchSaysSo(t *testing.T) {
	tb, _ := newTestTable(t)
	want := map[string]int{}
	for i := range 300 {
		k := fmt.Sprintf("k%d", i)
		tb.Create([]byte(k), CreateOptions{})
		want[k] = 0
	}
	var cursor uint64
	calls := 0
	for {
		examined := 0
		var names []string
		cursor, names = tb.Scan(cursor, 1000, func([]byte) (bool, bool) {
			examined++
			return true, examined < 3
		}, nil)
		calls++
		if examined > 3 {
			t.Fatalf("call %d examined %d locks after the filter said stop at 3", calls, examined)
		}
		for _, n := range names {
			want[n]++
		}
		if cursor == 0 {
			break
		}
		if calls > 10000 {
			t.Fatal("scan does not terminate")
		}
	}
	for k, n := range want {
		if n != 1 {
			t.Fatalf("%s returned %d times, want once", k, n)
		}
	}
	if calls < 100 {
		t.Fatalf("300 locks in %d calls of at most 3", calls)
	}
}

func TestKeyLengths(t *testing.T) {
	tb, clock := newTestTable(t)
	// Around the inline limit and far beyond it, which goes to the arena.
	for _, n := range []int{1, inlineKeyMax - 1, inlineKeyMax, inlineKeyMax + 1, 100, 1024} {
		k := strings.Repeat("k", n-1) + "!"
		tok := mustAcquire(t, tb, k, time.Second, strings.Repeat("o", n))
		if st, ok := tb.Status([]byte(k)); !ok || st.Token != tok || st.Owner != strings.Repeat("o", n) {
			t.Fatalf("%d-byte key: status %+v %v", n, st, ok)
		}
		var names []string
		for cursor := uint64(0); ; {
			cursor, names = tb.Scan(cursor, 100, nil, names)
			if cursor == 0 {
				break
			}
		}
		if len(names) != 1 || names[0] != k {
			t.Fatalf("%d-byte key: scan gave %q", n, names)
		}
		if n%2 == 0 {
			tb.Release([]byte(k), tok)
		} else {
			clock.Advance(time.Second)
			tb.ExpireDue()
		}
		if _, ok := tb.Status([]byte(k)); ok {
			t.Fatalf("%d-byte key still present", n)
		}
	}
	if st := tb.Stats(); st.Locks != 0 || st.Held != 0 {
		t.Fatalf("stats after all keys are gone: %+v", st)
	}
}

func TestKeyIndexCollisions(t *testing.T) {
	var x keyIndex
	// Hashes that share their low bits pile into one probe run and wrap
	// around the table's end; removal must keep every other member findable.
	present := map[uint32]uint32{} // entry -> hash
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 20000 {
		if len(present) < 200 && rng.IntN(3) > 0 {
			e := uint32(step + 1)
			h := uint32(rng.IntN(8)) | uint32(rng.IntN(4))<<20
			if rng.IntN(4) == 0 {
				h = 63 // the last slot of the smallest table
			}
			x.insert(h, e)
			present[e] = h
		} else {
			for e, h := range present {
				x.remove(h, e)
				delete(present, e)
				break
			}
		}
		if x.count != len(present) {
			t.Fatalf("step %d: count %d, want %d", step, x.count, len(present))
		}
		if step%97 == 0 {
			for e, h := range present {
				if !slices.Contains(slices.Collect(x.candidates(h)), e) {
					t.Fatalf("step %d: entry %d (hash %#x) not found", step, e, h)
				}
			}
		}
	}
}

func TestSameHashKeys(t *testing.T) {
	s := newShard(maphash.MakeSeed(), 1, 0, int64(time.Millisecond), 0, nil)
	const h = 42
	keys := []string{"a", "b", "c"}
	idx := map[string]uint32{}
	for _, k := range keys {
		idx[k] = s.insert(h, []byte(k))
	}
	for _, k := range keys {
		if got := s.lookup(h, []byte(k)); got != idx[k] {
			t.Fatalf("lookup %s = %d, want %d", k, got, idx[k])
		}
	}
	if s.lookup(h, []byte("d")) != 0 {
		t.Fatal("found a key never inserted")
	}
}

func TestStartCloseTwice(t *testing.T) {
	tb, _ := newTestTable(t)
	if err := tb.Start(); err != nil {
		t.Fatal(err)
	}
	if err := tb.Start(); err != nil {
		t.Fatal(err)
	}
	tb.Close()
	tb.Close()
	if err := tb.Start(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

// TestConcurrentHoldersNeverOverlap hammers a few keys from many goroutines
// with a manual clock moving under them, and checks from the grants alone
// that no two leases on a key overlap and that tokens only grow.
func TestConcurrentHoldersNeverOverlap(t *testing.T) {
	tb, clock := newTestTable(t)
	keys := []string{"x", "y", "z"}
	type grant struct {
		token    uint64
		from, to time.Duration
	}
	var mu sync.Mutex
	grants := map[string][]grant{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := keys[(g+i)%len(keys)]
				mu.Lock() // serialises clock reads with grants so intervals are exact
				now := clock.Now()
				tok, ok, err := tb.Acquire(&Request{Key: []byte(k), TTL: 3 * time.Millisecond})
				if err != nil {
					mu.Unlock()
					t.Error(err)
					return
				}
				if ok {
					grants[k] = append(grants[k], grant{tok, now, now + 3*time.Millisecond})
				}
				if i%3 == 0 && ok {
					if tb.Release([]byte(k), tok) {
						gs := grants[k]
						gs[len(gs)-1].to = clock.Now()
					}
				}
				clock.Advance(time.Millisecond)
				mu.Unlock()
				if i%50 == 0 {
					tb.ExpireDue()
				}
			}
		}()
	}
	wg.Wait()
	for k, gs := range grants {
		for i := 1; i < len(gs); i++ {
			if gs[i].token <= gs[i-1].token {
				t.Fatalf("%s: token %d after %d", k, gs[i].token, gs[i-1].token)
			}
			if gs[i].from < gs[i-1].to {
				t.Fatalf("%s: lease %d from %v overlaps lease %d until %v", k, gs[i].token, gs[i].from, gs[i-1].token, gs[i-1].to)
			}
		}
	}
}

func TestLockDelay(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.LockDelay = time.Second })
	k := []byte("d")
	if _, err := tb.Create(k, CreateOptions{LockDelay: 500 * time.Millisecond, LockDelaySet: true}); err != nil {
		t.Fatal(err)
	}

	// A release starts no delay.
	tok := mustAcquire(t, tb, "d", 100*time.Millisecond, "")
	tb.Release(k, tok)
	tok = mustAcquire(t, tb, "d", 100*time.Millisecond, "a")

	// An expiry does, counted from the deadline, even when noticed late.
	clock.Advance(400 * time.Millisecond)
	mustNotAcquire(t, tb, "d", time.Second, "a") // not even for the old owner
	st, _ := tb.Status(k)
	if !st.Delayed || st.Held || st.DelayLeft != 200*time.Millisecond || st.LockDelay != 500*time.Millisecond {
		t.Fatalf("status in the delay: %+v", st)
	}
	if _, err := tb.Delete(k); !errors.Is(err, ErrInLockDelay) {
		t.Fatalf("Delete during the delay: %v", err)
	}
	if tb.Verify(k, tok) || tb.Release(k, tok) {
		t.Fatal("the expired token still verifies or releases")
	}
	clock.Advance(200*time.Millisecond - 1)
	mustNotAcquire(t, tb, "d", time.Second, "")
	clock.Advance(1) // the delay ends exactly at deadline + delay; no reaper ran
	if next := mustAcquire(t, tb, "d", time.Second, ""); next <= tok {
		t.Fatalf("token after the delay %d <= %d", next, tok)
	}
	if st := tb.Stats(); st.Delayed != 1 {
		t.Fatalf("lock-delays begun: %d, want 1", st.Delayed)
	}
}

func TestLockDelayKeepsOnTheFlyLockUntilItEnds(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) { c.LockDelay = time.Second })
	mustAcquire(t, tb, "fly", 100*time.Millisecond, "")
	clock.Advance(100 * time.Millisecond)
	tb.ExpireDue()
	if st := tb.Stats(); st.Locks != 1 || st.Held != 0 {
		t.Fatalf("during the delay: %+v; the lock must stay to remember it", st)
	}
	mustNotAcquire(t, tb, "fly", time.Second, "")
	clock.Advance(time.Second)
	tb.ExpireDue()
	if st := tb.Stats(); st.Locks != 0 {
		t.Fatalf("after the delay %d locks remain; the reaper should remove it", st.Locks)
	}
	mustAcquire(t, tb, "fly", time.Second, "")

	// A created lock can opt out of the table's default.
	tb.Create([]byte("none"), CreateOptions{LockDelaySet: true})
	mustAcquire(t, tb, "none", 100*time.Millisecond, "")
	clock.Advance(100 * time.Millisecond)
	mustAcquire(t, tb, "none", time.Second, "")
}

func TestLockDelayValidation(t *testing.T) {
	tb, _ := newTestTable(t, func(c *Config) { c.MaxTTL = time.Minute })
	for _, d := range []time.Duration{-1, time.Minute + 1} {
		if _, err := tb.Create([]byte("k"), CreateOptions{LockDelay: d, LockDelaySet: true}); !errors.Is(err, ErrLockDelayRange) {
			t.Fatalf("lock-delay %v: %v", d, err)
		}
	}
	cfg := DefaultConfig()
	cfg.LockDelay = cfg.MaxTTL + 1
	if _, err := New(cfg); err == nil {
		t.Fatal("New accepted a lock delay over the max ttl")
	}
}
