package locker

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// MaxKeyLenLimit is the longest key or owner the arenas can hold.
const MaxKeyLenLimit = 1<<16 - 1

// Config holds every setting of a Table. Build it from DefaultConfig.
type Config struct {
	// Shards is the number of independently locked parts of the table; a
	// power of two. More shards mean less contention and a little more memory.
	Shards int
	// Tick is the resolution of the expiry timer wheel: an expired lease is
	// reclaimed within about one tick of its deadline. Correctness does not
	// depend on it, since every check treats a passed deadline as expired.
	Tick time.Duration
	// MaxTTL bounds every lease ttl and every lock's default ttl.
	MaxTTL time.Duration
	// MaxKeyLen bounds the length of keys and owner ids, in bytes.
	MaxKeyLen int
	// LockDelay, as in Chubby and Consul, keeps a lock ungrantable for this
	// long after a lease EXPIRES (not after a release), so that a holder that
	// paused past its deadline has time to notice before the next holder
	// starts. Create can set it per lock. 0 for none.
	LockDelay time.Duration
	// RequireCreate makes every acquire of an unknown key fail with ErrNoSuchLock
	// instead of creating the lock on the fly.
	RequireCreate bool
	// FirstToken is the token sequence's starting point: every token granted
	// is greater than it. See BootEpochToken.
	FirstToken uint64
	// Clock reads monotonic time; tests pass a *ManualClock.
	Clock Clock
	// Events, when set, receives lock events (see EventSink); nil for none.
	Events EventSink
	// Journal, when set, receives every change a restart must replay, and
	// reserves the tokens the table issues (see Journal); nil for none.
	Journal Journal
	// MaxLocks bounds the number of locks in the table, those Acquire makes
	// on the fly and those made by Create alike; 0 for no bound. A call that
	// would make a lock past it fails with ErrTableFull, while calls on
	// existing locks go on. Restore is never refused: restoring what a data
	// directory holds is not making new locks (see Table.OverMaxLocks).
	MaxLocks int
	// Replicated makes the table one replica of a replicated state machine
	// (see the package doc's "Replicated mode"): tokens are counted per key
	// slot above a floor (RaiseTokenFloor), and no lease or lock-delay ends
	// by itself, only by Fire. Every replica must have the same FirstToken
	// (DefaultConfig's comes from the wall clock). Exclusive with Journal:
	// the log is the journal.
	Replicated bool
	// PrefetchFrom is the number of live locks from which the table asks
	// callers to prefetch pipelined keys (see Table.PrefetchWorthwhile);
	// 0 means DefaultPrefetchFrom.
	PrefetchFrom int
}

// DefaultShards returns the default shard count: the power of two at or above
// 16 shards per available CPU, so that lock contention stays rare.
func DefaultShards() int {
	n := 1
	for n < 16*runtime.GOMAXPROCS(0) {
		n <<= 1
	}
	return n
}

// DefaultConfig returns a Config with every default set, the token sequence
// starting from the wall clock now.
func DefaultConfig() Config {
	return Config{
		Shards:     DefaultShards(),
		Tick:       10 * time.Millisecond,
		MaxTTL:     24 * time.Hour,
		MaxKeyLen:  1024,
		FirstToken: BootEpochToken(time.Now()),
		Clock:      NewSystemClock(),
	}
}

// TokenEpoch is the origin of boot-epoch tokens, 2026-01-01 UTC.
var TokenEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TokenTimeShift is how many low bits of a boot-epoch token count grants
// within one millisecond of the boot clock.
const TokenTimeShift = 12

// MaxSafeToken bounds tokens to integers that a float64 holds exactly, so
// that clients which decode RESP integers as JavaScript numbers (node's
// redis) or doubles can send a token back unchanged.
const MaxSafeToken = 1<<53 - 1

// TokenEpochEnd is the first wall-clock instant whose boot-epoch token is not
// below MaxSafeToken: 2^41 ms after TokenEpoch, 2095-09-07 15:47:35.552 UTC.
var TokenEpochEnd = TokenEpoch.Add((MaxSafeToken>>TokenTimeShift + 1) * time.Millisecond)

// BootEpochToken returns the first token of a server booted at wall time boot:
// milliseconds since TokenEpoch shifted left by TokenTimeShift bits. A server
// restarted later starts above every token the earlier run granted for any
// lock, as long as (a) the wall clock at the restart reads at least the
// earlier boot's reading plus the earlier run's uptime, which holds unless the
// clock was stepped back between the two boots by more than the time the
// server was down, and (b) no shard of the earlier run granted more than 2^12
// tokens per millisecond of its uptime, about four million a second on a
// single shard, far beyond what a shard's mutex allows. Steps of the clock
// while a server runs do not matter: only the boot reading does. A step back
// past the earlier boot's reading (by more than uptime plus downtime) repeats
// the earlier run's tokens on every shard that granted any.
//
// Only readings from TokenEpoch up to TokenEpochEnd give distinct tokens
// below MaxSafeToken; CheckBootClock says whether boot is one. Any earlier
// reading gives the same token, 2^12, so a server that trusts it reissues
// tokens at every restart; a later one gives a token that Validate refuses.
func BootEpochToken(boot time.Time) uint64 {
	ms := boot.Sub(TokenEpoch).Milliseconds()
	return uint64(max(ms, 1)) << TokenTimeShift
}

// CheckBootClock reports whether boot, a wall-clock reading, can start a
// token sequence by BootEpochToken: ErrClockBeforeEpoch before TokenEpoch,
// ErrClockPastTokenRange from TokenEpochEnd on, each wrapped with the reading.
func CheckBootClock(boot time.Time) error {
	const day = "2006-01-02"
	switch {
	case boot.Before(TokenEpoch):
		return fmt.Errorf("%w %s: it reads %s", ErrClockBeforeEpoch,
			TokenEpoch.Format(day), boot.UTC().Format(time.RFC3339))
	case !boot.Before(TokenEpochEnd):
		return fmt.Errorf("%w, which ends at %s: it reads %s", ErrClockPastTokenRange,
			TokenEpochEnd.Format(time.RFC3339), boot.UTC().Format(time.RFC3339))
	}
	return nil
}

// Validate reports the first setting that is out of range. It never changes c.
func (c Config) Validate() error {
	switch {
	case c.Shards < 1 || c.Shards&(c.Shards-1) != 0 || c.Shards > 1<<16:
		return fmt.Errorf("locker: shards must be a power of two between 1 and 65536, got %d", c.Shards)
	case c.Tick < time.Millisecond:
		return fmt.Errorf("locker: tick must be at least 1ms, got %s", c.Tick)
	case c.MaxTTL < time.Millisecond:
		return fmt.Errorf("locker: max ttl must be at least 1ms, got %s", c.MaxTTL)
	case c.MaxTTL > 100*365*24*time.Hour:
		return fmt.Errorf("locker: max ttl must be at most 100 years, got %s", c.MaxTTL)
	case c.LockDelay < 0 || c.LockDelay > c.MaxTTL:
		return fmt.Errorf("locker: lock delay must be between 0 and the max ttl %s, got %s", c.MaxTTL, c.LockDelay)
	case c.MaxKeyLen < 1 || c.MaxKeyLen > MaxKeyLenLimit:
		return fmt.Errorf("locker: max key length must be between 1 and %d, got %d", MaxKeyLenLimit, c.MaxKeyLen)
	case c.FirstToken == 0:
		return errors.New("locker: first token must be positive")
	case c.FirstToken >= MaxSafeToken:
		return fmt.Errorf("locker: first token %d leaves no room below 2^53", c.FirstToken)
	case c.Clock == nil:
		return errors.New("locker: clock is required")
	case c.MaxLocks < 0:
		return fmt.Errorf("locker: max locks must not be negative (0 for no bound), got %d", c.MaxLocks)
	case c.Replicated && c.Journal != nil:
		return errors.New("locker: a replicated table takes no journal (its log is one)")
	case c.PrefetchFrom < 0:
		return fmt.Errorf("locker: prefetch threshold must not be negative, got %d", c.PrefetchFrom)
	}
	return nil
}
