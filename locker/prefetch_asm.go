//go:build amd64 || arm64

package locker

// prefetch asks the CPU to start loading the cache line at addr. It is a
// hint: it never faults, blocks or changes memory, and unlike a load it does
// not hold up the atomic instruction that unlocks a shard, so misses issued
// under several short lock holds still overlap.
//
//go:noescape
func prefetch(addr uintptr)
