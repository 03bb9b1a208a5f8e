package locker

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingSink counts the events published, so that the batches' unlocks
// have events to publish.
type countingSink struct{ n atomic.Int64 }

func (c *countingSink) Active() bool  { return true }
func (c *countingSink) Publish(Event) { c.n.Add(1) }

// reaperModel is what the table must say about each key, worked out from
// the leases it granted and the clock alone.
type reaperModel struct {
	keys     []*modelKey
	defDelay int64
}

type modelKey struct {
	name    []byte
	created bool
	delay   int64 // the lock's own lock-delay when created with one; else -1
	limit   int
	leases  map[uint64]*modelLease
	// exclDelay is the end of an exclusive lease's lock-delay (0: none);
	// holderDelays are the ends of the delayed holders (readers, permits).
	exclDelay    int64
	holderDelays []int64
}

type modelLease struct {
	deadline int64
	holder   bool // in the holder set: a reader or a semaphore's permit
}

func (k *modelKey) lockDelay(def int64) int64 {
	if k.delay >= 0 {
		return k.delay
	}
	return def
}

// settle expires k's leases due by now, into their lock-delays, and ends
// the lock-delays that are over, as the table's settle does.
func (m *reaperModel) settle(k *modelKey, now int64) {
	d := k.lockDelay(m.defDelay)
	for tok, l := range k.leases {
		if l.deadline > now {
			continue
		}
		delete(k.leases, tok)
		if d > 0 {
			if l.holder {
				k.holderDelays = append(k.holderDelays, l.deadline+d)
			} else {
				k.exclDelay = l.deadline + d
			}
		}
	}
	if k.exclDelay <= now {
		k.exclDelay = 0
	}
	k.holderDelays = slices.DeleteFunc(k.holderDelays, func(end int64) bool { return end <= now })
}

func (k *modelKey) busy() bool {
	return len(k.leases) > 0 || k.exclDelay != 0 || len(k.holderDelays) > 0
}

// grantable: what Acquire (shared or not) must answer, with no one queued.
func (k *modelKey) grantable(shared bool) bool {
	if k.limit > 0 {
		return len(k.leases)+len(k.holderDelays) < k.limit
	}
	if k.exclDelay != 0 {
		return false
	}
	for _, l := range k.leases {
		if !l.holder || !shared {
			return false
		}
	}
	return shared || len(k.holderDelays) == 0
}

// checkReaped checks, after the reaper has reached tick to, that no lease
// or lock-delay due by then is left, and that the wheel's books balance.
func checkReaped(t *testing.T, s *shard, to int64, step int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	limit := to * s.tick
	armed, held := 0, 0
	for i := uint32(1); i < s.top; i++ {
		e := s.at(i)
		if e.flags&flagLive == 0 {
			if e.timer.slot != 0 {
				t.Fatalf("step %d: free entry %d has an armed timer", step, i)
			}
			continue
		}
		busy := e.flags&(flagHeld|flagDelayed|flagMulti) != 0
		if busy != (e.timer.slot != 0) {
			t.Fatalf("step %d: entry %q flags %b but timer armed=%v", step, s.key(e), e.flags, e.timer.slot != 0)
		}
		if e.timer.slot != 0 {
			armed++
		}
		if e.flags&(flagHeld|flagDelayed) != 0 && e.deadline <= limit {
			t.Fatalf("step %d: reaper reached tick %d but %q (flags %b) still has deadline %d <= %d", step, to, s.key(e), e.flags, e.deadline, limit)
		}
		if e.flags&flagHeld != 0 {
			held++
		}
		if hs := s.holders(i); hs != nil {
			for _, h := range hs.items {
				if h.deadline <= limit {
					t.Fatalf("step %d: reaper reached tick %d but a holder of %q (delayed %v) has deadline %d <= %d", step, to, s.key(e), h.delayed, h.deadline, limit)
				}
			}
			held += hs.live
		}
	}
	sum := 0
	for _, c := range s.wheel.counts {
		sum += c
	}
	if armed != s.wheel.pending || sum != s.wheel.pending {
		t.Fatalf("step %d: %d timers armed, wheel pending %d, level counts sum %d", step, armed, s.wheel.pending, sum)
	}
	if got := int(s.counts.held.Load()); got != held {
		t.Fatalf("step %d: held count %d, entries hold %d", step, got, held)
	}
}

// TestBatchedReaperAgainstModel interleaves commands (exclusive, shared and
// semaphore leases, extends, releases, creates with their own lock-delays,
// mass grants that fill a wheel slot) with a reaper that works in
// expireBatch steps and keeps the now it read at its start while the clock
// moves on between its batches, as ExpireDue does. Every answer is checked
// against a model: a lease is live exactly until its deadline, a lock-delay
// keeps its lock exactly until it ends, and once the reaper is done no lease
// or lock-delay due by its tick is left in the table.
func TestBatchedReaperAgainstModel(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} { // one per default lock-delay
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { runReaperModel(t, seed) })
	}
}

func runReaperModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	const tick = 10 * time.Millisecond
	defDelay := []time.Duration{0, 25 * time.Millisecond, 640 * time.Millisecond}[seed%3]
	tb, clock := newTestTable(t, func(c *Config) {
		c.Shards = 1
		c.Tick = tick
		c.LockDelay = defDelay
	})
	s := tb.shards[0]
	m := &reaperModel{defDelay: int64(defDelay)}
	const nkeys = 1200
	for i := range nkeys {
		m.keys = append(m.keys, &modelKey{name: []byte("key:" + strconv.Itoa(i)), delay: -1, leases: map[uint64]*modelLease{}})
	}
	ttl := func() time.Duration {
		ticks := []int64{1, 2, 3, 5, 63, 64, 65, 100, 200, 4095, 4096, 4097, 5000}[rng.IntN(13)]
		off := []time.Duration{0, 1, tick / 2, -1}[rng.IntN(4)]
		return max(time.Duration(ticks)*tick+off, 1)
	}
	now := func() int64 { return int64(clock.Now()) }
	var grants, denials int

	acquire := func(k *modelKey, d time.Duration, shared bool, step int) {
		m.settle(k, now())
		want := k.grantable(shared)
		var tok uint64
		var ok bool
		var err error
		if shared {
			tok, ok, err = tb.Acquire(&Request{Key: k.name, TTL: d, Mode: Shared})
		} else {
			tok, ok, err = tb.Acquire(&Request{Key: k.name, TTL: d})
		}
		if err != nil {
			t.Fatalf("step %d: acquire %q: %v", step, k.name, err)
		}
		if ok != want {
			t.Fatalf("step %d: acquire %q shared=%v at %d: granted %v, model says %v (leases %d, excl delay %d, holder delays %v)",
				step, k.name, shared, now(), ok, want, len(k.leases), k.exclDelay, k.holderDelays)
		}
		if ok {
			grants++
			k.leases[tok] = &modelLease{deadline: now() + int64(d), holder: shared || k.limit > 0}
		} else {
			denials++
		}
	}
	anyLease := func(k *modelKey) (uint64, *modelLease) { // deterministic, so a seed replays
		if len(k.leases) == 0 {
			return 0, nil
		}
		toks := slices.Sorted(maps.Keys(k.leases))
		tok := toks[rng.IntN(len(toks))]
		return tok, k.leases[tok]
	}

	var reaping bool
	var reapNow int64
	var partial, midTick, midCascade, passes int
	for step := 0; step < 12000; step++ {
		k := m.keys[rng.IntN(nkeys)]
		switch r := rng.IntN(100); {
		case r < 30:
			acquire(k, ttl(), k.limit == 0 && rng.IntN(3) == 0, step)
		case r < 33: // a burst of grants due together: more than a batch in one slot
			d := ttl()
			for range expireBatch + rng.IntN(expireBatch) {
				k := m.keys[rng.IntN(nkeys)]
				acquire(k, d, k.limit == 0 && rng.IntN(4) == 0, step)
			}
		case r < 43:
			m.settle(k, now())
			tok, l := anyLease(k)
			if l == nil {
				tok = uint64(rng.IntN(1 << 20))
			}
			d := ttl()
			ok, err := tb.Extend(k.name, tok, d)
			if err != nil || ok != (l != nil) {
				t.Fatalf("step %d: extend %q token %d: %v, %v; model has it %v", step, k.name, tok, ok, err, l != nil)
			}
			if ok {
				l.deadline = now() + int64(d)
			}
		case r < 50:
			m.settle(k, now())
			tok, l := anyLease(k)
			if l == nil {
				continue
			}
			if !tb.Release(k.name, tok) {
				t.Fatalf("step %d: release of live lease %q %d failed", step, k.name, tok)
			}
			delete(k.leases, tok)
		case r < 53:
			m.settle(k, now())
			opts := CreateOptions{LockDelaySet: rng.IntN(2) == 0}
			if opts.LockDelaySet {
				opts.LockDelay = []time.Duration{0, tick, 3*tick + 1, 700 * time.Millisecond}[rng.IntN(4)]
			}
			if rng.IntN(3) == 0 {
				opts.Limit = 1 + rng.IntN(3)
			}
			ok, err := tb.Create(k.name, opts)
			switch {
			case k.created:
				if ok || err != nil {
					t.Fatalf("step %d: create of created %q: %v, %v", step, k.name, ok, err)
				}
			case opts.Limit > 0 && k.busy():
				if ok || !errors.Is(err, ErrInUse) {
					t.Fatalf("step %d: create LIMIT of busy %q: %v, %v", step, k.name, ok, err)
				}
			default:
				if !ok || err != nil {
					t.Fatalf("step %d: create %q: %v, %v", step, k.name, ok, err)
				}
				k.created, k.limit, k.delay = true, opts.Limit, -1
				if opts.LockDelaySet {
					k.delay = int64(opts.LockDelay)
				}
			}
		case r < 65: // verify a few leases, live and not
			for range 4 {
				k := m.keys[rng.IntN(nkeys)]
				for tok, l := range k.leases {
					if got, want := tb.Verify(k.name, tok), l.deadline > now(); got != want {
						t.Fatalf("step %d: verify %q %d at %d (deadline %d) = %v, want %v", step, k.name, tok, now(), l.deadline, got, want)
					}
				}
				m.settle(k, now())
			}
		case r < 80: // time passes, mostly a little
			switch x := rng.IntN(100); {
			case x < 85:
				clock.Advance(time.Duration(rng.Int64N(int64(3 * tick))))
			case x < 97:
				clock.Advance(time.Duration(rng.Int64N(int64(70 * tick))))
			default:
				clock.Advance(time.Duration(rng.Int64N(int64(5000 * tick))))
			}
		case r < 98: // one reaper batch
			if !reaping {
				reaping, reapNow = true, now()
			}
			s.mu.Lock()
			_, done := s.expireDue(reapNow, max(reapNow, now()))
			tb.unlock(s)
			if done {
				reaping = false
				passes++
				checkReaped(t, s, reapNow/s.tick, step)
			} else {
				partial++
				if s.wheel.inTick {
					midTick++
					w := &s.wheel
					for l := 1; l < len(w.levels) && w.now&(1<<(wheelBits*l)-1) == 0; l++ {
						if w.levels[l][int(w.now>>(wheelBits*l))&wheelMask] != 0 {
							midCascade++
							break
						}
					}
				}
			}
		default: // a whole ExpireDue, when the stepped reaper is between passes
			if !reaping {
				at := now()
				tb.ExpireDue()
				checkReaped(t, s, at/s.tick, step)
			}
		}
	}
	// The end: the clock moves past every deadline and lock-delay, and one
	// ExpireDue must leave nothing.
	for reaping {
		s.mu.Lock()
		_, done := s.expireDue(reapNow, max(reapNow, now()))
		tb.unlock(s)
		reaping = !done
	}
	clock.Advance(200 * time.Hour)
	tb.ExpireDue()
	checkReaped(t, s, now()/s.tick, -1)
	st := tb.Stats()
	if st.Held != 0 {
		t.Fatalf("at the end: %+v", st)
	}
	t.Logf("%d grants, %d denials, %d expired, %d lock-delays; reaper: %d passes, %d batches cut short (%d mid-tick, %d of them mid-cascade)",
		grants, denials, st.Expired, st.Delayed, passes, partial, midTick, midCascade)
}

// TestBatchedReaperUnderConcurrency runs the real ExpireDue loop on its own
// goroutine (one reaper, as Start runs) against workers that hold leases
// on keys of their own and on a few shared hot keys (some through
// AcquireWait), while the clock moves. A worker's lease must verify as live
// whenever the clock, read after Verify, is still before its deadline; and
// once everything has stopped and the clock is past every deadline, one
// ExpireDue leaves nothing held. Meant for -race as much as for the checks.
func TestBatchedReaperUnderConcurrency(t *testing.T) {
	tb, clock := newTestTable(t, func(c *Config) {
		c.Shards = 2
		c.LockDelay = 15 * time.Millisecond
		c.Events = &countingSink{}
	})
	const workers, mass = 4, 3000
	var stop atomic.Bool
	var passes, reaped, verified atomic.Int64
	var wg sync.WaitGroup
	fail := make(chan string, workers+2)
	wg.Add(1)
	go func() { // the reaper, with a mass of leases falling due as it goes
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			if i%50 == 0 {
				for j := range mass {
					tb.Acquire(&Request{Key: []byte("mass:" + strconv.Itoa(j)), TTL: time.Duration(1+j%7) * 10 * time.Millisecond})
				}
			}
			reaped.Add(int64(tb.ExpireDue()))
			passes.Add(1)
		}
	}()
	wg.Add(1)
	go func() { // time
		defer wg.Done()
		for !stop.Load() {
			clock.Advance(time.Duration(rand.Int64N(int64(3 * time.Millisecond))))
			runtime.Gosched()
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			own := []byte("own:" + strconv.Itoa(w))
			var tok uint64
			var deadline time.Duration
			for !stop.Load() {
				if tok == 0 {
					ttl := time.Duration(1+rng.IntN(40)) * time.Millisecond
					start := clock.Now()
					if got, ok, _ := tb.Acquire(&Request{Key: own, TTL: ttl}); ok {
						tok, deadline = got, start+ttl // the table counts from its own, later, reading
					}
				} else {
					live := tb.Verify(own, tok)
					verified.Add(1)
					if after := clock.Now(); !live && after < deadline {
						fail <- fmt.Sprintf("worker %d: lease gone at %v, before its deadline %v", w, after, deadline)
						return
					}
					if !live {
						tok = 0
					} else if rng.IntN(4) == 0 {
						ttl := time.Duration(1+rng.IntN(40)) * time.Millisecond
						start := clock.Now()
						if ok, _ := tb.Extend(own, tok, ttl); ok {
							deadline = start + ttl
						}
					}
				}
				hot := []byte("hot:" + strconv.Itoa(rng.IntN(3)))
				switch rng.IntN(3) {
				case 0:
					if got, ok, _ := tb.Acquire(&Request{Key: hot, TTL: 5 * time.Millisecond, Mode: Shared}); ok && rng.IntN(2) == 0 {
						tb.Release(hot, got)
					}
				case 1:
					wt, ch := waiter()
					if _, ok, _ := tb.AcquireWait(&Request{Key: hot, TTL: 5 * time.Millisecond}, wt); !ok {
						select {
						case <-ch:
						case <-time.After(time.Millisecond):
							if got, granted := tb.CancelWait(wt); granted {
								tb.Release(hot, got)
							}
						}
					}
				default:
					tb.Acquire(&Request{Key: hot, TTL: 2 * time.Millisecond})
				}
			}
		}()
	}
	time.Sleep(700 * time.Millisecond) // how long the stress runs: a bound, not a wait for anything
	stop.Store(true)
	wg.Wait()
	close(fail)
	for msg := range fail {
		t.Error(msg)
	}
	clock.Advance(time.Hour)
	tb.ExpireDue()
	st := tb.Stats()
	if st.Held != 0 {
		t.Fatalf("after ExpireDue past every deadline: %+v", st)
	}
	t.Logf("%d reaper passes reclaimed %d leases; %d verifies; %+v", passes.Load(), reaped.Load(), verified.Load(), st)
}
