// Package contention keeps the contention picture of a lock table: per lock,
// acquisitions, waits, timeouts, expiries, and wait-time and hold-time
// percentiles, for the hottest locks only. The locks are chosen by a
// frequency sketch with an admission filter (TinyLFU's: a count-min sketch
// of sampled events decides which lock may replace the lightest one
// tracked), so memory is bounded by the number of locks tracked, never by
// the number of distinct keys seen, and a key seen once costs a hash and a
// load. It does no I/O and reads no clock: durations come from the caller.
package contention
