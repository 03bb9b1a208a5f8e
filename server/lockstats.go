package server

import (
	"time"

	"github.com/leasehold/leasehold/contention"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
)

// maxLockStatsTop bounds Config.LockStatsTop.
const maxLockStatsTop = protocol.MaxLockStatsTop

// newLockStats makes the contention statistics cfg asks for, nil for none.
func newLockStats(cfg Config) (*contention.Stats, error) {
	if cfg.LockStatsTop == 0 {
		return nil, nil
	}
	cc := contention.DefaultConfig()
	cc.Top = cfg.LockStatsTop
	return contention.New(cc)
}

// statsSink is the lock table's event sink when LOCKSTATS is on: the
// pub/sub hub's events (and the recent events' ring's) as before, built and
// published only while they have listeners, and the contention statistics told of events as they happen,
// as a locker.Observer: under the lock table's shard lock, with the key
// borrowed, so that the table neither copies it nor builds an event for
// them, and of a lease's end only when the statistics tracked its lock at
// its grant. The statistics are a leaf (their own mutexes, nothing else)
// and, for a key they do not track, the bulk of a random workload, cost a
// hash and a load (contention.Stats). That is the price of the statistics,
// which --lockstats-top 0 does not pay (docs/operations.md).
//
// It is the outermost sink (the table finds its Observer by a type
// assertion on Config.Events): next is the rest, the recent events' ring
// around the hub.
type statsSink struct {
	next  locker.EventSink
	stats *contention.Stats
}

func (s *statsSink) Active() bool            { return s.next.Active() }
func (s *statsSink) Publish(ev locker.Event) { s.next.Publish(ev) }

// Observe feeds the statistics; the table then tells it of a lease's end
// only if the statistics tracked its lock at its grant (locker.Observer).
func (s *statsSink) Observe(kind locker.EventKind, key string, token uint64, held time.Duration) bool {
	switch kind {
	case locker.EventAcquired:
		return s.stats.Acquired(key, token)
	case locker.EventReleased, locker.EventForced:
		s.stats.Ended(key, token, held, false)
	case locker.EventExpired:
		s.stats.Ended(key, token, held, true)
	}
	return false
}

// LockStats returns the hottest locks, at most top (every lock tracked for
// top <= 0), sorted by by, one of protocol.LockStatsOrders ("" for the
// first), descending; nil when the statistics are off (--lockstats-top 0).
// In cluster mode they are this node's: the events of the changes it
// applied. It is safe to call from any goroutine.
func (s *Server) LockStats(top int, by string) ([]contention.LockStat, error) {
	if s.hot == nil {
		return nil, nil
	}
	if by == "" {
		by = protocol.LockStatsOrders[0]
	}
	return s.hot.Report(top, by, nil)
}

// LockStatsOn reports whether the server keeps lock statistics
// (Config.LockStatsTop above 0).
func (s *Server) LockStatsOn() bool { return s.hot != nil }

// handleLockStats serves LOCKSTATS [TOP n] [BY order]: one flat array of
// field/value pairs per lock, as CONFIG GET and HELLO reply, durations in
// milliseconds to three significant digits (contention.FormatMillis). A user limited to some keys sees
// those locks only.
func handleLockStats(c *conn, args [][]byte) error {
	req, err := protocol.ParseLockStats(args)
	if err != nil {
		return err
	}
	if c.srv.hot == nil {
		return protocol.ErrLockStatsOff
	}
	var keep func(string) bool
	if u := c.user; u != nil && !u.AllKeys() {
		keep = func(key string) bool { return u.KeyAllowed([]byte(key)) }
	}
	locks, err := c.srv.hot.Report(req.Top, req.By, keep)
	if err != nil {
		return err
	}
	c.wr.WriteArray(len(locks))
	for _, l := range locks {
		c.wr.WriteArray(18)
		c.wr.WriteBulkString("key")
		c.wr.WriteBulkString(l.Key)
		for _, f := range [...]struct {
			name string
			n    uint64
		}{{"acquisitions", l.Acquisitions}, {"waits", l.Waits}, {"timeouts", l.Timeouts}, {"expiries", l.Expiries}} {
			c.wr.WriteBulkString(f.name)
			c.wr.WriteInt64(int64(f.n))
		}
		for _, f := range [...]struct {
			name string
			d    time.Duration
		}{{"wait_p50_ms", l.WaitP50}, {"wait_p99_ms", l.WaitP99}, {"hold_p50_ms", l.HoldP50}, {"hold_p99_ms", l.HoldP99}} {
			c.wr.WriteBulkString(f.name)
			c.wr.WriteBulkString(contention.FormatMillis(f.d))
		}
	}
	return nil
}
