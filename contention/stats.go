package contention

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Config configures Stats.
type Config struct {
	// Top is how many locks the report holds at most, the hottest. The
	// Shards together track a few more than Top (see Stats). 0 is not
	// valid; a caller that wants no statistics makes no Stats.
	Top int
	// Shards spreads the locks over this many independently locked
	// sketches, by a hash of the key, so that events on different locks
	// seldom wait for each other. A power of two is not required.
	Shards int
}

// DefaultTop is the number of locks tracked by default.
const DefaultTop = 100

// DefaultConfig returns a Config with every default set.
func DefaultConfig() Config {
	return Config{Top: DefaultTop, Shards: 8}
}

// Validate reports the first setting out of range; it never changes c.
func (c Config) Validate() error {
	if c.Top < 1 || c.Top > 100000 {
		return fmt.Errorf("contention: top must be between 1 and 100000, got %d", c.Top)
	}
	if c.Shards < 1 || c.Shards > 1024 {
		return fmt.Errorf("contention: shards must be between 1 and 1024, got %d", c.Shards)
	}
	return nil
}

// PerShard is how many locks each of c's shards tracks: its share of Top,
// ⌈Top/Shards⌉, and three times the square root of that again, so that the
// Top hottest locks fit though a hash spreads them unevenly (with the
// defaults, 25 a shard for a share of 13: a shard is dealt more than 25 of
// 100 locks about once in ten thousand).
func (c Config) PerShard() int {
	q := (c.Top + c.Shards - 1) / c.Shards
	return q + 3*int(math.Ceil(math.Sqrt(float64(q))))
}

// LockStat is one lock's statistics, counted since the sketch began
// tracking it: a lock is tracked from its first event while its shard has
// room, and once the shard is full from when the admission filter finds it
// hotter than the lightest lock tracked, which it then replaces (see
// Stats). A lock that fell out of the tracked set and came back starts
// again.
type LockStat struct {
	Key          string
	Acquisitions uint64 // leases granted, at once or after a wait
	Waits        uint64 // ACQUIRE ... WAIT calls that queued
	Timeouts     uint64 // waits that ended without the lease
	Expiries     uint64 // leases that reached their deadline: the holder did not renew
	// WaitP50 and WaitP99 are percentiles of the waits' durations, HoldP50
	// and HoldP99 of the leases' durations from grant to release, expiry or
	// forced release; each an estimate within 1.6% of the true value (to
	// the microsecond under 32 µs; see histogram), 0 without a sample.
	// RoundedMillis gives them with the precision they have.
	WaitP50, WaitP99 time.Duration
	HoldP50, HoldP99 time.Duration
	// Count is the lock's grants and waits, and Error the part of them
	// that is an estimate: the events before it was tracked, as
	// the admission filter's sampled counters saw them (0 for a lock
	// tracked from its first event). Count-Error events were counted one
	// by one, and are exact.
	Count, Error uint64
}

// Orders a report can be sorted by, descending.
const (
	ByWaits        = "waits"
	ByWaitTime     = "wait-time" // p99 wait
	ByHoldTime     = "hold-time" // p99 hold
	ByExpiries     = "expiries"
	ByAcquisitions = "acquisitions"
)

// Orders lists the orders a report can be sorted by.
var Orders = []string{ByWaits, ByWaitTime, ByHoldTime, ByExpiries, ByAcquisitions}

// ErrUnknownOrder is returned by Report for an order not in Orders.
var ErrUnknownOrder = errors.New("contention: unknown order")

// Stats tracks the hottest locks of a table from its events. Its methods
// are safe for concurrent use.
//
// Each shard tracks Config.PerShard locks, each with its counters and
// histograms (about 8 KB), in a min-heap by weight: the lock's grants and
// waits, all of them counted, halved at every aging step (the ends of its
// leases update its statistics, not its weight). A key not tracked costs far
// less, which is what matters when most keys are seen once (a million
// random keys): a presence filter read without the shard's mutex (a bit
// for each of a few thousand slots of the hash) says it is not tracked,
// and the event is dropped unless its lease is one of the 1
// in sampleEvery sampled (by its token, which every event of a lease
// carries). A sampled event takes the mutex and counts in a count-min
// sketch of the shard's untracked keys (four rows of byte counters,
// conservative update: TinyLFU's admission filter); only when the key's
// estimate is at least admitMin samples and, scaled back by sampleEvery,
// beats the weight of the lightest tracked lock does the key replace that
// lock. Every window of samples (as many as a row of the sketch has
// counters) the sketch's counters and the tracked weights halve together, so that the two stay comparable and a lock that cooled
// gives way. Until a shard is full every key is tracked at its first
// event, as in Space-Saving.
//
// So a tracked lock's counts are exact from its admission on (the ends of
// leases granted before it are not seen, when the caller skips the ends
// Acquired says do not matter); a lock is admitted after about
// admitMin×sampleEvery of its grants, sooner the hotter it is; and a key
// seen once costs a hash, a load, and, one lease in sampleEvery, the mutex
// and four counters.
type Stats struct {
	cfg      Config
	perShard int
	seed     uint64 // hashKey's
	// rand, if set (by a test), draws the sampling of waits, which carry
	// no token, instead of the runtime's per-thread generator (math/rand/v2's
	// Uint32, no lock).
	rand   *rand.Rand
	shards []shard
}

const (
	// sampleEvery: 1 lease (or wait) in this many of untracked keys
	// reaches the admission filter.
	sampleBits  = 4
	sampleEvery = 1 << sampleBits
	// admitMin is the fewest samples a key's estimate must have to be
	// admitted: a key seen once in a window, the bulk of a random
	// workload, never is, unless the sketch's counters collide.
	admitMin = 2
)

// shard is one tracked set over the keys hashed to it.
type shard struct {
	// present has a bit for each slot of the hash (presentSlot), set while
	// a tracked key's hash falls in it: a clear bit means the key is
	// certainly not tracked, which an event learns without mu. Bits, not
	// counts, so that it stays small enough to stay in the cache (512
	// bytes with the defaults). Written by mu's holder.
	present []atomic.Uint64
	// full is set once every place of the shard tracks a lock; until then
	// every event takes mu, to track its key if it is new.
	full atomic.Bool
	_    [64]byte // the fields above, read by every event, apart from mu's

	mu sync.Mutex // guards the fields below
	// index is an open-addressing (linear probing) table of the tracked
	// keys' hashes, 0 for an empty place, at least twice as large as the
	// shard's places; byIndex the entry of each.
	index   []uint64
	byIndex []*entry
	minHeap entryHeap // the tracked entries, lightest weight first
	filter  sketch    // the untracked keys' sampled events
	samples int       // events counted in filter since it last halved
	_       [64]byte
}

// entry is one tracked lock.
type entry struct {
	// key is the lock's name, in keyBuf's bytes: the entry owns them, and
	// reuses them for the key that displaces this one (observe), so that a
	// sketch busy displacing keys allocates nothing once its buffers fit
	// the keys. A stat copies it out.
	key                                     string
	keyBuf                                  []byte
	hash                                    uint64
	weight                                  uint64 // events, halved at each aging step: the heap's order
	count, overcount                        uint64 // LockStat's Count and Error
	index                                   int    // in the shard's heap
	acquisitions, waits, timeouts, expiries uint64
	wait, hold                              histogram
}

// New validates cfg and returns empty Stats.
func New(cfg Config) (*Stats, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Stats{cfg: cfg, perShard: cfg.PerShard(), seed: rand.Uint64(), shards: make([]shard, cfg.Shards)}
	places := 8
	for places < 2*s.perShard {
		places *= 2
	}
	slots := 4096 // bits: one in 160 set with the defaults
	for slots < 128*s.perShard {
		slots *= 2
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.present = make([]atomic.Uint64, slots/64)
		sh.index = make([]uint64, places)
		sh.byIndex = make([]*entry, places)
		sh.minHeap = make(entryHeap, 0, s.perShard)
		sh.filter = newSketch(s.perShard)
	}
	return s, nil
}

// The keys passed to Acquired, Ended and Waited may be borrowed (a lock
// table's event, say): Stats copies what it keeps and retains none of them.
// Durations come from the caller, who has the clock readings already (the
// lock table times every lease), so recording an event reads no clock. A
// lease's token, the same for its grant and its end and another for every
// lease of a key, chooses the leases of untracked keys that are sampled.

// Acquired records a lease granted on key with token, and reports whether
// its end matters: whether key is tracked, now. A caller may skip Ended for
// a lease whose grant it was told does not matter, as the lock table's
// observer does (locker.Observer), which spares keys not tracked half their
// cost in a lock cycle.
func (s *Stats) Acquired(key string, token uint64) bool {
	sh, e := s.observe(key, token, grant)
	if e == nil {
		return false
	}
	e.acquisitions++
	sh.mu.Unlock()
	return true
}

// Ended records the end of the lease token on key that was held for held
// (0 when the caller does not know: no hold time is counted): expired when
// it reached its deadline, else released (by its holder or by force).
func (s *Stats) Ended(key string, token uint64, held time.Duration, expired bool) {
	sh, e := s.observe(key, token, end)
	if e == nil {
		return
	}
	if expired {
		e.expiries++
	}
	if held > 0 {
		e.hold.add(held)
	}
	sh.mu.Unlock()
}

// Waited records a wait in key's queue that lasted d and ended granted or
// not (a timeout, or CLIENT UNBLOCK).
func (s *Stats) Waited(key string, d time.Duration, granted bool) {
	sh, e := s.observe(key, 0, wait)
	if e == nil {
		return
	}
	e.waits++
	if !granted {
		e.timeouts++
	}
	e.wait.add(d)
	sh.mu.Unlock()
}

// Tracked returns how many locks the sketch tracks: at most
// Config.PerShard a shard.
func (s *Stats) Tracked() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.minHeap)
		sh.mu.Unlock()
	}
	return n
}

// Report returns the top locks, at most top (Config.Top if top <= 0, at
// most that anyway), sorted by the order named by by, descending; ties go
// by acquisitions, then key. keep, if not nil, leaves out the keys it
// refuses before the cut.
func (s *Stats) Report(top int, by string, keep func(key string) bool) ([]LockStat, error) {
	less, ok := orders[by]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownOrder, by)
	}
	if top <= 0 || top > s.cfg.Top {
		top = s.cfg.Top
	}
	var all []LockStat
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, e := range sh.minHeap {
			if keep == nil || keep(e.key) {
				all = append(all, e.stat())
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b LockStat) int {
		if c := less(b, a); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Acquisitions, a.Acquisitions); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return all[:min(top, len(all))], nil
}

var orders = map[string]func(a, b LockStat) int{
	ByWaits:        func(a, b LockStat) int { return cmp.Compare(a.Waits, b.Waits) },
	ByWaitTime:     func(a, b LockStat) int { return cmp.Compare(a.WaitP99, b.WaitP99) },
	ByHoldTime:     func(a, b LockStat) int { return cmp.Compare(a.HoldP99, b.HoldP99) },
	ByExpiries:     func(a, b LockStat) int { return cmp.Compare(a.Expiries, b.Expiries) },
	ByAcquisitions: func(a, b LockStat) int { return cmp.Compare(a.Acquisitions, b.Acquisitions) },
}

func (e *entry) stat() LockStat {
	return LockStat{
		Key: strings.Clone(e.key), Acquisitions: e.acquisitions, Waits: e.waits, Timeouts: e.timeouts, Expiries: e.expiries,
		WaitP50: e.wait.quantile(0.5), WaitP99: e.wait.quantile(0.99),
		HoldP50: e.hold.quantile(0.5), HoldP99: e.hold.quantile(0.99),
		Count: e.count, Error: e.overcount,
	}
}

// The kinds of event observe counts. Grants and waits count in a lock's
// weight and its Count, and in the admission filter, which samples grants
// by their token and waits at random; an end only updates a tracked lock's
// statistics, and admits no key.
type eventKind uint8

const (
	grant eventKind = iota
	wait
	end
)

// observe counts one event of kind on key (for a grant or an end, of the
// lease token). It returns the key's entry, with its shard's mutex held for
// the caller to record the event and unlock, or nil when the key is not
// tracked (nor admitted by this event). See Stats.
func (s *Stats) observe(key string, token uint64, kind eventKind) (*shard, *entry) {
	h := s.hash(key)
	// The shard from h's low half, by multiplying rather than dividing (a
	// division costs more than the rest of an untracked key's event); the
	// index and the presence filter take the high half.
	sh := &s.shards[uint64(uint32(h))*uint64(len(s.shards))>>32]
	sampled := false
	if (sh.full.Load() || kind == end) && !sh.mayTrack(h) {
		if kind == end || !s.sample(h, token, kind) {
			return nil, nil
		}
		sampled = true
	}
	sh.mu.Lock()
	if e := sh.lookup(h, key); e != nil {
		if kind != end {
			e.count++
			e.weight++
			sh.minHeap.down(e.index) // a weight only grows between agings: the entry can only sink
		}
		return sh, e
	}
	if kind == end {
		sh.mu.Unlock()
		return nil, nil
	}
	if len(sh.minHeap) < s.perShard {
		e := &entry{count: 1, weight: 1}
		e.setKey(key)
		sh.track(h, e)
		e.index = len(sh.minHeap)
		sh.minHeap = append(sh.minHeap, e)
		sh.minHeap.up(e.index)
		if len(sh.minHeap) == s.perShard {
			sh.full.Store(true)
		}
		return sh, e
	}
	if !sampled && !s.sample(h, token, kind) { // another key's slot, or one just displaced
		sh.mu.Unlock()
		return nil, nil
	}
	est := uint64(sh.filter.add(h))
	if sh.samples++; sh.samples >= sh.filter.window {
		sh.age()
	}
	victim := sh.minHeap[0]
	if est < admitMin || est*sampleEvery <= victim.weight {
		sh.mu.Unlock()
		return nil, nil
	}
	sh.untrack(victim)
	victim.reset(est*sampleEvery, est*sampleEvery-1)
	victim.setKey(key)
	sh.track(h, victim)
	sh.minHeap.down(0)
	return sh, victim
}

// hash is key's hash, never 0 (index's empty place).
func (s *Stats) hash(key string) uint64 {
	return hashKey(s.seed, key)
}

// sample reports whether an event of kind on the key of hash h is sampled:
// a grant by a remix of the two with its token, so that each lease of a
// key (whose tokens only grow) is sampled as by a coin; a wait by a random
// draw.
func (s *Stats) sample(h, token uint64, kind eventKind) bool {
	if kind == wait {
		return s.draw()
	}
	return ((h^token)*0xbf58476d1ce4e5b9)>>(64-sampleBits) == 0
}

// draw is a random sample, 1 in sampleEvery.
func (s *Stats) draw() bool {
	if s.rand != nil {
		return s.rand.Uint32()%sampleEvery == 0
	}
	return rand.Uint32()%sampleEvery == 0
}

// presentSlot is the presence filter's slot of hash h.
func (sh *shard) presentSlot(h uint64) int {
	return int(h>>32) & (64*len(sh.present) - 1)
}

// mayTrack reports, without mu, whether the key of hash h may be tracked:
// false is certain, true is to be checked under mu.
func (sh *shard) mayTrack(h uint64) bool {
	slot := sh.presentSlot(h)
	return sh.present[slot/64].Load()&(1<<(slot%64)) != 0
}

// lookup returns the tracked entry of key, whose hash is h, or nil.
func (sh *shard) lookup(h uint64, key string) *entry {
	mask := uint64(len(sh.index) - 1)
	for i := (h >> 32) & mask; sh.index[i] != 0; i = (i + 1) & mask {
		if sh.index[i] == h && sh.byIndex[i].key == key {
			return sh.byIndex[i]
		}
	}
	return nil
}

// track enters e, which has key hash h, in the index and the presence
// filter.
func (sh *shard) track(h uint64, e *entry) {
	e.hash = h
	mask := uint64(len(sh.index) - 1)
	i := (h >> 32) & mask
	for sh.index[i] != 0 {
		i = (i + 1) & mask
	}
	sh.index[i], sh.byIndex[i] = h, e
	slot := sh.presentSlot(h)
	sh.present[slot/64].Or(1 << (slot % 64))
}

// untrack removes e from the index, moving back the entries after it that
// linear probing put past their home place (no tombstones to clean up), and
// from the presence filter unless another tracked key shares its slot.
func (sh *shard) untrack(e *entry) {
	slot := sh.presentSlot(e.hash)
	if !slices.ContainsFunc(sh.minHeap, func(o *entry) bool { return o != e && sh.presentSlot(o.hash) == slot }) {
		sh.present[slot/64].And(^(1 << (slot % 64)))
	}
	mask := uint64(len(sh.index) - 1)
	i := (e.hash >> 32) & mask
	for sh.byIndex[i] != e {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; sh.index[j] != 0; j = (j + 1) & mask {
		// The entry at j may move back to i unless its home lies
		// cyclically in (i, j].
		if home := (sh.index[j] >> 32) & mask; (j-home)&mask >= (j-i)&mask {
			sh.index[i], sh.byIndex[i] = sh.index[j], sh.byIndex[j]
			i = j
		}
	}
	sh.index[i], sh.byIndex[i] = 0, nil
}

// age halves the filter's counters and the tracked locks' weights, which
// keeps the heap's order, so that what the filter and the weights compare
// is recent events, a window's worth of samples at half the weight of the
// next.
func (sh *shard) age() {
	sh.filter.halve()
	for _, e := range sh.minHeap {
		e.weight /= 2
	}
	sh.samples = 0
}

// reset starts e afresh for another lock with the weight and count of the
// estimate that admitted it, all but its current event an estimate. It
// clears the histograms' used buckets only (histogram.reset), not the whole
// entry, which is mostly histogram.
func (e *entry) reset(count, overcount uint64) {
	e.weight, e.count, e.overcount = count, count, overcount
	e.acquisitions, e.waits, e.timeouts, e.expiries = 0, 0, 0, 0
	e.wait.reset()
	e.hold.reset()
}

// setKey copies key into e's buffer, which grows only for a longer key.
func (e *entry) setKey(key string) {
	e.keyBuf = append(e.keyBuf[:0], key...)
	e.key = unsafe.String(unsafe.SliceData(e.keyBuf), len(e.keyBuf))
}

// entryHeap orders entries by weight, lightest first.
type entryHeap []*entry

// down is container/heap's down without its interface calls, which every
// tracked event pays: it sinks the entry at i below the lighter of its children
// while one is lighter.
func (h entryHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h[r].weight < h[l].weight {
			c = r
		}
		if h[c].weight >= h[i].weight {
			return
		}
		h.swap(i, c)
		i = c
	}
}

// up raises the entry at i above its parents while it is lighter.
func (h entryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].weight <= h[i].weight {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h entryHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
