package server

import "syscall"

// errTooManyFiles is what Accept fails with when the process is out of
// file descriptors; Serve waits and retries rather than exiting.
var errTooManyFiles = syscall.EMFILE
