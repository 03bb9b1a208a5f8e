package locker

// timerWheel is a hierarchical timing wheel in the style of Kafka's
// TimingWheel and the classic Linux timer wheel: level l has 64 slots, each
// spanning 64^l ticks. A timer due in fewer than 64 ticks sits in level 0 at
// slot (due & 63); one due later sits in the first level whose span covers it,
// and is cascaded down a level when the wheel reaches the start of its slot.
// Scheduling and cancelling are O(1); advancing costs one slot check per tick
// plus the timers it moves or fires. Levels above 0 are made lazily, when a
// timer first needs them.
//
// Timers are named by uint32 ids (the lock table's entry indices) and linked
// into doubly linked lists through nodes that the owner keeps inside its own
// records (a lock's entry), so arming a timer touches no extra cache line and
// the wheel holds no pointers for the garbage collector to trace. Id 0 is the
// nil id. The wheel does not store due ticks either: the owner keeps each
// deadline and reports it when a timer cascades.
//
// The wheel is not safe for concurrent use: its shard's mutex guards it.
type timerWheel struct {
	nodes   wheelNodes
	levels  [][wheelSlots]uint32 // list heads
	counts  []int                // timers per level, to skip empty stretches
	now     int64                // last tick advanced to
	inTick  bool                 // tick now's cascades and firing are not all done yet (see advanceBudget)
	pending int                  // timers scheduled
}

const (
	wheelBits  = 6
	wheelSlots = 1 << wheelBits
	wheelMask  = wheelSlots - 1
)

// wheelNode links a timer into its slot's list; its zero value is "not
// scheduled".
type wheelNode struct {
	next, prev uint32
	slot       uint32 // level*wheelSlots + slot + 1; 0 when not scheduled
}

// wheelNodes is the owner's side of the wheel: it stores every timer's node
// and knows every timer's due tick.
type wheelNodes interface {
	wheelNode(id uint32) *wheelNode
	wheelDue(id uint32) int64
}

func newTimerWheel(now int64, nodes wheelNodes) timerWheel {
	return timerWheel{nodes: nodes, now: now, levels: make([][wheelSlots]uint32, 1), counts: make([]int, 1)}
}

// schedule (re)arms timer id to fire at tick due; a due tick already reached
// fires on the next advance.
func (w *timerWheel) schedule(id uint32, due int64) {
	w.cancel(id)
	w.place(id, max(due, w.now+1))
	w.pending++
}

// cancel disarms timer id; it is a no-op for a timer not scheduled.
func (w *timerWheel) cancel(id uint32) {
	n := w.nodes.wheelNode(id)
	if n.slot == 0 {
		return
	}
	w.unlink(id, n)
	w.pending--
}

// place links id into the slot that covers tick at (at > w.now, or == w.now
// while cascading, before the current level-0 slot is fired).
func (w *timerWheel) place(id uint32, at int64) {
	delta := uint64(at - w.now)
	level := 0
	for delta>>(wheelBits*(level+1)) != 0 {
		level++
	}
	for level >= len(w.levels) {
		w.levels = append(w.levels, [wheelSlots]uint32{})
		w.counts = append(w.counts, 0)
	}
	w.counts[level]++
	slot := int(at>>(wheelBits*level)) & wheelMask
	head := &w.levels[level][slot]
	n := w.nodes.wheelNode(id)
	n.slot = uint32(level*wheelSlots+slot) + 1
	n.prev = 0
	n.next = *head
	if *head != 0 {
		w.nodes.wheelNode(*head).prev = id
	}
	*head = id
}

func (w *timerWheel) unlink(id uint32, n *wheelNode) {
	s := n.slot - 1
	w.counts[s/wheelSlots]--
	if n.prev != 0 {
		w.nodes.wheelNode(n.prev).next = n.next
	} else {
		w.levels[s/wheelSlots][s%wheelSlots] = n.next
	}
	if n.next != 0 {
		w.nodes.wheelNode(n.next).prev = n.prev
	}
	n.slot, n.next, n.prev = 0, 0, 0
}

// advance moves the wheel to tick to, calling fire for each timer that comes
// due, in tick order. A fired timer is disarmed before fire runs, so fire may
// schedule it again.
func (w *timerWheel) advance(to int64, fire func(id uint32)) {
	w.advanceBudget(to, -1, fire)
}

// advanceBudget is advance with a budget: it stops after moving or firing
// budget timers (none if budget < 0) and reports whether it reached to. The
// owner may drop its lock between calls, and schedule or cancel timers
// meanwhile, as at any other time; the next call carries on where this one
// stopped. So a cascade that moves tens of thousands of timers, or a slot
// with as many due at once, is done in bounded steps rather than one long
// lock hold.
func (w *timerWheel) advanceBudget(to int64, budget int, fire func(id uint32)) (done bool) {
	for {
		if w.inTick && !w.finishTick(&budget, fire) {
			return false
		}
		if w.now >= to {
			return true
		}
		if w.pending == 0 {
			w.now = to
			return true
		}
		// With the lowest levels empty, nothing can happen before the next
		// tick at which the first non-empty level cascades: jump there.
		if low := w.lowestBusyLevel(); low > 0 {
			span := int64(1) << (wheelBits * low)
			if next := (w.now/span+1)*span - 1; next > w.now {
				w.now = min(next, to)
				continue
			}
		}
		w.now++
		w.inTick = true
	}
}

// finishTick does the work of tick w.now that is still to do, within budget:
// at the start of a level-l slot's span it moves that slot's timers down,
// and then it fires level 0's slot. It reports whether the tick is done.
func (w *timerWheel) finishTick(budget *int, fire func(id uint32)) bool {
	for l := 1; l < len(w.levels) && w.now&(1<<(wheelBits*l)-1) == 0; l++ {
		slot := int(w.now>>(wheelBits*l)) & wheelMask
		// No timer scheduled meanwhile lands in this slot: it covers ticks
		// from w.now on, which place puts in lower levels.
		for {
			id := w.levels[l][slot]
			if id == 0 {
				break
			}
			if *budget == 0 {
				return false
			}
			*budget--
			w.unlink(id, w.nodes.wheelNode(id))
			w.place(id, max(w.nodes.wheelDue(id), w.now))
		}
	}
	// Re-read the slot's head every time: fire may schedule a timer that
	// needs a new level, and growing w.levels moves the array.
	for {
		id := w.levels[0][w.now&wheelMask]
		if id == 0 {
			break
		}
		if *budget == 0 {
			return false
		}
		*budget--
		w.unlink(id, w.nodes.wheelNode(id))
		w.pending--
		fire(id)
	}
	w.inTick = false
	return true
}

func (w *timerWheel) lowestBusyLevel() int {
	for l, c := range w.counts {
		if c > 0 {
			return l
		}
	}
	return len(w.counts)
}
