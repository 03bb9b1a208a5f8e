package locker

import (
	"slices"
	"testing"
	"time"
)

// journalRecorder keeps the changes a table journals.
type journalRecorder struct{ got []Change }

func (j *journalRecorder) Change(_ int, c *Change) {
	x := *c
	x.Key, x.Owner = slices.Clone(c.Key), slices.Clone(c.Owner)
	j.got = append(j.got, x)
}
func (j *journalRecorder) ReserveTokens(uint64) {}

func TestForceReleaseExclusive(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("x")
	if n := tb.ForceRelease(k, AllLeases); n != 0 {
		t.Fatalf("ForceRelease of an unknown lock = %d, want 0", n)
	}
	tok := mustAcquire(t, tb, "x", time.Minute, "stuck")
	if n := tb.ForceRelease(k, tok+1); n != 0 || !tb.Verify(k, tok) {
		t.Fatalf("ForceRelease with another token = %d, lease live %v; want 0, true", n, tb.Verify(k, tok))
	}
	if n := tb.ForceRelease(k, tok); n != 1 || tb.Verify(k, tok) {
		t.Fatalf("ForceRelease(token) = %d, lease live %v; want 1, false", n, tb.Verify(k, tok))
	}
	if _, ok := tb.Status(k); ok {
		t.Fatal("an on-the-fly lock stays after its lease was forced out")
	}
	next := mustAcquire(t, tb, "x", time.Minute, "")
	if next <= tok {
		t.Fatalf("next token %d not above the forced one %d", next, tok)
	}
	if n := tb.ForceRelease(k, AllLeases); n != 1 {
		t.Fatalf("ForceRelease(AllLeases) = %d, want 1", n)
	}
	if st := tb.Stats(); st.Held != 0 {
		t.Fatalf("Held = %d after forced releases, want 0", st.Held)
	}
}

func TestForceReleaseSharedAndSemaphore(t *testing.T) {
	tb, _ := newTestTable(t)
	var readers []uint64
	for _, o := range []string{"r1", "r2", "r3"} {
		tok, ok, err := tb.Acquire(&Request{Key: []byte("rw"), TTL: time.Minute, Owner: []byte(o), Mode: Shared})
		if !ok || err != nil {
			t.Fatalf("shared Acquire = %v, %v", ok, err)
		}
		readers = append(readers, tok)
	}
	if n := tb.ForceRelease([]byte("rw"), readers[1]); n != 1 {
		t.Fatalf("ForceRelease(one reader) = %d, want 1", n)
	}
	if !tb.Verify([]byte("rw"), readers[0]) || tb.Verify([]byte("rw"), readers[1]) || !tb.Verify([]byte("rw"), readers[2]) {
		t.Fatal("ForceRelease(token) ended the wrong reader")
	}
	if n := tb.ForceRelease([]byte("rw"), AllLeases); n != 2 {
		t.Fatalf("ForceRelease(all readers) = %d, want 2", n)
	}

	sem := []byte("sem")
	if _, err := tb.Create(sem, CreateOptions{Limit: 3}); err != nil {
		t.Fatal(err)
	}
	var permits []uint64
	for range 3 {
		permits = append(permits, mustAcquire(t, tb, "sem", time.Minute, ""))
	}
	mustNotAcquire(t, tb, "sem", time.Minute, "")
	if n := tb.ForceRelease(sem, AllLeases); n != 3 {
		t.Fatalf("ForceRelease(semaphore) = %d, want 3", n)
	}
	st, ok := tb.Status(sem)
	if !ok || st.Held {
		t.Fatalf("semaphore after ForceRelease: %+v, %v; want it kept (created) and free", st, ok)
	}
	if tok := mustAcquire(t, tb, "sem", time.Minute, ""); tok <= permits[2] {
		t.Fatalf("next permit %d not above the forced ones %v", tok, permits)
	}
	if got := tb.Stats().Held; got != 1 {
		t.Fatalf("Held = %d, want 1", got)
	}
}

// The attack the override answers: a lock-delay of a day. ForceRelease ends
// the lock-delay of an expired lease, exclusive or a semaphore's permit.
func TestForceReleaseEndsLockDelay(t *testing.T) {
	tb, clock := newTestTable(t)
	k := []byte("victim")
	if _, err := tb.Create(k, CreateOptions{LockDelay: 24 * time.Hour, LockDelaySet: true}); err != nil {
		t.Fatal(err)
	}
	tok := mustAcquire(t, tb, "victim", time.Second, "")
	clock.Advance(2 * time.Second)
	tb.ExpireDue()
	mustNotAcquire(t, tb, "victim", time.Second, "")
	if n := tb.ForceRelease(k, AllLeases); n != 1 {
		t.Fatalf("ForceRelease during a lock-delay = %d, want 1", n)
	}
	if next := mustAcquire(t, tb, "victim", time.Second, ""); next <= tok {
		t.Fatalf("token after the delay %d not above %d", next, tok)
	}

	sem := []byte("sem")
	if _, err := tb.Create(sem, CreateOptions{Limit: 1, LockDelay: 24 * time.Hour, LockDelaySet: true}); err != nil {
		t.Fatal(err)
	}
	permit := mustAcquire(t, tb, "sem", time.Second, "")
	clock.Advance(2 * time.Second)
	tb.ExpireDue()
	mustNotAcquire(t, tb, "sem", time.Second, "")
	if n := tb.ForceRelease(sem, permit); n != 1 {
		t.Fatalf("ForceRelease(the delayed permit's token) = %d, want 1", n)
	}
	mustAcquire(t, tb, "sem", time.Second, "")
}

func TestForceReleaseHandsOff(t *testing.T) {
	tb, _ := newTestTable(t)
	k := []byte("q")
	tok := mustAcquire(t, tb, "q", time.Minute, "stuck")
	_, ch := mustQueue(t, tb, &Request{Key: k, TTL: time.Minute, Owner: []byte("next")})
	if n := tb.ForceRelease(k, AllLeases); n != 1 {
		t.Fatalf("ForceRelease = %d, want 1", n)
	}
	next := granted(t, ch)
	if next <= tok || !tb.Verify(k, next) {
		t.Fatalf("waiter granted token %d (live %v), want a live token above %d", next, tb.Verify(k, next), tok)
	}
}

func TestForceReleaseEventsAndJournal(t *testing.T) {
	sink := &recordingSink{}
	sink.active.Store(true)
	j := &journalRecorder{}
	tb, _ := newTestTable(t, func(c *Config) { c.Events = sink; c.Journal = j })
	t1 := mustAcquire(t, tb, "rw", time.Minute, "")
	tb.Release([]byte("rw"), t1)
	r1, _, _ := tb.Acquire(&Request{Key: []byte("rw"), TTL: time.Minute, Owner: []byte("a"), Mode: Shared})
	r2, _, _ := tb.Acquire(&Request{Key: []byte("rw"), TTL: time.Minute, Mode: Shared})
	sink.take()
	j.got = nil

	if n := tb.ForceRelease([]byte("rw"), AllLeases); n != 2 {
		t.Fatalf("ForceRelease = %d, want 2", n)
	}
	wantEvents := []Event{{EventForced, "rw", r1, "a", 0}, {EventForced, "rw", r2, "", 0}}
	if got := sink.take(); !slices.Equal(got, wantEvents) {
		t.Fatalf("events = %v, want %v", got, wantEvents)
	}
	// The journal records a forced release as a release: a replay ends the
	// lease, with no lock-delay, exactly as the table did.
	var got []uint64
	for _, c := range j.got {
		if c.Kind != ChangeRelease || string(c.Key) != "rw" {
			t.Fatalf("journaled %+v, want releases of rw", c)
		}
		got = append(got, c.Token)
	}
	if want := []uint64{r1, r2}; !slices.Equal(got, want) {
		t.Fatalf("journaled releases of %v, want %v", got, want)
	}
}
