// Package limits owns the server's resource limits that know nothing of
// connections: client output buffer limits in Redis's syntax, sizes as
// Redis reads them, the heap reading that --maxmemory is checked against
// and the guard that samples it (MemoryGuard),
// and the arithmetic of raising the process's open-file limit.
package limits
