//go:build !amd64 && !arm64

package locker

// prefetch does nothing on platforms without a prefetch stub.
func prefetch(uintptr) {}
