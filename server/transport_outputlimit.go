package server

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/tidwall/redcon"
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

// OutputLimit bounds the unsent output of one class of clients, as one
// class of Redis's client-output-buffer-limit: a client whose unsent output
// passes Hard bytes, or stays above Soft bytes for SoftFor, is disconnected
// (and logged, and counted in INFO's
// client_output_buffer_limit_disconnections). 0 turns a bound off.
type OutputLimit struct {
	Hard    int64
	Soft    int64
	SoftFor time.Duration
}

// OutputLimits are the output buffer limits of each class of client.
type OutputLimits struct {
	// Normal applies to a connection that is not subscribed. Its default
	// is Redis's, none: its commands stop running while its output is at
	// outputPause, so a client that does not read holds outputPause plus
	// one reply at most, and a bound would only cut off a client that asked
	// for one large reply.
	Normal OutputLimit
	// PubSub applies to a connection subscribed to a channel or pattern:
	// messages are pushed to it whatever it sends, so only this bounds a
	// subscriber that stops reading. The default is Redis's, 32 MiB at
	// once or 8 MiB for a minute: room for a burst of lock events (tens of
	// bytes each) to a subscriber that is slow for a moment.
	PubSub OutputLimit
}

// DefaultOutputLimits returns Redis's defaults for the two classes.
func DefaultOutputLimits() OutputLimits {
	return OutputLimits{PubSub: OutputLimit{Hard: 32 << 20, Soft: 8 << 20, SoftFor: time.Minute}}
}

// Validate reports the first limit out of range.
func (l OutputLimits) Validate() error {
	for _, c := range []struct {
		name string
		lim  OutputLimit
	}{{"normal", l.Normal}, {"pubsub", l.PubSub}} {
		if c.lim.Hard < 0 || c.lim.Soft < 0 || c.lim.SoftFor < 0 {
			return fmt.Errorf("server: client output buffer limit %s: limits must not be negative, got %s", c.name, c.lim)
		}
	}
	return nil
}

// String renders l in Redis's syntax, sizes in bytes and the soft time in
// whole seconds (rounded up), as Redis's CONFIG GET client-output-buffer-limit
// does: "normal 0 0 0 pubsub 33554432 8388608 60".
func (l OutputLimits) String() string {
	return "normal " + l.Normal.String() + " pubsub " + l.PubSub.String()
}

func (l OutputLimit) String() string {
	secs := (l.SoftFor + time.Second - 1) / time.Second
	return fmt.Sprintf("%d %d %d", l.Hard, l.Soft, secs)
}

// ParseOutputLimits reads Redis's client-output-buffer-limit syntax, one or
// more "<class> <hard> <soft> <soft-seconds>" groups with class normal or
// pubsub and sizes in bytes or with Redis's units (32mb, 8MB, 1gb; k, m and
// g without the b are powers of 1000, as in Redis). A class not named keeps
// its limits from base.
func ParseOutputLimits(s string, base OutputLimits) (OutputLimits, error) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f)%4 != 0 {
		return base, fmt.Errorf("client output buffer limit %q: want groups of <class> <hard> <soft> <soft-seconds>", s)
	}
	for ; len(f) > 0; f = f[4:] {
		var lim *OutputLimit
		switch strings.ToLower(f[0]) {
		case "normal":
			lim = &base.Normal
		case "pubsub":
			lim = &base.PubSub
		case "replica", "slave":
			return base, fmt.Errorf("client output buffer limit: leasehold has no replicas, so no class %q", f[0])
		default:
			return base, fmt.Errorf("client output buffer limit: unknown class %q: want normal or pubsub", f[0])
		}
		hard, err := ParseMemory(f[1])
		if err != nil {
			return base, fmt.Errorf("client output buffer limit: hard size %q: %w", f[1], err)
		}
		soft, err := ParseMemory(f[2])
		if err != nil {
			return base, fmt.Errorf("client output buffer limit: soft size %q: %w", f[2], err)
		}
		secs, err := strconv.ParseInt(f[3], 10, 32)
		if err != nil || secs < 0 {
			return base, fmt.Errorf("client output buffer limit: soft seconds %q: want a whole number of seconds", f[3])
		}
		*lim = OutputLimit{Hard: hard, Soft: soft, SoftFor: time.Duration(secs) * time.Second}
	}
	return base, nil
}

// errOutputLimit ends a connection whose output passed its class's limit.
var errOutputLimit = errors.New("server: client output buffer limit reached")

// outputLimit returns the limits of c's class. Its caller runs c's
// commands: the subscriptions that decide the class change only there.
func (c *conn) outputLimit() OutputLimit {
	if c.subscriptions() > 0 {
		return c.srv.cfg.OutputLimits.PubSub
	}
	return c.srv.cfg.OutputLimits.Normal
}

// overOutputLimit reports which bound of lim, if any, size bytes of unsent
// output pass: "hard" at once, "soft" once the output has stayed above it
// since since (monotonic ns, 0 for not yet) for lim.SoftFor. The caller
// tracks since: aboveSoft reports whether it should be running.
func overOutputLimit(lim OutputLimit, size, since, now int64) (bound string, aboveSoft bool) {
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
func (c *conn) outputLimitReached(bound string, size int64, lim OutputLimit, pubsub bool) {
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

// bufferedReplies returns how many reply bytes w holds unflushed. redcon's
// Writer does not say (its Buffer copies them), and runCommands asks after
// every command, so this reads the length of its buffer directly, at the
// offset found once at start: a redcon that renamed the field fails
// replyBufferOffset's check at init, not silently.
func bufferedReplies(w *redcon.Writer) int {
	return len(*(*[]byte)(unsafe.Add(unsafe.Pointer(w), replyBufferOffset)))
}

var replyBufferOffset = func() uintptr {
	f, ok := reflect.TypeFor[redcon.Writer]().FieldByName("b")
	if !ok || f.Type != reflect.TypeFor[[]byte]() {
		panic("server: redcon.Writer has no buffer field b []byte; bufferedReplies needs updating")
	}
	return f.Offset
}()
