//go:build leasehold_testclock

// This file is a test hook: only the binary the command tests build (go build
// -tags leasehold_testclock, in TestMain) has it; a release build reads the
// wall clock in bootclock_now.go and has no such variable.

package command

import (
	"fmt"
	"os"
	"time"
)

// bootClock is the wall-clock reading serve starts its token sequence from:
// LEASEHOLD_TEST_NOW, an RFC 3339 instant, when set, so that the command
// tests can start a server whose clock reads before the token epoch or past
// its end. It fakes that one reading only: leases, logs and the data
// directory keep the real clocks.
func bootClock() (time.Time, error) {
	v, ok := os.LookupEnv("LEASEHOLD_TEST_NOW")
	if !ok {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("LEASEHOLD_TEST_NOW: %w", err)
	}
	return t, nil
}
