//go:build !amd64 && !arm64

package locker

// PrefetchSupported reports whether this platform has a prefetch
// instruction stub. It has none, so PrefetchWorthwhile stays false:
// Prefetch would only add hashing, locking and a real load of each slot.
const PrefetchSupported = false

// prefetch does nothing on platforms without a prefetch stub.
func prefetch(uintptr) {}
