package server

import "github.com/leasehold/leasehold/locker"

// TokenStats is how far the fencing tokens have gone toward their bound,
// locker.MaxSafeToken (2^53 - 1, the largest integer a float64 holds
// exactly, so that every client language reads a token right).
type TokenStats struct {
	// Highest is the highest token the server has issued or must stay
	// above: the first token's floor (the boot-epoch token), the
	// reservation on disk with --data-dir, and in cluster mode the highest
	// key slot's counter or the term's floor.
	Highest uint64
	// Headroom is the tokens left: MaxSafeToken - Highest.
	Headroom uint64
}

// tokenStats reads TokenStats off the lock table's token state, which takes
// each shard's lock in turn (or, in cluster mode, reads every slot's
// counter): at a scrape's or an INFO's pace, never per command.
func (s *Server) tokenStats() TokenStats {
	highest, counters := s.lockTable().TokenState()
	for _, c := range counters {
		highest = max(highest, c)
	}
	if s.store != nil {
		highest = max(highest, s.store.Stats().TokenCeiling)
	}
	st := TokenStats{Highest: highest}
	if highest < locker.MaxSafeToken {
		st.Headroom = locker.MaxSafeToken - highest
	}
	return st
}
