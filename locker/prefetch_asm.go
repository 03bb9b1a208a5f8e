//go:build amd64 || arm64

package locker

// PrefetchSupported reports whether this platform has a prefetch
// instruction stub (amd64 and arm64 do); without one, PrefetchWorthwhile is
// always false.
const PrefetchSupported = true

// prefetch asks the CPU to start loading the cache line at addr. It is a
// hint: it never faults, blocks or changes memory, and unlike a load it does
// not hold up the atomic instruction that unlocks a shard, so misses issued
// under several short lock holds still overlap.
func prefetch(addr uintptr)
