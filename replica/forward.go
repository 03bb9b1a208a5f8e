package replica

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
)

// What a follower asks of the leader, through cluster.Node.Forward, and
// the leader's answers: the whole format is here. A request is a kind byte
// and its body; its answer a status byte and, for forwardOK, its body.
const (
	// forwardPropose's body is a tagged entry (lockfsm.AppendTaggedEntry)
	// to propose as it is; its answer's body, the results
	// (lockfsm.AppendResults).
	forwardPropose byte = 'P'
	// forwardAddr has no body; its answer's body is the leader's RESP
	// address. Only a leader ready to propose answers it.
	forwardAddr byte = 'A'
)

// The status of a forwarded request's answer.
const (
	forwardOK        byte = iota // the body follows
	forwardTryAgain              // nothing was done: the receiver cannot propose
	forwardUncertain             // proposed, outcome unknown
	forwardRefused               // a request the receiver does not understand
)

// forward sends entry, of n commands, to the leader to propose.
func (r *Replica) forward(entry []byte, n int, timeout time.Duration) ([]lockfsm.Result, error) {
	req := append([]byte{forwardPropose}, entry...)
	answer, err := r.node.Forward(req, max(timeout, retryPause)+proposeTimeout)
	switch {
	case err == nil:
	case errors.Is(err, cluster.ErrNotDelivered):
		return nil, protocol.ErrTryAgain
	default:
		r.log.Warn().Err(err).Msg("a forwarded proposal's outcome is unknown")
		return nil, protocol.ErrUncertain
	}
	if len(answer) == 0 {
		return nil, fmt.Errorf("replica: an empty answer to a forwarded proposal")
	}
	switch answer[0] {
	case forwardOK:
		results, err := lockfsm.DecodeResults(answer[1:])
		if err != nil {
			return nil, err
		}
		if len(results) != n {
			return nil, fmt.Errorf("replica: %d results for %d forwarded commands", len(results), n)
		}
		return results, nil
	case forwardTryAgain:
		return nil, protocol.ErrTryAgain
	case forwardUncertain:
		return nil, protocol.ErrUncertain
	default:
		return nil, fmt.Errorf("replica: the leader refused a forwarded proposal (status %d)", answer[0])
	}
}

// handleForward is the node's cluster.Config.Handler: it answers what a
// follower forwarded. A proposal is proposed once, never forwarded
// further: a node that is not a leader ready to propose answers TRYAGAIN.
func (r *Replica) handleForward(req []byte) []byte {
	select {
	case <-r.opened:
	default:
		return []byte{forwardTryAgain}
	}
	if len(req) == 1 && req[0] == forwardAddr {
		return r.answerAddr()
	}
	if len(req) == 0 || req[0] != forwardPropose {
		return []byte{forwardRefused}
	}
	entry := bytes.Clone(req[1:]) // raft keeps it; the request's buffer is not ours
	_, cmds, err := lockfsm.DecodeTaggedEntry(entry)
	if err != nil {
		return []byte{forwardRefused}
	}
	if !r.Ready() {
		return []byte{forwardTryAgain}
	}
	res, err := r.proposeHere(entry, len(cmds))
	switch {
	case err == nil:
		return lockfsm.AppendResults([]byte{forwardOK}, res)
	case err == protocol.ErrTryAgain:
		return []byte{forwardTryAgain}
	case err == protocol.ErrUncertain:
		return []byte{forwardUncertain}
	default:
		r.log.Error().Err(err).Msg("a forwarded proposal failed")
		return []byte{forwardRefused}
	}
}

// leaderAddr caches the RESP address of a leader, by its node ID.
type leaderAddr struct {
	mu         sync.Mutex
	id, addr   string
	announcing func() string // this node's own RESP address
}

// LeaderRESP returns the RESP address of the leader and its node ID: this
// node's if it leads, else asked of the leader once per leader. During an
// election, or before the leader's term has begun, it returns
// protocol.ErrTryAgain: never an address nobody serves.
func (r *Replica) LeaderRESP() (id, addr string, err error) {
	if r.Ready() {
		return r.node.ID(), r.leader.announcing(), nil
	}
	id, _ = r.node.Leader()
	if id == "" || id == r.node.ID() {
		return "", "", protocol.ErrTryAgain // an election, or its term not begun
	}
	r.leader.mu.Lock()
	cachedID, cached := r.leader.id, r.leader.addr
	r.leader.mu.Unlock()
	if cachedID == id {
		return id, cached, nil
	}
	answer, err := r.node.Forward([]byte{forwardAddr}, proposeTimeout)
	if err != nil || len(answer) < 2 || answer[0] != forwardOK {
		return "", "", protocol.ErrTryAgain
	}
	addr = string(answer[1:])
	r.leader.mu.Lock()
	r.leader.id, r.leader.addr = id, addr
	r.leader.mu.Unlock()
	return id, addr, nil
}

// answerAddr is handleForward's answer to forwardAddr.
func (r *Replica) answerAddr() []byte {
	if !r.Ready() {
		return []byte{forwardTryAgain}
	}
	return append([]byte{forwardOK}, r.leader.announcing()...)
}
