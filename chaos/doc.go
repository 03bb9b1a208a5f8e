// Package chaos is leasehold's fault-injection harness: it runs leasehold
// nodes as processes (each in a network namespace of its own), drives them
// with many clients issuing random lock operations, injects faults (kill -9,
// SIGSTOP, network partitions, a torn write at the end of a node's Raft log,
// a full disk) and checks the recorded history against a
// model of a fenced lease lock with porcupine, plus direct checkers of the
// safety properties a lock server promises (token order, no lease ended early,
// no acknowledged grant lost, the highest token never going back).
//
// The model and the checkers work on a History alone and are tested on
// synthetic histories; the driver and the nemesis need root (ip netns) and
// the leasehold binary. docs/reliability.md says how to run it.
package chaos
