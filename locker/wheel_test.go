package locker

import (
	"math/rand/v2"
	"testing"
)

// testNodes keeps wheel nodes and due ticks in maps, for testing the wheel
// alone.
type testNodes struct {
	nodes map[uint32]*wheelNode
	due   map[uint32]int64
}

func newTestNodes() *testNodes {
	return &testNodes{nodes: map[uint32]*wheelNode{}, due: map[uint32]int64{}}
}

func (t *testNodes) wheelNode(id uint32) *wheelNode {
	if t.nodes[id] == nil {
		t.nodes[id] = &wheelNode{}
	}
	return t.nodes[id]
}

func (t *testNodes) wheelDue(id uint32) int64 { return t.due[id] }

// TestWheelFiresAtDueTick schedules, reschedules and cancels timers at random
// distances spanning several levels and checks that each fires exactly once,
// at the first tick at or after its due tick, and cancelled ones never. Half
// the advances run on a small budget, so that schedules and cancels land
// between the steps of a cascade or of a slot's firing.
func TestWheelFiresAtDueTick(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		rng := rand.New(rand.NewPCG(seed, seed))
		start := rng.Int64N(1 << 30)
		nodes := newTestNodes()
		w := newTimerWheel(start, nodes)
		want := map[uint32]int64{} // id -> tick it must fire at
		const ids = 2000
		target := w.now // where budgeted advances are headed
		for step := 0; step < 40000; step++ {
			id := uint32(rng.IntN(ids)) + 1
			switch rng.IntN(4) {
			case 0, 1:
				// Distances up to 64^3 ticks exercise three levels and cascades.
				due := w.now + rng.Int64N(1<<18) - 10
				w.schedule(id, due)
				nodes.due[id] = due
				want[id] = max(due, w.now+1)
			case 2:
				w.cancel(id)
				delete(want, id)
			case 3:
				if target <= w.now {
					target = w.now + rng.Int64N(1<<12)
				}
				budget := -1
				if rng.IntN(2) == 0 {
					budget = 1 + rng.IntN(16)
				}
				done := w.advanceBudget(target, budget, func(id uint32) {
					due, ok := want[id]
					if !ok {
						t.Fatalf("seed %d: timer %d fired but was not scheduled", seed, id)
					}
					if due != w.now {
						t.Fatalf("seed %d: timer %d fired at %d, due %d", seed, id, w.now, due)
					}
					delete(want, id)
				})
				if !done {
					continue
				}
				if w.now != target {
					t.Fatalf("seed %d: advance done at %d, asked for %d", seed, w.now, target)
				}
				for id, due := range want {
					if due <= w.now {
						t.Fatalf("seed %d: timer %d due %d not fired by %d", seed, id, due, w.now)
					}
				}
			}
			if w.pending != len(want) {
				t.Fatalf("seed %d: pending %d, want %d", seed, w.pending, len(want))
			}
		}
		w.advance(w.now+1<<19, func(id uint32) { delete(want, id) })
		if len(want) != 0 || w.pending != 0 {
			t.Fatalf("seed %d: %d timers never fired", seed, len(want))
		}
	}
}

// TestWheelBudgetBoundsCascade puts 10,000 timers in one level-1 slot and
// checks that a budgeted advance moves or fires no more than its budget per
// call, still fires every timer at its due tick, and reports done only at
// the end.
func TestWheelBudgetBoundsCascade(t *testing.T) {
	nodes := newTestNodes()
	w := newTimerWheel(0, nodes)
	const n, budget = 10000, 100
	for id := uint32(1); id <= n; id++ {
		due := int64(128 + id%64) // all in the level-1 slot covering 128..191
		nodes.due[id] = due
		w.schedule(id, due)
	}
	fired, calls := 0, 0
	for done := false; !done; calls++ {
		if calls > 2*n/budget+200 {
			t.Fatalf("no end after %d calls", calls)
		}
		inCall := 0
		done = w.advanceBudget(1000, budget, func(id uint32) {
			inCall++
			if w.now != nodes.due[id] {
				t.Fatalf("timer %d fired at %d, due %d", id, w.now, nodes.due[id])
			}
		})
		if inCall > budget {
			t.Fatalf("one call fired %d timers; budget %d", inCall, budget)
		}
		fired += inCall
	}
	if fired != n || w.pending != 0 {
		t.Fatalf("fired %d of %d, %d pending", fired, n, w.pending)
	}
	// Moving 10,000 timers down a level and firing them takes at least 200
	// steps of 100.
	if calls < 2*n/budget {
		t.Fatalf("done in %d calls; a budget of %d needs at least %d", calls, budget, 2*n/budget)
	}
}

func TestWheelFarFutureAddsLevels(t *testing.T) {
	nodes := newTestNodes()
	w := newTimerWheel(0, nodes)
	due := int64(1) << 40
	w.schedule(7, due)
	nodes.due[7] = due
	if len(w.levels) < 7 {
		t.Fatalf("levels %d; a timer 2^40 ticks away needs 7", len(w.levels))
	}
	fired := int64(-1)
	w.advance(due-1, func(uint32) { fired = w.now })
	if fired != -1 {
		t.Fatalf("fired early at %d", fired)
	}
	w.advance(due, func(uint32) { fired = w.now })
	if fired != due {
		t.Fatalf("fired at %d, want %d", fired, due)
	}
}

func TestWheelFireMayReschedule(t *testing.T) {
	nodes := newTestNodes()
	w := newTimerWheel(0, nodes)
	w.schedule(1, 5)
	fires := 0
	w.advance(100, func(id uint32) {
		fires++
		if fires < 3 {
			nodes.due[id] = w.now + 10
			w.schedule(id, nodes.due[id])
		}
	})
	if fires != 3 || w.pending != 0 {
		t.Fatalf("fires %d pending %d", fires, w.pending)
	}
}

func TestArenaReusesSlots(t *testing.T) {
	var a arena
	refs := map[uint32]string{}
	for _, s := range []string{"a", "sixteen-bytes-xx", "seventeen-bytes-x", string(make([]byte, 65535))} {
		ref := a.put([]byte(s))
		refs[ref] = s
	}
	for ref, s := range refs {
		if got := string(a.get(ref, len(s))); got != s {
			t.Fatalf("get %d = %q, want %q", ref, got, s)
		}
	}
	r := a.put([]byte("tmp"))
	a.release(r, 3)
	if again := a.put([]byte("two")); again != r {
		t.Fatalf("freed slot %d not reused (got %d)", r, again)
	}
	if classOf(16) != 0 || classOf(17) != 1 || classOf(65536) != arenaClassCount-1 {
		t.Fatal("size classes off")
	}
}
