// Package contention keeps the contention picture of a lock table: per lock,
// acquisitions, waits, timeouts, expiries, and wait-time and hold-time
// percentiles, for the hottest locks only. The locks are chosen by a
// streaming heavy-hitters sketch (Space-Saving), so memory is bounded by the
// number of locks tracked, never by the number of distinct keys seen. It does
// no I/O and reads time only through the clock it is given.
package contention
