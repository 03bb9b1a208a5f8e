//go:build !unix

package server

import "syscall"

// writeNow has no non-blocking write to make here: writeSocket queues
// everything for the writer goroutine.
func writeNow(syscall.RawConn, []byte) (int, error) { return 0, nil }
