//go:build !linux

package persist

import "time"

// bootClock has no boot id or boot clock to read outside Linux: every start
// is taken for a new boot, and downtime is measured by the wall clock.
func bootClock() (string, time.Duration) { return "", 0 }
