package locker

import (
	"sync/atomic"
	"time"
)

// Clock reads monotonic time as a duration since an arbitrary, fixed origin.
// Only differences between readings matter; wall-clock steps must not show.
type Clock interface {
	Now() time.Duration
}

// SystemClock reads Go's monotonic clock.
type SystemClock struct{ origin time.Time }

// NewSystemClock returns a clock whose origin is now.
func NewSystemClock() *SystemClock { return &SystemClock{origin: time.Now()} }

// Now returns the monotonic time elapsed since the clock was made. time.Since
// uses the monotonic reading carried by origin, so a wall-clock jump is invisible.
func (c *SystemClock) Now() time.Duration { return time.Since(c.origin) }

// ManualClock is a Clock that moves only when told to; tests use it to drive
// expiry without sleeping. It is safe for concurrent use.
type ManualClock struct{ now atomic.Int64 }

// Now returns the current manual time.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.now.Load()) }

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.now.Add(int64(d)) }
