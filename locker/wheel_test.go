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
// at the first tick at or after its due tick, and cancelled ones never.
func TestWheelFiresAtDueTick(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		rng := rand.New(rand.NewPCG(seed, seed))
		start := rng.Int64N(1 << 30)
		nodes := newTestNodes()
		w := newTimerWheel(start, nodes)
		want := map[uint32]int64{} // id -> tick it must fire at
		const ids = 2000
		for step := 0; step < 20000; step++ {
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
				to := w.now + rng.Int64N(1<<12)
				w.advance(to, func(id uint32) {
					due, ok := want[id]
					if !ok {
						t.Fatalf("seed %d: timer %d fired but was not scheduled", seed, id)
					}
					if due != w.now {
						t.Fatalf("seed %d: timer %d fired at %d, due %d", seed, id, w.now, due)
					}
					delete(want, id)
				})
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
