//go:build unix

package main

import "syscall"

// rusage returns this process's user and system CPU seconds.
func rusage() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return cpuTimes{tv(ru.Utime), tv(ru.Stime)}
}
