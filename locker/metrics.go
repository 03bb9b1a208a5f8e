package locker

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// The table's observations of its own work, beside shardCounts: hand-offs,
// lock-delay refusals, leases held by mode, and the histograms of wait
// time, hold time and reaper lateness. Like the counts, each shard's are
// written under its mutex, which the call already holds, and read without
// it by Table.Stats; since only the holder of the mutex writes, a write is
// a plain load and store (bump, observe), not a read-modify-write. They are
// local observations: in replicated mode they describe what this replica
// applied, by its own clock, and nothing of them is journaled or
// replicated.

// DurationBuckets is the number of finite buckets of a Histogram: bucket k
// counts durations up to 2^k ms, from 1 ms to 2^20 ms (about 17.5 minutes);
// one bucket more counts the longer ones.
const DurationBuckets = 21

// BucketBound returns the upper bound of finite bucket k of a Histogram.
func BucketBound(k int) time.Duration { return time.Millisecond << k }

// Histogram is a distribution of durations in DurationBuckets buckets
// (BucketBound) and one for the rest. Counts are per bucket, not
// cumulative.
type Histogram struct {
	Counts [DurationBuckets + 1]uint64
	Count  uint64        // the sum of Counts
	Sum    time.Duration // of every duration counted
}

// durationHist is a shard's Histogram as it is kept.
type durationHist struct {
	counts [DurationBuckets + 1]atomic.Uint64
	sum    atomic.Int64 // ns
}

// bucketOf is the bucket of a duration of d ns: the first k with d <= 2^k ms.
func bucketOf(d int64) int {
	if d <= int64(time.Millisecond) {
		return 0
	}
	return min(bits.Len64(uint64(d-1)/uint64(time.Millisecond)), DurationBuckets)
}

// observe counts a duration of d ns, n times. The shard's mutex is held.
func (h *durationHist) observe(d int64, n uint64) {
	d = max(d, 0)
	bump(&h.counts[bucketOf(d)], n)
	h.sum.Store(h.sum.Load() + d*int64(n))
}

// addTo adds h to out.
func (h *durationHist) addTo(out *Histogram) {
	for k := range h.counts {
		n := h.counts[k].Load()
		out.Counts[k] += n
		out.Count += n
	}
	out.Sum += time.Duration(h.sum.Load())
}

// bump adds n to a counter only the shard's mutex holder writes.
func bump(c *atomic.Uint64, n uint64) { c.Store(c.Load() + n) }

// shardMetrics are a shard's observations (see above).
type shardMetrics struct {
	handOffs, delayRefusals atomic.Uint64
	// heldShared and heldPermits count the leases of counts.held that are
	// readers' and semaphore permits; the rest are exclusive.
	heldShared, heldPermits atomic.Int64
	wait, hold, lateness    durationHist
}

// stamp is a time as a lease or a wait keeps it to measure its length: 0
// stands for unknown (a lease restored from a snapshot or a journal, whose
// start this table did not see).
func stamp(now int64) int64 { return now + 1 }

// observedBit, set in a lease's stamp, records that the shard's Observer
// asked to be told of the lease's end (Observer): a bit no monotonic
// reading reaches (2^62 ns is 146 years), so the lease needs no field for
// it.
const observedBit = 1 << 62

// since is the time from stamp st to now, and false when st is unknown.
func since(st, now int64) (int64, bool) {
	st &^= observedBit
	if st == 0 {
		return 0, false
	}
	return now - (st - 1), true
}

// leaseEnded observes the hold time of a lease granted at stamp st that
// ended at end, and returns it (0 when unknown).
func (s *shard) leaseEnded(st, end int64) time.Duration {
	d, ok := since(st, end)
	if !ok {
		return 0
	}
	s.metrics.hold.observe(d, 1)
	return time.Duration(max(d, 0))
}

// waitEnded observes the wait time of w, granted or given up at now.
func (s *shard) waitEnded(w *Wait, now int64) {
	if d, ok := since(w.since, now); ok {
		s.metrics.wait.observe(d, 1)
	}
}

// countHolder counts a lease of entry i's holder set coming (delta 1) or
// going (-1), by its mode.
func (s *shard) countHolder(i uint32, delta int64) {
	s.counts.held.Add(delta)
	if s.at(i).flags&flagSemaphore != 0 {
		s.metrics.heldPermits.Add(delta)
	} else {
		s.metrics.heldShared.Add(delta)
	}
}

// delayInTheWay reports whether a lock-delay keeps a lease of mode off
// entry i: the lock-delay after an exclusive lease, or readers' or
// permits' lock-delays where they fill the lock.
func (s *shard) delayInTheWay(i uint32, mode Mode) bool {
	e := s.at(i)
	if e.flags&flagDelayed != 0 {
		return true
	}
	hs := s.holders(i)
	if hs == nil || hs.live == len(hs.items) {
		return false
	}
	if e.flags&flagSemaphore != 0 {
		return true // full, and some of its places are lock-delays
	}
	return hs.live == 0 && mode != Shared // a writer kept out by readers' lock-delays only
}
