package leasehold

import "time"

// SetWaitChunk makes c's WaitForever send waits of d rather than of the
// server's max-ttl, so that a test sees the chain of waits without a server
// of its own.
func SetWaitChunk(c *Client, d time.Duration) { c.waitChunk = d }
