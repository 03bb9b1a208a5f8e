package server

import "github.com/leasehold/leasehold/internal/outbuf"

// outBuf is an event-loop connection's unsent output (outbuf.Buf), under
// the name conn's field has.
type outBuf = outbuf.Buf
