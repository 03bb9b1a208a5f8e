// Package persist keeps the lock table on local disk, so that locks, leases
// and the fencing-token sequence survive a crash and a restart. It owns the
// data directory; the lock table (package locker) knows nothing of files and
// sees a persist.Store only as its locker.Journal.
//
// The directory holds numbered logs and snapshots:
//
//	log-0000000000000007.lh    changes since snapshot 7, in order
//	snap-0000000000000007.lh   the whole table as of the start of log 7
//	TOKENS                     the highest token reservation
//	LOCK                       flock'd by the process that owns the directory
//
// Both use the LevelDB/Pebble record format (package
// github.com/cockroachdb/pebble/v2/record): 32 KiB blocks of chunks, each
// with a CRC-32C, so a torn write or a flipped bit is detected. One record of
// a log is one commit: every change buffered since the last one. A process
// never appends to a log an earlier process wrote, nor to one a write failed
// on (cut back to its last good record first); it starts the next number.
//
// Changes are buffered per lock-table shard (the table calls Change under the
// shard's lock, so each lock's changes keep their order) and written by
// Commit, which the server calls before it sends the replies of the commands
// it ran. Under FsyncAlways Commit also fsyncs, and concurrent commits share
// one fsync (group commit); FsyncEverySec fsyncs once a second in the
// background and FsyncNo leaves it to the OS. Whatever the policy, a token
// reservation is fsynced before any token it covers is issued, so tokens
// never go backwards across a restart; the reservation is also kept in the
// TOKENS file, so that not even damaged or repaired logs can lower it.
//
// Deadlines are stored as instants on the directory's own time line, which
// time marks in the logs and snapshots tie to the machine's boot id, boot
// clock (CLOCK_BOOTTIME) and wall clock (see timeMark). On start, the newest
// snapshot is loaded and the logs after it replayed into a model of the
// table, which Restore installs: a lease whose deadline passed while the
// server was down expires at once (into its lock-delay if it has one). The
// downtime is measured by the boot clock on the same boot, so a wall-clock
// step between runs does not move restored deadlines; after a reboot, by the
// wall clock, never below zero, so a step back cannot lengthen a lease past
// what it had left at the last mark.
package persist
