package locker

import (
	"errors"
	"strconv"
)

var (
	// ErrNoSuchLock is returned by every acquire for an unknown key when the table
	// requires locks to be made by Create first (Config.RequireCreate).
	ErrNoSuchLock = errors.New("locker: no such lock")
	// ErrInUse is returned by Delete while a lease on the lock is live.
	ErrInUse = errors.New("locker: lock is held")
	// ErrInLockDelay is returned by Delete while the lock is in its
	// lock-delay after an expiry.
	ErrInLockDelay = errors.New("locker: lock is in its lock-delay")
	// ErrLockDelayRange is returned for a lock-delay that is negative or
	// exceeds Config.MaxTTL.
	ErrLockDelayRange = errors.New("locker: lock-delay out of range")
	// ErrNoTTL is returned by Acquire and AcquireWait when the Request gives
	// no ttl and the lock has no default ttl from Create.
	ErrNoTTL = errors.New("locker: no ttl given and the lock has no default ttl")
	// ErrTTLRange is returned for a ttl that is not positive or exceeds Config.MaxTTL.
	ErrTTLRange = errors.New("locker: ttl out of range")
	// ErrEmptyKey is returned for a zero-length key.
	ErrEmptyKey = errors.New("locker: empty key")
	// ErrKeyTooLong is returned for a key longer than Config.MaxKeyLen.
	ErrKeyTooLong = errors.New("locker: key too long")
	// ErrOwnerTooLong is returned for an owner id longer than Config.MaxKeyLen.
	ErrOwnerTooLong = errors.New("locker: owner too long")
	// ErrLimitRange is returned by Create for a semaphore limit out of range.
	ErrLimitRange = errors.New("locker: limit out of range")
	// ErrSharedSemaphore is returned for a Shared request on a semaphore,
	// whose permits are all alike.
	ErrSharedSemaphore = errors.New("locker: a semaphore has no shared leases")
	// ErrOwnerMode is returned when an owner that holds a lock asks for it
	// again in the other mode (shared or exclusive): a retry names the same
	// mode, and an upgrade or downgrade in place is not offered.
	ErrOwnerMode = errors.New("locker: owner holds the lock in the other mode")
	// ErrDuplicateKey is returned by AcquireAll and AcquireAllWait for a key
	// named twice.
	ErrDuplicateKey = errors.New("locker: a key is named more than once")
	// ErrClockBeforeEpoch is returned by CheckBootClock for a wall clock
	// before TokenEpoch: every such reading gives the same boot-epoch token,
	// so restarts would hand out the tokens of earlier runs again.
	ErrClockBeforeEpoch = errors.New("locker: the wall clock is before the token epoch")
	// ErrClockPastTokenRange is returned by CheckBootClock for a wall clock
	// at or after TokenEpochEnd, whose boot-epoch token is not below
	// MaxSafeToken.
	ErrClockPastTokenRange = errors.New("locker: the wall clock is past the range of boot-epoch tokens below 2^53")
	// ErrTableFull is returned, wrapped with the bound, by every call that
	// would make a new lock while the table holds Config.MaxLocks locks.
	ErrTableFull = errors.New("locker: lock table full")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("locker: table closed")
	// ErrTokenState is returned by RestoreTokenState for counters it cannot
	// install.
	ErrTokenState = errors.New("locker: token state does not fit the table")
	// ErrQueueState is returned by RestoreQueue for a queue it cannot install.
	ErrQueueState = errors.New("locker: wait queue does not fit the table")
)

// Errors is every sentinel above, in the order they were added, for the
// packages that map them all: protocol gives each its reply, and lockfsm
// numbers each by its place for the wire between cluster nodes, where nodes
// of different versions talk. So it is append only: a new error goes at the
// end, and none is moved or removed (keep a sentinel the table no longer
// returns). A test fails for an Err variable of this package not in it.
var Errors = []error{
	ErrNoSuchLock,
	ErrInUse,
	ErrInLockDelay,
	ErrLockDelayRange,
	ErrNoTTL,
	ErrTTLRange,
	ErrEmptyKey,
	ErrKeyTooLong,
	ErrOwnerTooLong,
	ErrLimitRange,
	ErrSharedSemaphore,
	ErrOwnerMode,
	ErrDuplicateKey,
	ErrTableFull,
	ErrClosed,
	ErrClockBeforeEpoch,
	ErrClockPastTokenRange,
	ErrTokenState,
	ErrQueueState,
}

// KeyError names the lock an error is about, for messages that must say which
// lock was missing. Compare the cause with errors.Is.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return e.Err.Error() + " " + strconv.Quote(e.Key) }

// Unwrap returns the cause.
func (e *KeyError) Unwrap() error { return e.Err }
