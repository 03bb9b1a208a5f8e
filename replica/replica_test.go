package replica

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
	"github.com/rs/zerolog"
)

// decodeResults turns the combiner's answer into Propose's: the engine's
// errors into the wire's TRYAGAIN (nothing was applied) or UNCERTAIN, the
// state machine's refusal into itself, and results into one per command.
func TestDecodeResults(t *testing.T) {
	r := &Replica{log: zerolog.Nop()}
	two := []lockfsm.Result{{Granted: true, Token: 7}, {}}
	for _, tc := range []struct {
		name    string
		out     any
		err     error
		n       int
		want    []lockfsm.Result
		wantErr error
	}{
		{"results", two, nil, 2, two, nil},
		{"not applied", nil, fmt.Errorf("wrapped: %w", cluster.ErrNotApplied), 2, nil, protocol.ErrTryAgain},
		{"combiner stopped", nil, lockfsm.ErrCombinerStopped, 2, nil, protocol.ErrTryAgain},
		{"outcome unknown", nil, errors.New("timed out waiting for the apply"), 2, nil, protocol.ErrUncertain},
		{"refused by the state machine", locker.ErrNoSuchLock, nil, 2, nil, locker.ErrNoSuchLock},
		{"too few results", two[:1], nil, 2, nil, errAny},
		{"no results", nil, nil, 1, nil, errAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := r.decodeResults(tc.out, tc.err, tc.n)
			switch {
			case tc.wantErr == errAny && err == nil:
				t.Fatalf("decodeResults = %v, nil; want an error", res)
			case tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Fatalf("decodeResults error = %v, want %v", err, tc.wantErr)
			case tc.wantErr == nil && fmt.Sprint(res) != fmt.Sprint(tc.want):
				t.Fatalf("decodeResults = %v, want %v", res, tc.want)
			}
		})
	}
}

// errAny stands for any error in TestDecodeResults.
var errAny = errors.New("any error")

// A wait's hand-off reaches the waiter registered under its name once, and
// nothing reaches one that forgot its wait, or another node's waiter.
func TestAwaitHandsOffOnce(t *testing.T) {
	r := &Replica{}
	var got [][]uint64
	forget := r.Await([]byte("w1"), func(tokens []uint64) { got = append(got, tokens) })
	defer forget()
	forgotten := r.Await([]byte("w2"), func([]uint64) { t.Error("a forgotten wait was handed a lease") })
	forgotten()
	r.waiters.granted([]byte("elsewhere"), nil, []uint64{1})
	r.waiters.granted([]byte("w2"), nil, []uint64{2})
	r.waiters.granted([]byte("w1"), nil, []uint64{3})
	r.waiters.granted([]byte("w1"), nil, []uint64{4})
	if fmt.Sprint(got) != "[[3]]" {
		t.Fatalf("w1 was handed %v, want [[3]] once", got)
	}
}
