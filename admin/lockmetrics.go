package admin

import (
	"github.com/leasehold/leasehold/internal/stats"
	"github.com/leasehold/leasehold/locker"
	"github.com/prometheus/client_golang/prometheus"
)

// lockGroup is the lock table's observations beyond INFO's first counters
// (locker.Stats): hand-offs, lock-delay refusals, leases by mode, and the
// lock events the pub/sub hub routed and dropped.
var lockGroup = group{always, []metric{
	{"lock_handoffs_total", "Leases passed to a waiter as the lock freed (released, expired, forced, or a lock-delay or a wait ahead ended).", counter, nil,
		func(st *stats.Stats) float64 { return float64(st.Locks.HandOffs) }},
	{"lock_delay_refusals_total", "ACQUIREs refused because a lock-delay was running.", counter, nil,
		func(st *stats.Stats) float64 { return float64(st.Locks.LockDelayRefusals) }},
	{"leases_held_by_mode", "Live leases by mode: exclusive, shared (readers) and permit (a semaphore's).", gauge, prometheus.Labels{"mode": "exclusive"},
		func(st *stats.Stats) float64 { return float64(st.Locks.HeldExclusive) }},
	{"leases_held_by_mode", "Live leases by mode: exclusive, shared (readers) and permit (a semaphore's).", gauge, prometheus.Labels{"mode": "shared"},
		func(st *stats.Stats) float64 { return float64(st.Locks.HeldShared) }},
	{"leases_held_by_mode", "Live leases by mode: exclusive, shared (readers) and permit (a semaphore's).", gauge, prometheus.Labels{"mode": "permit"},
		func(st *stats.Stats) float64 { return float64(st.Locks.HeldPermits) }},
	{"events_published_total", "Lock events routed to pub/sub subscribers (made only while anyone subscribes).", counter, nil,
		func(st *stats.Stats) float64 { return float64(st.Traffic.EventsPublished) }},
	{"events_dropped_total", "Lock event messages a subscriber did not get, its output being past its limit.", counter, nil,
		func(st *stats.Stats) float64 { return float64(st.Traffic.EventsDropped) }},
}}

// durationHistogram is one of the lock table's histograms as a Prometheus
// histogram, in seconds, made at scrape time from its counts.
type durationHistogram struct {
	name  string // without the namespace
	help  string
	value func(st *stats.Stats) *locker.Histogram
}

var histograms = []durationHistogram{
	{"lock_wait_seconds", "Time waits spent queued, until granted or given up (timeout, unblock, hang-up).",
		func(st *stats.Stats) *locker.Histogram { return &st.Locks.WaitTime }},
	{"lock_hold_seconds", "Time leases were held, from grant to release, forced release or deadline (an expired lease counts up to its deadline).",
		func(st *stats.Stats) *locker.Histogram { return &st.Locks.HoldTime }},
	{"reaper_lateness_seconds", "How long after a lease's deadline the reaper expired it.",
		func(st *stats.Stats) *locker.Histogram { return &st.Locks.ReaperLateness }},
}

func (h durationHistogram) desc() *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+h.name, h.help, nil, nil)
}

// constHistogram turns the per-bucket counts of a locker.Histogram into
// Prometheus's cumulative buckets.
func constHistogram(d *prometheus.Desc, h *locker.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, locker.DurationBuckets)
	var below uint64
	for k := range locker.DurationBuckets {
		below += h.Counts[k]
		buckets[locker.BucketBound(k).Seconds()] = below
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets)
}
