// Package protocol owns what crosses the wire: the command table (names,
// arities, flags, summaries), the parsing of arguments into typed requests,
// the shapes of replies, the mapping of errors to RESP error codes, and a
// bounded RESP reader for untrusted input. It knows the lock table only
// through its public errors and Status type, never its internals.
package protocol
