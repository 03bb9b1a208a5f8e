package server

import (
	"github.com/leasehold/leasehold/internal/eventring"
	"github.com/leasehold/leasehold/internal/stats"
)

// The recent lock events the status page opens with (package admin):
// internal/eventring's ring of the last eventring.Max, fed by the lock
// table's sink (eventring.Sink, around the sink the server had) while an
// admin listener records them.

// RecentEventsMax is the most lock events RecentEvents returns.
const RecentEventsMax = eventring.Max

// RecentEvent is a lock event as the ring recorded it, its owner as an
// admin sees it (scoped owners as user:owner).
type RecentEvent = eventring.Event

// RecordEvents makes the server keep its last RecentEventsMax lock events
// (RecentEvents) until stop is called; the admin listener calls it as it
// starts, so that the status page opens with the events that came before
// it. While any recorder is on, the lock table builds every event, as it
// does for a subscriber. stop ends the recorder's clock goroutine and waits
// for it, and is safe to call more than once.
func (s *Server) RecordEvents() (stop func()) { return s.recent.Record() }

// RecentEvents returns the last lock events recorded (at most
// RecentEventsMax, oldest first) while RecordEvents was on. It takes each
// slot's mutex briefly, and no lock a command holds.
func (s *Server) RecentEvents() []RecentEvent {
	evs := s.recent.Read()
	for i := range evs {
		evs[i].Owner = adminOwner(evs[i].Owner)
	}
	return evs
}

// LockCounters reads the lock table's counters as StatsSnapshot's Locks
// does, without the rest: no memory statistics (which stop the world), no
// connection counts, so that a sampler may call it every second. It takes
// no lock (atomic loads).
func (s *Server) LockCounters() stats.LockStats { return s.lockStats() }
