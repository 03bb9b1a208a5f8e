//go:build !unix

package main

// rusage reports no CPU time where getrusage is missing (Windows): the
// JSON line's client CPU fields read 0 there.
func rusage() cpuTimes { return cpuTimes{} }
