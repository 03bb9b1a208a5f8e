package cmdstats

import (
	"fmt"
	"testing"
)

// BenchmarkCommandCounters measures counting a command as dispatch and
// flush do, in rounds of 1 and of 64 commands, two distinct commands
// alternating (ACQUIRE and RELEASE), against counting nothing. The block is
// added to with atomic adds once per round and entry.
func BenchmarkCommandCounters(b *testing.B) {
	for _, round := range []int{1, 64} {
		for _, count := range []bool{false, true} {
			name := fmt.Sprintf("round=%d/none", round)
			if count {
				name = fmt.Sprintf("round=%d/tally", round)
			}
			b.Run(name, func(b *testing.B) {
				block := NewBlock()
				var t Tally
				left := round
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if count {
						t.Record(block, 2+i&1, OK, int64(1500+i&511))
						if left--; left == 0 {
							t.Flush(block)
							left = round
						}
					}
				}
			})
		}
	}
}

// TestTallySums: a tally fuller than its entries flushes as it goes, and
// the sums count every command under its outcome, a rejected one without
// its time, a name not in the table under Unknown.
func TestTallySums(t *testing.T) {
	cs := New()
	b := cs.Stripe(7)
	var tally Tally
	for i := range 20 { // more distinct entries than a tally holds
		tally.Record(b, i%10, OK, int64(1000*(i+1)))
	}
	tally.Record(b, 0, Failed, 5000)
	tally.Record(b, 0, Rejected, 9999)
	tally.Record(b, -1, Rejected, 1)
	tally.Flush(b)
	b.NetIn.Add(3)
	cs.LoopBlock().NetOut.Add(4)
	got := map[string][3]uint64{}
	for _, st := range cs.Commands() {
		got[st.Name] = [3]uint64{st.OK, st.Failed, st.Rejected}
	}
	if len(got) != 11 {
		t.Fatalf("%d commands counted, want 11: %v", len(got), got)
	}
	first := cs.Commands()[0]
	if want := [3]uint64{2, 1, 1}; got[first.Name] != want || first.Calls != 3 {
		t.Errorf("%s: %v, %d calls; want %v, 3 calls", first.Name, got[first.Name], first.Calls, want)
	}
	if got[Unknown] != [3]uint64{0, 0, 1} {
		t.Errorf("unknown: %v", got[Unknown])
	}
	if in, out := cs.NetBytes(); in != 3 || out != 4 {
		t.Errorf("NetBytes = %d, %d; want 3, 4", in, out)
	}
}
