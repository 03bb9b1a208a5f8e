// Package slowlog owns SLOWLOG's entries: the latest slow commands, newest
// kept, each argument list cut and its passwords redacted as Redis's
// slowlogCreateEntry does. Deciding what is slow, and answering SLOWLOG,
// is the server's.
package slowlog
