// Package admin owns the HTTP admin listener: health checks for load
// balancers and Kubernetes (/healthz, /readyz), Prometheus metrics
// (/metrics), a live status page (/, status.go) and, when asked for, Go's
// profiler (/debug/pprof/). It reads the server only through what package
// server exports (Server.Ready, Server.StatsSnapshot, and for the status
// page Server.Table, read as LOCKS and STATUS read it, Server.WatchEvents,
// Server.LockStats, and for the page's history Server.RecordEvents,
// Server.RecentEvents and Server.LockCounters) and knows nothing of the
// lock table's internals.
// From Start to Close the listener has the server record its recent events
// and samples its counters once a second on a goroutine of its own
// (history.go).
//
// When the server asks connections for AUTH, the listener asks requests
// for the same users' credentials (HTTP Basic, auth.go), all but the
// probes; each path is allowed to the users that may run the commands it
// stands for. It speaks plain HTTP, so it listens on loopback unless
// Config.AllowRemote says otherwise (docs/operations.md).
package admin
