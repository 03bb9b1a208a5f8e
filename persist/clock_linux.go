package persist

import (
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// bootID is read once: it changes only with a reboot.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "" // no /proc: every start is taken for a new boot
	}
	return strings.TrimSpace(string(b))
})

// bootClock reads the boot id and CLOCK_BOOTTIME; "" and 0 where they
// cannot be read.
func bootClock() (string, time.Duration) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return "", 0
	}
	return bootID(), time.Duration(ts.Nano())
}
