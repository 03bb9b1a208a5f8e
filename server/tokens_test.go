package server

import (
	"strconv"
	"testing"

	"github.com/leasehold/leasehold/locker"
)

// TestTokenHeadroom: the stats and INFO locks report the highest fencing
// token the server has issued or must stay above (the first token, the
// reservation on disk, a cluster's slot counters), and how many tokens are
// left below 2^53 after it.
func TestTokenHeadroom(t *testing.T) {
	check := func(t *testing.T, srv *Server, rdb doer, atLeast, atMost uint64) {
		t.Helper()
		st := srv.StatsSnapshot().Tokens
		if st.Highest < atLeast || st.Highest > atMost {
			t.Errorf("highest token %d, want within [%d, %d]", st.Highest, atLeast, atMost)
		}
		if st.Headroom != locker.MaxSafeToken-st.Highest {
			t.Errorf("headroom %d, want %d - %d", st.Headroom, uint64(locker.MaxSafeToken), st.Highest)
		}
		if got := infoField(t, rdb, "locks", "token_headroom"); got != strconv.FormatUint(st.Headroom, 10) {
			t.Errorf("INFO token_headroom %s, want %d", got, st.Headroom)
		}
		if got := infoField(t, rdb, "locks", "last_token"); got != strconv.FormatUint(st.Highest, 10) {
			t.Errorf("INFO last_token %s, want %d", got, st.Highest)
		}
	}
	t.Run("in memory", func(t *testing.T) {
		const first = 1 << 40
		ts := startServer(t, func(c *Config) { c.Locker.FirstToken = first })
		rdb := ts.client()
		check(t, ts.Server, rdb, first, first) // nothing issued: the first token's floor
		// Each shard counts its own tokens: the highest is any shard's.
		var highest uint64
		for i := range 20 {
			highest = max(highest, do(t, rdb, "ACQUIRE", "k"+strconv.Itoa(i), 10000).Token())
		}
		check(t, ts.Server, rdb, highest, highest)
	})
	t.Run("data directory", func(t *testing.T) {
		p := startPersist(t, t.TempDir())
		tok := do(t, p.rdb, "ACQUIRE", "k", 10000).Token()
		// The reservation on disk is ahead of the tokens issued: a restart
		// starts above it.
		check(t, p.srv, p.rdb, tok+locker.TokenReserveChunk-1, tok+2*locker.TokenReserveChunk)
	})
	t.Run("cluster", func(t *testing.T) {
		node := startCluster(t, 1)[0]
		rdb := node.client()
		tok := do(t, rdb, "ACQUIRE", "k", 10000).Token()
		check(t, node.Server, rdb, tok, tok)
	})
}
