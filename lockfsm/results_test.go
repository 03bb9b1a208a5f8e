package lockfsm

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
)

// tableErrors are errors as the table returns them from what Apply calls,
// made by the table itself where it can be made to.
func tableErrors(t testing.TB) []error {
	t.Helper()
	cfg := locker.DefaultConfig()
	cfg.Shards, cfg.FirstToken, cfg.Clock, cfg.MaxLocks, cfg.Replicated = 1, 1, &locker.ManualClock{}, 2, true
	tab, err := locker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	note := func(err error) {
		t.Helper()
		if err == nil {
			t.Fatal("the table returned no error")
		}
		errs = append(errs, err)
	}
	_, _, err = tab.Acquire(&locker.Request{Key: []byte("k"), TTL: 48 * time.Hour})
	note(err) // ErrTTLRange, wrapped with its range
	_, _, err = tab.Acquire(&locker.Request{Key: nil, TTL: time.Second})
	note(err) // ErrEmptyKey
	_, err = tab.Create([]byte("sem"), locker.CreateOptions{Limit: -1})
	note(err) // ErrLimitRange, wrapped
	_, err = tab.Create([]byte("sem"), locker.CreateOptions{LockDelay: -1, LockDelaySet: true})
	note(err) // ErrLockDelayRange, wrapped
	tab.Create([]byte("sem"), locker.CreateOptions{Limit: 2})
	_, _, err = tab.Acquire(&locker.Request{Key: []byte("sem"), TTL: time.Second, Mode: locker.Shared})
	note(err) // a KeyError of ErrSharedSemaphore
	tab.Acquire(&locker.Request{Key: []byte("x"), TTL: time.Second})
	_, err = tab.Delete([]byte("x"))
	note(err) // a KeyError of ErrInUse
	_, _, err = tab.Acquire(&locker.Request{Key: []byte("y"), TTL: time.Second})
	note(err) // ErrTableFull, wrapped with the bound
	return append(errs,
		locker.ErrNoTTL, locker.ErrKeyTooLong, locker.ErrOwnerTooLong, locker.ErrDuplicateKey,
		&locker.KeyError{Key: "a\x00b", Err: locker.ErrNoSuchLock},
		&locker.KeyError{Key: "k", Err: locker.ErrOwnerMode},
		&locker.KeyError{Key: "k", Err: locker.ErrInLockDelay},
		fmt.Errorf("%w: op %d", ErrBadEntry, 99),
		ErrStaleRequest,
	)
}

// TestResultsRoundTrip: every field of a result comes back, and every error
// keeps its text and what it is: errors.Is of its sentinel, a KeyError's
// key, and so the same wire reply.
func TestResultsRoundTrip(t *testing.T) {
	errs := tableErrors(t)
	want := []Result{
		{Token: 1<<53 - 1, Granted: true},
		{Tokens: []uint64{5, 6, 7}, Granted: true},
		{Tokens: []uint64{}},
		{N: 3},
		{N: -1},
		{Queued: true},
		{},
	}
	for _, err := range errs {
		want = append(want, Result{Err: err})
	}
	got, err := DecodeResults(AppendResults([]byte("junk"), want)[4:])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Err == nil != (w.Err == nil) {
			t.Fatalf("result %d: error %v, want %v", i, g.Err, w.Err)
		}
		if w.Err != nil {
			if g.Err.Error() != w.Err.Error() {
				t.Errorf("result %d: error text %q, want %q", i, g.Err, w.Err)
			}
			if n := sentinelOf(w.Err); n == 0 || !errors.Is(g.Err, wireErrors[n]) {
				t.Errorf("result %d: %v is not %v", i, g.Err, wireErrors[n])
			}
			var wk, gk *locker.KeyError
			if errors.As(w.Err, &wk) && (!errors.As(g.Err, &gk) || gk.Key != wk.Key) {
				t.Errorf("result %d: %v lost its key %q", i, g.Err, wk.Key)
			}
			wr, wknown := protocol.Reply(w.Err)
			gr, gknown := protocol.Reply(g.Err)
			if wr != gr || wknown != gknown {
				t.Errorf("result %d: reply %q (%v), want %q (%v)", i, gr, gknown, wr, wknown)
			}
			g.Err, w.Err = nil, nil
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("result %d: %+v, want %+v", i, g, w)
		}
	}
	// Every sentinel, exactly, comes back as itself.
	for _, s := range wireErrors[1:] {
		rs, err := DecodeResults(AppendResults(nil, []Result{{Err: s}}))
		if err != nil || rs[0].Err != s {
			t.Errorf("%v came back as %v, %v", s, rs[0].Err, err)
		}
	}
}

// TestResultsUnknownError: an error the table does not return keeps its
// text, and is no sentinel.
func TestResultsUnknownError(t *testing.T) {
	orig := errors.New("something else: 42")
	rs, err := DecodeResults(AppendResults(nil, []Result{{Err: orig}}))
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err == nil || rs[0].Err.Error() != orig.Error() || sentinelOf(rs[0].Err) != 0 {
		t.Fatalf("got %v", rs[0].Err)
	}
	// A sentinel this node does not know (a newer node's) decodes the same.
	b := AppendResults(nil, []Result{{Err: ErrStaleRequest}})
	b[len(b)-len(ErrStaleRequest.Error())-2] = 100 // its number, unknown here
	rs, err = DecodeResults(b)
	if err != nil || len(rs) != 1 || rs[0].Err.Error() != ErrStaleRequest.Error() || errors.Is(rs[0].Err, ErrStaleRequest) {
		t.Fatalf("an unknown sentinel came back as %v, %v", rs[0].Err, err)
	}
}

func sampleResults(t testing.TB) []Result {
	rs := []Result{{Token: 9, Granted: true}, {Tokens: []uint64{1, 2}, Granted: true}, {N: 2}, {Queued: true}}
	for _, err := range tableErrors(t) {
		rs = append(rs, Result{Err: err})
	}
	return rs
}

func TestDecodeResultsRefusesDamage(t *testing.T) {
	b := AppendResults(nil, sampleResults(t))
	for n := range len(b) {
		if _, err := DecodeResults(b[:n]); err == nil {
			t.Errorf("results cut to %d of %d bytes decoded", n, len(b))
		}
	}
	for i := range b {
		damaged := append([]byte(nil), b...)
		damaged[i] ^= 0xff
		DecodeResults(damaged)
	}
	if _, err := DecodeResults(append(b, 0)); err == nil {
		t.Error("results with a byte after the last decoded")
	}
}

func FuzzDecodeResults(f *testing.F) {
	f.Add(AppendResults(nil, sampleResults(f)))
	f.Add([]byte{resultsVersion, 1, resultTokens, 0, 0, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := DecodeResults(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same.
		again, err := DecodeResults(AppendResults(nil, rs))
		if err != nil || len(again) != len(rs) {
			t.Fatalf("re-encoding %d decoded results: %d, %v", len(rs), len(again), err)
		}
		for i := range rs {
			if (rs[i].Err == nil) != (again[i].Err == nil) || rs[i].Err != nil && rs[i].Err.Error() != again[i].Err.Error() {
				t.Fatalf("result %d's error %v came back as %v", i, rs[i].Err, again[i].Err)
			}
		}
	})
}

// wireErrorNumbers is the number each error a result may carry goes on the
// wire with, between nodes that may run different versions: every number
// ever given, which no change may move.
var wireErrorNumbers = []struct {
	n   int
	err error
}{
	{1, locker.ErrNoSuchLock},
	{2, locker.ErrInUse},
	{3, locker.ErrInLockDelay},
	{4, locker.ErrLockDelayRange},
	{5, locker.ErrNoTTL},
	{6, locker.ErrTTLRange},
	{7, locker.ErrEmptyKey},
	{8, locker.ErrKeyTooLong},
	{9, locker.ErrOwnerTooLong},
	{10, locker.ErrLimitRange},
	{11, locker.ErrSharedSemaphore},
	{12, locker.ErrOwnerMode},
	{13, locker.ErrDuplicateKey},
	{14, locker.ErrTableFull},
	{15, locker.ErrClosed},
	{16, locker.ErrClockBeforeEpoch},
	{17, locker.ErrClockPastTokenRange},
	{18, locker.ErrTokenState},
	{19, ErrBadEntry},
	{20, ErrStaleRequest},
	{21, ErrWaiterExists},
	{22, locker.ErrQueueState},
}

// TestWireErrorNumbers pins the number of every error results carry, as
// encoded, and that every number given is pinned here: a new error's is
// added to wireErrorNumbers once, and never changes after.
func TestWireErrorNumbers(t *testing.T) {
	for _, tt := range wireErrorNumbers {
		b := appendError(nil, tt.err)
		if len(b) < 2 || b[0] != errSentinel || int(b[1]) != tt.n {
			t.Errorf("%v encodes as % x, want %d then number %d", tt.err, b[:min(len(b), 2)], errSentinel, tt.n)
		}
		if sentinelOf(tt.err) != tt.n {
			t.Errorf("%v is number %d, want %d", tt.err, sentinelOf(tt.err), tt.n)
		}
	}
	for n := len(wireErrorNumbers) + 1; n < len(wireErrors); n++ {
		t.Errorf("%v has number %d, which wireErrorNumbers does not pin: add it", wireErrors[n], n)
	}
}
