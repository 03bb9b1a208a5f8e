// Package stats owns the shapes of the figures a server reports, as INFO
// and the admin listener's metrics read them: a snapshot type per INFO
// section, and the latency buckets of the per-command histograms. The
// counting is the server's.
package stats
