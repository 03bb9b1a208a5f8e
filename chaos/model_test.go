//go:build linux

package chaos

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Synthetic histories, times in milliseconds.

func ms(t int64) int64 { return t * int64(time.Millisecond) }

func acq(c int, owner string, ttl, call, ret int64, token uint64) Op {
	return Op{Client: c, Kind: Acquire, Key: "k", Owner: owner, TTL: time.Duration(ms(ttl)), Call: ms(call), Return: ms(ret), Result: token}
}

func shared(o Op) Op       { o.Shared = true; return o }
func limit(o Op, n int) Op { o.Limit = n; o.Created = true; return o }

func unknown(o Op) Op { o.Unknown, o.Return, o.Result = true, Never, 0; return o }

func tok(c int, k Kind, token uint64, call, ret int64, ok bool) Op {
	return Op{Client: c, Kind: k, Key: "k", Token: token, Call: ms(call), Return: ms(ret), OK: ok}
}

func ext(c int, token uint64, ttl, call, ret int64, ok bool) Op {
	o := tok(c, Extend, token, call, ret, ok)
	o.TTL = time.Duration(ms(ttl))
	return o
}

func status(c int, last uint64, call, ret int64) Op {
	return Op{Client: c, Kind: Status, Key: "k", Created: true, Call: ms(call), Return: ms(ret), Result: last}
}

func TestCheckers(t *testing.T) {
	late := Lateness{Base: 50 * time.Millisecond}
	tests := []struct {
		name string
		ops  []Op
		// want: the checkers that must fire, besides porcupine's model; none:
		// the history is correct and nothing may fire.
		want []string
	}{
		{"grant release grant", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Release, 10, 100, 101, true), acq(1, "b", 1000, 200, 201, 11),
		}, nil},
		{"grant after expiry", []Op{
			acq(0, "a", 1000, 0, 1, 10), acq(1, "b", 1000, 1001, 1002, 11), tok(0, Verify, 10, 1003, 1004, false),
		}, nil},
		{"expiry measured from the call: a grant at call+ttl is fine", []Op{
			acq(0, "a", 1000, 0, 300, 10), acq(1, "b", 1000, 999, 1000, 11),
		}, nil},
		{"grant while the holder's lease is live", []Op{
			acq(0, "a", 1000, 0, 1, 10), acq(1, "b", 1000, 500, 501, 11),
		}, []string{CheckExclusion}},
		{"grant a millisecond before the holder's deadline", []Op{
			acq(0, "a", 1000, 0, 1, 10), acq(1, "b", 1000, 997, 998, 11),
		}, []string{CheckExclusion}},
		{"lower token after a release", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Release, 10, 10, 11, true), acq(1, "b", 1000, 20, 21, 9),
		}, []string{CheckTokenOrder}},
		{"the same token twice", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Release, 10, 10, 11, true), acq(1, "b", 1000, 20, 21, 10),
		}, []string{CheckTokenOrder}},
		{"acknowledged grant lost", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Verify, 10, 100, 101, false),
		}, []string{CheckLostAck}},
		{"acknowledged extend lost", []Op{
			acq(0, "a", 1000, 0, 1, 10), ext(0, 10, 5000, 100, 101, true), tok(0, Verify, 10, 2000, 2001, false),
		}, []string{CheckLostAck}},
		{"acknowledged release lost", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Release, 10, 100, 101, true), tok(0, Verify, 10, 200, 201, true),
		}, []string{CheckLostAck}},
		{"live long past its deadline", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Verify, 10, 1200, 1201, true),
		}, []string{CheckLostAck}},
		{"live within the late slack", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Verify, 10, 1020, 1021, true),
		}, nil},
		{"extend moves the deadline", []Op{
			acq(0, "a", 1000, 0, 1, 10), ext(0, 10, 5000, 100, 101, true), acq(1, "b", 1000, 1500, 1501, 11),
		}, []string{CheckExclusion}},
		{"extend may shorten", []Op{
			acq(0, "a", 5000, 0, 1, 10), ext(0, 10, 100, 100, 101, true), acq(1, "b", 1000, 300, 301, 11),
		}, nil},
		{"unknown extend may not have happened", []Op{
			acq(0, "a", 1000, 0, 1, 10), unknown(ext(0, 10, 5000, 100, 0, false)), acq(1, "b", 1000, 1500, 1501, 11),
		}, nil},
		{"unknown extend may have shortened", []Op{
			acq(0, "a", 5000, 0, 1, 10), unknown(ext(0, 10, 100, 100, 0, false)), acq(1, "b", 1000, 300, 301, 11),
		}, nil},
		{"unknown release may have happened", []Op{
			acq(0, "a", 1000, 0, 1, 10), unknown(tok(0, Release, 10, 100, 0, false)), acq(1, "b", 1000, 200, 201, 11),
		}, nil},
		{"unknown acquire holds the lock in some branch", []Op{
			unknown(acq(0, "a", 1000, 0, 0, 0)), acq(1, "b", 1000, 100, 101, 0), acq(2, "c", 1000, 200, 201, 12),
			acq(3, "d", 1000, 300, 301, 0),
		}, nil},
		{"unknown acquire, then the owner's retry gets its token", []Op{
			unknown(acq(0, "a", 1000, 0, 0, 0)), acq(0, "a", 1000, 100, 101, 12), acq(1, "b", 1000, 500, 501, 0),
			tok(0, Verify, 12, 600, 601, true),
		}, nil},
		{"semaphore: an unknown acquire granted early, then the owner's retry gets its token after a higher one", []Op{
			limit(unknown(acq(0, "a", 1000, 0, 0, 0)), 2), limit(acq(1, "b", 1000, 100, 101, 15), 2),
			limit(acq(0, "a", 1000, 200, 201, 12), 2),
		}, nil},
		{"a retry's lower token is excused only for the owner of the unknown acquire", []Op{
			limit(unknown(acq(0, "a", 1000, 0, 0, 0)), 2), limit(acq(1, "b", 1000, 100, 101, 15), 2),
			limit(acq(2, "c", 1000, 200, 201, 12), 2),
		}, []string{CheckTokenOrder}},
		{"unknown acquire does not excuse a lower token", []Op{
			acq(0, "a", 1000, 0, 1, 10), unknown(acq(1, "b", 1000, 10, 0, 0)), tok(0, Release, 10, 20, 21, true),
			acq(2, "c", 1000, 30, 31, 8),
		}, []string{CheckTokenOrder}},
		{"owner re-entry gets the same token", []Op{
			acq(0, "a", 1000, 0, 1, 10), acq(0, "a", 1000, 100, 101, 10), tok(0, Verify, 10, 1050, 1051, true),
		}, nil},
		{"readers share", []Op{
			shared(acq(0, "a", 1000, 0, 1, 10)), shared(acq(1, "b", 1000, 10, 11, 11)), acq(2, "c", 1000, 1100, 1101, 12),
		}, nil},
		{"a writer while readers hold", []Op{
			shared(acq(0, "a", 1000, 0, 1, 10)), shared(acq(1, "b", 1000, 10, 11, 11)), acq(2, "c", 1000, 100, 101, 12),
		}, []string{CheckExclusion}},
		{"a reader while a writer holds", []Op{
			acq(0, "a", 1000, 0, 1, 10), shared(acq(1, "b", 1000, 10, 11, 11)),
		}, []string{CheckExclusion}},
		{"semaphore within its limit", []Op{
			limit(acq(0, "a", 1000, 0, 1, 10), 2), limit(acq(1, "b", 1000, 10, 11, 11), 2),
			limit(acq(2, "c", 1000, 20, 21, 0), 2), limit(acq(2, "c", 1000, 1005, 1006, 12), 2),
		}, nil},
		{"semaphore over its limit", []Op{
			limit(acq(0, "a", 1000, 0, 1, 10), 2), limit(acq(1, "b", 1000, 10, 11, 11), 2),
			limit(acq(2, "c", 1000, 20, 21, 12), 2),
		}, []string{CheckExclusion}},
		{"a WAIT grant inside its window", []Op{
			acq(0, "a", 500, 0, 1, 10), acq(1, "b", 1000, 0, 900, 11),
		}, nil},
		{"last-token follows grants", []Op{
			acq(0, "a", 1000, 0, 1, 10), status(1, 10, 10, 11), tok(0, Release, 10, 20, 21, true),
			acq(1, "b", 1000, 30, 31, 11), status(1, 11, 40, 41),
		}, nil},
		{"a retry gets the token STATUS saw granted to its lost request", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Release, 10, 2, 3, true),
			unknown(acq(1, "b", 1000, 10, 0, 0)), status(2, 11, 20, 21), acq(1, "b", 1000, 30, 31, 11),
		}, nil},
		{"a new lease with the token STATUS saw", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Release, 10, 2, 3, true),
			unknown(acq(1, "b", 1000, 10, 0, 0)), status(2, 11, 20, 21), acq(3, "c", 1000, 30, 31, 11),
		}, []string{CheckMaxToken}},
		{"last-token above every token seen granted (a waiter's hand-off spent one)", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Release, 10, 2, 3, true), status(1, 12, 10, 11),
			acq(1, "b", 1000, 20, 21, 13),
		}, nil},
		{"a token at or below a last-token read before", []Op{
			acq(0, "a", 1000, 0, 1, 10), tok(0, Release, 10, 2, 3, true), status(1, 12, 10, 11),
			acq(1, "b", 1000, 20, 21, 12),
		}, []string{CheckMaxToken}},
		{"a permit freed under its OWNER's retry (chaos finding 1)", []Op{
			limit(unknown(acq(0, "c0", 978, 0, 0, 0)), 2), limit(acq(0, "c0", 978, 3200, 3400, 13), 2),
			limit(acq(1, "c3", 606, 3390, 3402, 14), 2), limit(acq(2, "c4", 366, 3410, 3422, 15), 2),
			tok(0, Verify, 13, 3456, 3457, false),
		}, []string{CheckExclusion, CheckLostAck}},
		{"last-token goes back", []Op{
			acq(0, "a", 1000, 0, 1, 10), status(1, 10, 10, 11), tok(0, Release, 10, 20, 21, true),
			acq(1, "b", 1000, 30, 31, 11), status(1, 10, 40, 41),
		}, []string{CheckMaxToken}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.ops {
				if tc.ops[i].Unknown {
					tc.ops[i].Return = Never
				}
			}
			sort.SliceStable(tc.ops, func(i, j int) bool { return tc.ops[i].Call < tc.ops[j].Call })
			res := Linearizable(tc.ops, late, 10*time.Second)
			if len(res) != 1 {
				t.Fatalf("%d keys checked, want 1", len(res))
			}
			wantLin := porcupine.Ok
			if len(tc.want) > 0 {
				wantLin = porcupine.Illegal
			}
			if res[0].Result != wantLin {
				t.Errorf("porcupine: %s, want %s", res[0].Result, wantLin)
			}
			fired := map[string]bool{}
			var msgs []string
			for _, v := range Check(tc.ops, late) {
				fired[v.Check] = true
				msgs = append(msgs, v.String())
			}
			for _, c := range tc.want {
				if !fired[c] {
					t.Errorf("checker %s did not fire", c)
				}
			}
			if len(tc.want) == 0 && len(msgs) > 0 {
				t.Errorf("violations in a correct history:\n%s", strings.Join(msgs, "\n"))
			}
		})
	}
}

// TestUncertainRenewalBound: an EXTEND or OWNER re-entry of unknown outcome
// may have set the lease's deadline to its apply time plus its ttl, and no
// earlier than that: it excuses an early end only if its ttl is short enough.
func TestUncertainRenewalBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []Op
		fire bool
	}{
		{"a re-entry with a short ttl may end the lease early", []Op{
			acq(0, "a", 1000, 0, 1, 10), unknown(acq(0, "a", 100, 50, 0, 0)), tok(1, Verify, 10, 300, 301, false),
		}, false},
		{"an EXTEND with a short ttl may end the lease early", []Op{
			acq(0, "a", 1000, 0, 1, 10), unknown(ext(0, 10, 100, 50, 0, false)), tok(1, Verify, 10, 300, 301, false),
		}, false},
		{"a re-entry sent before the renewal that set the deadline cannot end it before its ttl", []Op{
			unknown(acq(0, "a", 1000, 0, 0, 0)), acq(0, "a", 1000, 500, 501, 10), tok(1, Verify, 10, 900, 901, false),
		}, true},
		{"a long EXTEND cannot end the lease early", []Op{
			acq(0, "a", 1000, 0, 1, 10), unknown(ext(0, 10, 2000, 50, 0, false)), tok(1, Verify, 10, 900, 901, false),
		}, true},
	} {
		fired := false
		for _, v := range Check(tc.ops, Lateness{Base: 50 * time.Millisecond}) {
			fired = fired || v.Check == CheckLostAck
		}
		if fired != tc.fire {
			t.Errorf("%s: lost-ack fired %v, want %v", tc.name, fired, tc.fire)
		}
	}
}

func TestCombinations(t *testing.T) {
	if got := len(combinations([]int{0, 1, 2, 3}, 2)); got != 6 {
		t.Errorf("4 choose 2 = %d", got)
	}
	if got := combinations([]int{0, 1}, 0); len(got) != 1 || got[0] != nil {
		t.Errorf("choose 0 = %v", got)
	}
	if got := combinations([]int{0}, 2); got != nil {
		t.Errorf("1 choose 2 = %v", got)
	}
}

// TestLatenessThroughOutages: an outage lets a lease be reported live later,
// never lets it end earlier.
func TestLatenessThroughOutages(t *testing.T) {
	late := Lateness{Base: 50 * time.Millisecond, Outages: [][2]int64{{ms(500), ms(2500)}}}
	if got, want := late.latest(ms(1), time.Second), ms(1+1000+50+2000); got != want {
		t.Errorf("latest = %v, want %v", time.Duration(got), time.Duration(want))
	}
	lateOK := []Op{acq(0, "a", 1000, 0, 1, 10), tok(0, Verify, 10, 2900, 2901, true)}
	early := []Op{acq(0, "a", 1000, 0, 1, 10), acq(1, "b", 1000, 600, 601, 11)}
	for _, tc := range []struct {
		name string
		ops  []Op
		ok   bool
	}{{"live late through the outage", lateOK, true}, {"granted early during the outage", early, false}} {
		res := Linearizable(tc.ops, late, 10*time.Second)[0].Result
		vs := Check(tc.ops, late)
		if (res == porcupine.Ok) != tc.ok || (len(vs) == 0) != tc.ok {
			t.Errorf("%s: porcupine %s, %d violations", tc.name, res, len(vs))
		}
	}
	if vs := Check(lateOK, Lateness{Base: 50 * time.Millisecond}); len(vs) == 0 {
		t.Error("without the outage, a lease live 1.9s late passed")
	}
}

func TestUnobservedDropped(t *testing.T) {
	base := []Op{acq(0, "a", 1000, 0, 1, 10), tok(0, Release, 10, 2, 3, true)}
	lost := unknown(acq(1, "b", 1000, 10, 0, 0))
	tests := []struct {
		name string
		more []Op
		kept bool
	}{
		{"nothing saw it", []Op{status(2, 10, 20, 21)}, false},
		{"STATUS read a token no grant returned", []Op{status(2, 11, 20, 21)}, false},
		{"its OWNER's retry got a token", []Op{acq(1, "b", 1000, 20, 21, 11)}, true},
		{"its OWNER got a token before", []Op{acq(1, "b", 1000, 5, 6, 11)}, false},
	}
	for _, tc := range tests {
		ops := append(append(append([]Op{}, base...), lost), tc.more...)
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
		kept := false
		for _, o := range unobservedDropped(ops) {
			kept = kept || o.Unknown
		}
		if kept != tc.kept {
			t.Errorf("%s: kept = %v, want %v", tc.name, kept, tc.kept)
		}
	}
}
