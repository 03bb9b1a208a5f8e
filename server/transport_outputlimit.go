package server

import (
	"errors"
	"time"

	"github.com/leasehold/leasehold/internal/limits"
)

// Four bounds keep one connection from stalling the others on an event
// loop (see conn.runCommands): a round runs at most roundCommands of a
// connection's commands, roundInputBytes of its input, or roundTime, and
// stops early once the connection's unsent output reaches outputPause. Each makes a
// connection with more to do wait for its next turn (the loop's ready list)
// instead of holding the loop.
const (
	// roundCommands: a thousand cheap commands take a few hundred µs, so a
	// client pipelining a million PINGs delays the others by that much per
	// round rather than for its whole pipeline. A pipeline of 16
	// (redis-benchmark -P 16) never reaches it.
	roundCommands = 1024
	// roundInputBytes bounds the commands whose cost follows their size
	// (MRELEASE of a thousand pairs, long owners), as Redis bounds a round
	// by reading at most 16 KiB of a client per event (PROTO_IOBUF_LEN).
	// The command that crosses it still runs whole.
	roundInputBytes = 16 << 10
	// roundTime bounds the commands that are cheap to send and slow to
	// run (LOCKS with a costly MATCH, MACQUIRE and MRELEASE of a thousand
	// keys: about a millisecond each at their bounds): a round ends once
	// it has run this long, give or take a command, whatever its counts.
	roundTime = time.Millisecond
	// outputPause: a connection's commands run only while its unsent
	// output (replies not yet flushed, and bytes the socket refused) is
	// below this, so a client that does not read holds at most this plus
	// one reply, however many commands it pipelines. It is the most Redis
	// writes to one client per event (NET_MAX_WRITES_PER_EVENT), so a
	// client that does read gets its replies in writes of that size.
	outputPause = 64 << 10
)

// errOutputLimit ends a connection whose output passed its class's limit.
var errOutputLimit = errors.New("server: client output buffer limit reached")

// outputLimit returns the limits of c's class. Its caller runs c's
// commands: the subscriptions that decide the class change only there.
func (c *conn) outputLimit() limits.OutputLimit {
	if c.subscriptions() > 0 {
		return c.srv.cfg.OutputLimits.PubSub
	}
	return c.srv.cfg.OutputLimits.Normal
}

// overOutputLimit reports which bound of lim, if any, size bytes of unsent
// output pass: "hard" at once, "soft" once the output has stayed above it
// since since (monotonic ns, 0 for not yet) for lim.SoftFor. The caller
// tracks since: aboveSoft reports whether it should be running.
func overOutputLimit(lim limits.OutputLimit, size, since, now int64) (bound string, aboveSoft bool) {
	switch {
	case lim.Hard > 0 && size > lim.Hard:
		return "hard", true
	case lim.Soft > 0 && size > lim.Soft:
		if since != 0 && now-since >= int64(lim.SoftFor) || lim.SoftFor == 0 {
			return "soft", true
		}
		return "", true
	}
	return "", false
}

// outputLimitReached logs and counts the disconnection of c for passing
// its output buffer limit.
func (c *conn) outputLimitReached(bound string, size int64, lim limits.OutputLimit, pubsub bool) {
	c.srv.stats.outputLimitCloses.Add(1)
	class := "normal"
	if pubsub {
		class = "pubsub"
		c.srv.hub.dropped.Add(1)
	}
	c.log.Warn().Str("class", class).Str("limit", bound).Int64("output_bytes", size).
		Str("client_output_buffer_limit", lim.String()).
		Msg("client output buffer limit reached; closing the connection")
}

// notePeakOutput records size as the largest unsent output seen, for INFO's
// client_output_buffer_peak.
func (s *Server) notePeakOutput(size int64) {
	for {
		peak := s.stats.outputPeak.Load()
		if size <= peak || s.stats.outputPeak.CompareAndSwap(peak, size) {
			return
		}
	}
}
