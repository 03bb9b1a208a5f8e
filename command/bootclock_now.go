//go:build !leasehold_testclock

package command

import "time"

// bootClock is the wall-clock reading serve starts its token sequence from.
// The command tests build the binary with bootclock_testhook.go instead.
func bootClock() (time.Time, error) { return time.Now(), nil }
