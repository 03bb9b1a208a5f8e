package cluster

import "time"

// TestingTimeouts shortens c's Raft timeouts for tests that start a group of
// nodes in one process, so that an election takes a fraction of a second.
// It is the one set that every such test uses (server's tests, and through
// internal/servertest/lockserver those of the clients and admin), as
// hashicorp/raft's testing.go serves every test that makes a cluster.
//
// Of the two sets the tests had, this is the slower and safer one: 500 ms
// heartbeat and election timeouts and a 400 ms leader lease, to which
// server's tests were raised from 300, 300 and 150 ms when a loaded CI
// machine under the race detector lost leaders mid-test; lockserver still
// had the lower ones it was copied with. A leader's hand-off on Close is
// bounded at 1 s, and Join's wait for a new node to catch up at 5 s (the
// default is 30 s), so that a join that fails is retried soon.
func TestingTimeouts(c *Config) {
	c.HeartbeatTimeout = 500 * time.Millisecond
	c.ElectionTimeout = 500 * time.Millisecond
	c.LeaderLeaseTimeout = 400 * time.Millisecond
	c.TransferTimeout = time.Second
	c.CatchUpTimeout = 5 * time.Second
}
