package contention

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Config configures Stats.
type Config struct {
	// Top is how many locks each of the Shards tracks: the report holds at
	// most Top, the hottest. 0 is not valid; a caller that wants no
	// statistics makes no Stats.
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

// LockStat is one lock's statistics, counted since the sketch began
// tracking it (a lock that fell out of the top and came back starts again).
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
	// Count is the sketch's weight for the lock (its events), and Error how
	// much of it may belong to the locks it displaced: Space-Saving's
	// overestimate. Count-Error events are certainly the lock's.
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
// are safe for concurrent use; each takes one shard's mutex for a few
// hundred nanoseconds at most, and Report takes them one at a time.
type Stats struct {
	cfg    Config
	seed   maphash.Seed
	shards []shard
}

// shard is one Space-Saving sketch over the keys hashed to it.
type shard struct {
	mu      sync.Mutex        // guards the fields below
	byKey   map[string]*entry // the tracked keys, at most cfg.Top
	minHeap entryHeap         // the same entries, lightest first
}

// entry is one tracked lock.
type entry struct {
	// key is the lock's name, in keyBuf's bytes: the entry owns them, and
	// reuses them for the key that displaces this one (observe), so that a
	// sketch busy displacing keys allocates nothing once its buffers fit
	// the keys. A stat copies it out.
	key                                     string
	keyBuf                                  []byte
	count, overcount                        uint64
	index                                   int // in the shard's heap
	acquisitions, waits, timeouts, expiries uint64
	wait, hold                              histogram
}

// New validates cfg and returns empty Stats.
func New(cfg Config) (*Stats, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Stats{cfg: cfg, seed: maphash.MakeSeed(), shards: make([]shard, cfg.Shards)}
	for i := range s.shards {
		s.shards[i].byKey = make(map[string]*entry, cfg.Top)
	}
	return s, nil
}

// The keys passed to Acquired, Ended and Waited may be borrowed (a lock
// table's event, say): Stats copies what it keeps and retains none of them.
// Durations come from the caller, who has the clock readings already (the
// lock table times every lease), so recording an event reads no clock.

// Acquired records a lease granted on key.
func (s *Stats) Acquired(key string) {
	sh := s.shardOf(key)
	sh.mu.Lock()
	e := sh.observe(key, s.cfg.Top)
	e.acquisitions++
	sh.mu.Unlock()
}

// Ended records the end of a lease on key that was held for held (0 when
// the caller does not know: no hold time is counted): expired when it
// reached its deadline, else released (by its holder or by force).
func (s *Stats) Ended(key string, held time.Duration, expired bool) {
	sh := s.shardOf(key)
	sh.mu.Lock()
	e := sh.observe(key, s.cfg.Top)
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
	sh := s.shardOf(key)
	sh.mu.Lock()
	e := sh.observe(key, s.cfg.Top)
	e.waits++
	if !granted {
		e.timeouts++
	}
	e.wait.add(d)
	sh.mu.Unlock()
}

// Tracked returns how many locks the sketch tracks: at most Top per shard.
func (s *Stats) Tracked() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.byKey)
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

func (s *Stats) shardOf(key string) *shard {
	if len(s.shards) == 1 {
		return &s.shards[0]
	}
	return &s.shards[maphash.String(s.seed, key)%uint64(len(s.shards))]
}

// observe counts one event on key, Space-Saving's step: a tracked key's
// count goes up; an untracked one is tracked, while there is room, or else
// takes the place of the lightest key, inheriting its count as its error
// (the most events of the new key the sketch can have missed) and starting
// its statistics afresh.
func (sh *shard) observe(key string, capacity int) *entry {
	if e, ok := sh.byKey[key]; ok {
		e.count++
		sh.minHeap.down(e.index) // a count only grows: the entry can only sink
		return e
	}
	if len(sh.minHeap) < capacity {
		e := &entry{count: 1}
		e.setKey(key)
		sh.byKey[e.key] = e
		heap.Push(&sh.minHeap, e)
		return e
	}
	e := sh.minHeap[0]
	delete(sh.byKey, e.key) // before its bytes change: a map key must not
	e.reset(e.count+1, e.count)
	e.setKey(key)
	sh.byKey[e.key] = e
	sh.minHeap.down(0)
	return e
}

// reset starts e afresh for another lock with the sketch's count and
// error. It clears the histograms' used buckets only (histogram.reset), not
// the whole entry, which is mostly histogram.
func (e *entry) reset(count, overcount uint64) {
	e.count, e.overcount = count, overcount
	e.acquisitions, e.waits, e.timeouts, e.expiries = 0, 0, 0, 0
	e.wait.reset()
	e.hold.reset()
}

// setKey copies key into e's buffer, which grows only for a longer key.
func (e *entry) setKey(key string) {
	e.keyBuf = append(e.keyBuf[:0], key...)
	e.key = unsafe.String(unsafe.SliceData(e.keyBuf), len(e.keyBuf))
}

// entryHeap orders entries by count, lightest first (container/heap).
type entryHeap []*entry

// down is container/heap's down without its interface calls, which every
// event pays: it sinks the entry at i below the lighter of its children
// while one is lighter.
func (h entryHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h[r].count < h[l].count {
			c = r
		}
		if h[c].count >= h[i].count {
			return
		}
		h.Swap(i, c)
		i = c
	}
}

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].count < h[j].count }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
