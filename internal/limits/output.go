package limits

import (
	"fmt"
	"strconv"
	"strings"
	"time"
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
	// the server's output pause, so a client that does not read holds that
	// plus one reply at most, and a bound would only cut off a client that
	// asked for one large reply.
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
			return fmt.Errorf("limits: client output buffer limit %s: limits must not be negative, got %s", c.name, c.lim)
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
