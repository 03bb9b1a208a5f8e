package cluster

import (
	"errors"

	"github.com/hashicorp/raft"
)

// Every error a Node returns for a failed command is one of two kinds, told
// apart with errors.Is: ErrNotApplied (the command never reached the log:
// retrying it, here or at the leader, cannot apply it twice) or
// ErrOutcomeUnknown (it may be applied, now or later, on every node). The
// error also wraps hashicorp/raft's own (raft.ErrLeadershipLost, ...).
var (
	// ErrNotApplied is wrapped by an Apply error when the command certainly
	// was not and will not be applied: raft refused it before giving it a
	// log index (not the leader, leadership transfer in progress, the
	// enqueue timeout passed, the node is shut down).
	ErrNotApplied = errors.New("cluster: command not applied")

	// ErrNotLeader is returned when an operation that only the leader can do
	// (Apply, VerifyLeader, Barrier, Join, RemoveServer, ...) is asked of a
	// node that is not the leader, or is no longer, or is handing leadership
	// over. An Apply error that wraps it also wraps ErrNotApplied.
	ErrNotLeader = errors.New("cluster: not the leader")

	// ErrOutcomeUnknown is wrapped by an Apply error when the command was
	// written to the leader's log but the node lost leadership (or shut
	// down) before learning whether a quorum holds it: it may still commit
	// under the next leader (hashicorp/raft's Apply doc, issue #359).
	ErrOutcomeUnknown = errors.New("cluster: outcome unknown")

	// ErrCatchUpTimeout is returned by Join when the new server, added as a
	// non-voter, has not caught up with the leader's commit index within
	// Config.CatchUpTimeout. It stays a non-voter; Join may be called again.
	ErrCatchUpTimeout = errors.New("cluster: new server did not catch up in time")

	// ErrServerConflict is returned by Join when the ID is in the
	// configuration under another address, or the address under another
	// ID. Remove the old entry first (RemoveServer).
	ErrServerConflict = errors.New("cluster: server ID or address already in the configuration")

	// ErrClosed is wrapped by the errors of a Node's methods after Close.
	ErrClosed = errors.New("cluster: node closed")

	// ErrNotDelivered is wrapped by a Forward error (and by the errors of
	// the other calls to another node) when the request certainly did not
	// reach the other node's handler: no leader was known, the connection
	// could not be made, or it failed before the whole request was written
	// (the receiver acts only on a complete frame, and the connection is
	// closed at once). Such an error also wraps ErrNotApplied: nothing the
	// handler would have applied was. Retrying cannot run it twice.
	ErrNotDelivered = errors.New("cluster: request not delivered")

	// ErrNoLeader is returned, wrapped with ErrNotDelivered, by calls that
	// need the leader (Forward, ReadIndex, AddVia, RemoveVia) when this
	// node knows none (during an election, or before a joining node first
	// hears from the leader).
	ErrNoLeader = errors.New("cluster: no leader known")

	// ErrNoHandler is returned, wrapped with ErrNotDelivered, by Forward
	// when the node it reached has no Config.Handler.
	ErrNoHandler = errors.New("cluster: the node takes no forwarded requests")

	// ErrTimeout is returned by ReadIndex and WaitApplied when their
	// timeout passes first. Nothing was changed; the read may be retried.
	ErrTimeout = errors.New("cluster: timed out")

	// ErrNotRaftPort is returned by a join request (Config.Join) to an
	// address that answered, but not as a member's Raft port does: most
	// likely a member's RESP address (--addr) given where its Raft address
	// (--raft-addr) belongs.
	ErrNotRaftPort = errors.New("cluster: not a Raft port")

	// ErrFrameTooLarge is returned by Forward for a request larger than
	// the frame limit (64 MiB; wrapped with ErrNotDelivered, nothing is
	// sent) or a reply the handler made larger than it (wrapped with
	// ErrOutcomeUnknown: the handler ran). A received frame over the limit
	// closes its connection.
	ErrFrameTooLarge = errors.New("cluster: frame too large")
)

// notDelivered is a request that certainly did not reach the other node's
// handler.
func notDelivered(cause error) error {
	kinds := []error{ErrNotApplied, ErrNotDelivered}
	for _, k := range []error{ErrNoLeader, ErrNoHandler, ErrClosed, ErrFrameTooLarge} {
		if errors.Is(cause, k) {
			kinds = append(kinds, k)
			break
		}
	}
	return &outcomeError{kinds: kinds, cause: cause}
}

// outcomeUnknown is a request that was sent but whose reply never came.
func outcomeUnknown(cause error) error {
	return &outcomeError{kinds: []error{ErrOutcomeUnknown}, cause: cause}
}

// outcomeError is a failed command: what is known of its fate (kinds, the
// most specific last) and raft's error (cause).
type outcomeError struct {
	kinds []error
	cause error
}

func (e *outcomeError) Error() string {
	kind := e.kinds[len(e.kinds)-1]
	if errors.Is(e.cause, kind) {
		return e.cause.Error()
	}
	return kind.Error() + ": " + e.cause.Error()
}

func (e *outcomeError) Unwrap() []error {
	return append(append([]error(nil), e.kinds...), e.cause)
}

// commandError classifies err, raft's error for a command (an Apply, or a
// Barrier, which is an entry too), by whether raft had given the command a
// log index (dispatched). Before that, nothing was written anywhere;
// after it, only a commit tells, and raft's errors after dispatch
// (ErrLeadershipLost, a log store failure, ErrRaftShutdown while the entry
// was waiting for the FSM) all leave the outcome open.
func commandError(err error, dispatched bool) error {
	switch {
	case dispatched:
		return &outcomeError{kinds: []error{ErrOutcomeUnknown}, cause: err}
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return &outcomeError{kinds: []error{ErrNotApplied, ErrNotLeader}, cause: err}
	case errors.Is(err, raft.ErrRaftShutdown):
		return &outcomeError{kinds: []error{ErrNotApplied, ErrClosed}, cause: err}
	default:
		return &outcomeError{kinds: []error{ErrNotApplied}, cause: err}
	}
}

// leaderError maps raft's error for a leader-only operation that is not a
// command (VerifyLeader, a membership change's refusal) onto ErrNotLeader
// where that is what it means.
func leaderError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return &outcomeError{kinds: []error{ErrNotLeader}, cause: err}
	case errors.Is(err, raft.ErrRaftShutdown):
		return &outcomeError{kinds: []error{ErrClosed}, cause: err}
	default:
		return err
	}
}
