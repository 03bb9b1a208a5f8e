package server

import (
	"github.com/leasehold/leasehold/internal/stats"
	"github.com/leasehold/leasehold/locker"
)

// tokenStats reads stats.TokenStats off the lock table's token state, which takes
// each shard's lock in turn (or, in cluster mode, reads every slot's
// counter): at a scrape's or an INFO's pace, never per command.
func (s *Server) tokenStats() stats.TokenStats {
	highest, counters := s.lockTable().TokenState()
	for _, c := range counters {
		highest = max(highest, c)
	}
	if s.store != nil {
		highest = max(highest, s.store.Stats().TokenCeiling)
	}
	st := stats.TokenStats{Highest: highest}
	if highest < locker.MaxSafeToken {
		st.Headroom = locker.MaxSafeToken - highest
	}
	return st
}
