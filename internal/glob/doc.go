// Package glob owns the Redis-compatible glob matching used to filter keys
// during cursor iteration (the lock server's LOCKS cursor MATCH pattern).
package glob
