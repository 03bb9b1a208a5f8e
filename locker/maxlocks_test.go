package locker

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func withMaxLocks(n int) func(*Config) { return func(c *Config) { c.MaxLocks = n } }

func wantTableFull(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrTableFull) {
		t.Fatalf("%s: err = %v, want ErrTableFull", what, err)
	}
}

// TestMaxLocksRefusesOnlyNewLocks fills a table to its bound: a call that
// would make a lock is refused, and every call on an existing lock goes on.
func TestMaxLocksRefusesOnlyNewLocks(t *testing.T) {
	tb, clock := newTestTable(t, withMaxLocks(3))
	a := mustAcquire(t, tb, "a", time.Second, "")
	mustAcquire(t, tb, "b", 2*time.Second, "")
	if _, err := tb.Create([]byte("c"), CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	_, ok, err := tb.Acquire(&Request{Key: []byte("d"), TTL: time.Second})
	wantTableFull(t, "Acquire of a new key at the bound", err)
	if ok {
		t.Fatal("granted past the bound")
	}
	_, err = tb.Create([]byte("d"), CreateOptions{})
	wantTableFull(t, "Create of a new key at the bound", err)
	if got := err.Error(); got != "locker: lock table full (max-locks 3)" {
		t.Fatalf("error text %q", got)
	}
	w := &Wait{Notify: func(uint64) {}}
	_, _, err = tb.AcquireWait(&Request{Key: []byte("d"), TTL: time.Second}, w)
	wantTableFull(t, "AcquireWait of a new key at the bound", err)

	// Existing locks: acquire (refused as held, not as full), wait, create
	// (adopt), verify, extend, status, release.
	mustNotAcquire(t, tb, "a", time.Second, "")
	mustAcquire(t, tb, "c", time.Second, "")
	if made, err := tb.Create([]byte("b"), CreateOptions{}); err != nil || !made {
		t.Fatalf("Create adopting b at the bound = %v, %v", made, err)
	}
	if _, granted, err := tb.AcquireWait(&Request{Key: []byte("a"), TTL: time.Second}, &Wait{Notify: func(uint64) {}}); err != nil || granted {
		t.Fatalf("AcquireWait on a held lock at the bound = %v, %v; want queued", granted, err)
	}
	if !tb.Verify([]byte("a"), a) {
		t.Fatal("Verify at the bound")
	}
	if ok, err := tb.Extend([]byte("a"), a, time.Second); err != nil || !ok {
		t.Fatalf("Extend at the bound = %v, %v", ok, err)
	}
	if _, ok := tb.Status([]byte("a")); !ok {
		t.Fatal("Status at the bound")
	}
	if st := tb.Stats(); st.Locks != 3 || st.TableFullRefusals != 3 {
		t.Fatalf("Stats = %+v, want 3 locks and 3 refusals", st)
	}

	// A lock that goes away frees its slot: deleted, or expired.
	if ok, err := tb.Delete([]byte("c")); err == nil && ok {
		t.Fatal("Delete of held c succeeded")
	}
	clock.Advance(1500 * time.Millisecond) // a expires; its waiter takes it
	tb.ExpireDue()
	_, err = tb.Create([]byte("d"), CreateOptions{})
	wantTableFull(t, "Create while a waiter holds a", err)
	clock.Advance(5 * time.Second) // every lease expires: a, made on the fly, goes; b and c, created, stay
	tb.ExpireDue()
	mustAcquire(t, tb, "d", time.Second, "")
	if ok, err := tb.Delete([]byte("b")); err != nil || !ok {
		t.Fatalf("Delete(b) = %v, %v", ok, err)
	}
	mustAcquire(t, tb, "e", time.Second, "")
	_, _, err = tb.Acquire(&Request{Key: []byte("f"), TTL: time.Second})
	wantTableFull(t, "Acquire after the freed slot was taken", err)
}

// TestMaxLocksReleaseFreesSlot: a lock made on the fly goes when released,
// and so does its place under the bound.
func TestMaxLocksReleaseFreesSlot(t *testing.T) {
	tb, _ := newTestTable(t, withMaxLocks(1))
	tok := mustAcquire(t, tb, "a", time.Second, "")
	_, _, err := tb.Acquire(&Request{Key: []byte("b"), TTL: time.Second})
	wantTableFull(t, "Acquire(b)", err)
	if !tb.Release([]byte("a"), tok) {
		t.Fatal("Release")
	}
	mustAcquire(t, tb, "b", time.Second, "")
}

// TestMaxLocksAcquireAllIsAllOrNothing: an AcquireAll that would take the
// table past its bound is refused as a whole and takes nothing; one that
// fits, counting the keys that exist already, is granted.
func TestMaxLocksAcquireAllIsAllOrNothing(t *testing.T) {
	tb, _ := newTestTable(t, withMaxLocks(4))
	mustAcquire(t, tb, "a", time.Second, "")
	mustAcquire(t, tb, "b", time.Second, "")

	_, ok, err := tb.AcquireAll(&Request{Keys: keysOf("x", "y", "z"), TTL: time.Second})
	wantTableFull(t, "AcquireAll of three new keys with two slots left", err)
	if ok {
		t.Fatal("granted")
	}
	for _, k := range []string{"x", "y", "z"} {
		if _, found := tb.Status([]byte(k)); found {
			t.Fatalf("%s was taken by a refused AcquireAll", k)
		}
	}
	if st := tb.Stats(); st.Locks != 2 || st.TableFullRefusals != 1 {
		t.Fatalf("Stats = %+v, want 2 locks, 1 refusal", st)
	}
	mw, _ := multiWaiter()
	_, _, err = tb.AcquireAllWait(&Request{Keys: keysOf("x", "y", "z"), TTL: time.Second}, mw)
	wantTableFull(t, "AcquireAllWait of three new keys with two slots left", err)

	// a is held: the attempt is not granted, and not refused as full.
	if _, ok, err := tb.AcquireAll(&Request{Keys: keysOf("a", "x", "y"), TTL: time.Second}); err != nil || ok {
		t.Fatalf("AcquireAll over held a = %v, %v; want not granted", ok, err)
	}
	if _, ok, err := tb.AcquireAll(&Request{Keys: keysOf("x", "y"), TTL: time.Second}); err != nil || !ok {
		t.Fatalf("AcquireAll of two new keys with two slots left = %v, %v", ok, err)
	}
	if st := tb.Stats(); st.Locks != 4 {
		t.Fatalf("Stats = %+v, want 4 locks", st)
	}
}

// TestMaxLocksExactUnderConcurrency: goroutines racing to make locks in
// every shard never take the table past its bound, and together make
// exactly as many as it allows.
func TestMaxLocksExactUnderConcurrency(t *testing.T) {
	const bound, workers, each = 50, 8, 40
	tb, _ := newTestTable(t, withMaxLocks(bound))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
		refused int
	)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, full := 0, 0
			for j := range each {
				key := []byte(fmt.Sprintf("w%d-%d", g, j))
				var err error
				var ok bool
				switch j % 3 {
				case 0:
					_, ok, err = tb.Acquire(&Request{Key: key, TTL: time.Hour})
				case 1:
					ok, err = tb.Create(key, CreateOptions{})
				default:
					_, ok, err = tb.AcquireAll(&Request{Keys: [][]byte{key}, TTL: time.Hour})
				}
				switch {
				case errors.Is(err, ErrTableFull):
					full++
				case err != nil || !ok:
					t.Errorf("%s: %v, %v", key, ok, err)
				default:
					mine++
				}
				if n := tb.Stats().Locks; n > bound {
					t.Errorf("%d locks in the table, bound %d", n, bound)
				}
			}
			mu.Lock()
			granted += mine
			refused += full
			mu.Unlock()
		}()
	}
	wg.Wait()
	if st := tb.Stats(); granted != bound || st.Locks != bound || refused != workers*each-bound || st.TableFullRefusals != uint64(refused) {
		t.Fatalf("made %d, refused %d, Stats %+v; want %d made", granted, refused, st, bound)
	}
}

// TestMaxLocksRestoreIsNotRefused: restoring more locks than the bound
// installs them all and reports the excess; new locks are refused until the
// table is back under the bound.
func TestMaxLocksRestoreIsNotRefused(t *testing.T) {
	tb, _ := newTestTable(t, withMaxLocks(2))
	for _, k := range []string{"a", "b", "c"} {
		if err := tb.Restore(&LockState{Key: []byte(k), Created: true, LastToken: 1001}); err != nil {
			t.Fatalf("Restore(%s): %v", k, err)
		}
	}
	if n, over := tb.OverMaxLocks(); n != 3 || !over {
		t.Fatalf("OverMaxLocks = %d, %v; want 3, true", n, over)
	}
	_, _, err := tb.Acquire(&Request{Key: []byte("d"), TTL: time.Second})
	wantTableFull(t, "Acquire over the bound after a restore", err)
	for _, k := range []string{"a", "b"} {
		if ok, err := tb.Delete([]byte(k)); err != nil || !ok {
			t.Fatalf("Delete(%s) = %v, %v", k, ok, err)
		}
	}
	mustAcquire(t, tb, "d", time.Second, "")
	if n, over := tb.OverMaxLocks(); n != 2 || over {
		t.Fatalf("OverMaxLocks = %d, %v; want 2, false", n, over)
	}
}

func TestMaxLocksValidate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxLocks = -1
	if cfg.Validate() == nil {
		t.Fatal("a negative MaxLocks validated")
	}
}

// TestMaxLocksAcquireAllWaitRefusedOnTheWay: a multi-lock that waited for a
// held key and then finds no room for a new one ends ungranted, gives back
// what it took, and says why.
func TestMaxLocksAcquireAllWaitRefusedOnTheWay(t *testing.T) {
	tb, _ := newTestTable(t, withMaxLocks(2))
	a := mustAcquire(t, tb, "a", time.Second, "")
	mw, notified := multiWaiter()
	if _, granted, err := tb.AcquireAllWait(&Request{Keys: keysOf("a", "z"), TTL: time.Second, Wait: time.Second}, mw); err != nil || granted || !mw.Waiting() {
		t.Fatalf("AcquireAllWait = %v, %v, waiting %v; want queued", granted, err, mw.Waiting())
	}
	mustAcquire(t, tb, "b", time.Second, "") // the table is full
	tb.Release([]byte("a"), a)
	<-notified
	if toks, granted := tb.ContinueAll(mw); granted || toks != nil || mw.Waiting() {
		t.Fatalf("ContinueAll = %v, %v, waiting %v; want ended ungranted", toks, granted, mw.Waiting())
	}
	wantTableFull(t, "MultiWait.Err", mw.Err())
	if _, found := tb.Status([]byte("a")); found {
		t.Fatal("a is still in the table: the refused request kept it")
	}
}
