package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Forward sends req to the node raft currently names as the leader and
// returns what that node's Config.Handler answered. On the leader itself
// it calls the Handler directly. timeout bounds the whole call: connecting,
// sending and waiting for the answer (0 or less: the transport timeout,
// 10 s).
//
// Forward never sends a request twice. Its errors say what became of req:
//
//   - errors.Is(err, ErrNotDelivered) (and ErrNotApplied): the Handler
//     certainly did not run for it. With ErrNoLeader: no leader is known
//     (an election); nothing was sent. With ErrNoHandler: the node reached
//     has no Handler. Otherwise the connection could not be made or failed
//     before the whole request was written (ErrClosed after Close,
//     ErrFrameTooLarge for a request over 64 MiB). Safe to retry.
//   - errors.Is(err, ErrOutcomeUnknown): the request was sent but no
//     answer came (connection lost, the leader died, timeout): the Handler
//     may have run, may be running, or may never run. A retry must be
//     safe to run twice (OWNER, a request id) or the client told so.
//
// Many calls may run at once: they share a few connections per leader,
// each carrying many requests, and a slow one holds up no other.
func (n *Node) Forward(req []byte, timeout time.Duration) ([]byte, error) {
	if timeout <= 0 {
		timeout = transportTimeout
	}
	addr, id := n.raft.LeaderWithID()
	switch {
	case n.isClosed():
		return nil, notDelivered(ErrClosed)
	case addr == "":
		return nil, notDelivered(ErrNoLeader)
	case string(id) == n.cfg.NodeID:
		if n.cfg.Handler == nil {
			return nil, notDelivered(ErrNoHandler)
		}
		return n.cfg.Handler(req), nil
	}
	f, err := n.client.call(string(addr), kindForward, req, time.Now().Add(timeout), n.closeC)
	if err != nil {
		return nil, err
	}
	if f.kind != statusOK {
		rerr := fmt.Errorf("forward to %s: %w", id, decodeError(f.body))
		if errors.Is(rerr, ErrNoHandler) {
			return nil, notDelivered(rerr)
		}
		return nil, outcomeUnknown(rerr) // the Handler ran; its answer was lost
	}
	return f.body, nil
}

// handleRPC answers one request another node sent (rpcServer runs it on a
// goroutine of its own).
func (n *Node) handleRPC(f frame) (status byte, body []byte) {
	var err error
	switch f.kind {
	case kindForward:
		if n.cfg.Handler == nil {
			err = ErrNoHandler
			break
		}
		return statusOK, n.cfg.Handler(f.body)
	case kindReadIndex:
		if len(f.body) != 8 {
			err = errBadRequest
			break
		}
		wait := min(time.Duration(binary.BigEndian.Uint64(f.body)), transportTimeout)
		var index uint64
		if !n.IsLeader() {
			err = &outcomeError{kinds: []error{ErrNotLeader}, cause: errors.New("asked for a read index")}
			break
		}
		if index, err = n.leaderReadIndex(time.Now().Add(wait)); err == nil {
			return statusOK, binary.BigEndian.AppendUint64(nil, index)
		}
	case kindJoin:
		m, ok := decodeMember(f.body)
		if !ok {
			err = errBadRequest
			break
		}
		err = n.admit(m)
	case kindAdd:
		m, ok := decodeMember(f.body)
		if !ok {
			err = errBadRequest
			break
		}
		err = n.Join(m.id, m.addr)
	case kindRemove:
		err = n.RemoveServer(string(f.body))
	default:
		err = errBadRequest
	}
	if err == nil {
		return statusOK, nil
	}
	return statusErr, encodeError(err)
}

var errBadRequest = errors.New("cluster: malformed request")

// serverRef is the body of a join or add request: a server's ID and Raft
// address, and for a join how many nodes have passed it on (hops).
type serverRef struct {
	id, addr string
	hops     byte
}

func (m serverRef) encode() []byte {
	b := binary.AppendUvarint(nil, uint64(len(m.id)))
	b = append(b, m.id...)
	b = binary.AppendUvarint(b, uint64(len(m.addr)))
	b = append(b, m.addr...)
	return append(b, m.hops)
}

func decodeMember(b []byte) (serverRef, bool) {
	var m serverRef
	var ok bool
	if m.id, b, ok = decodeString(b); !ok {
		return m, false
	}
	if m.addr, b, ok = decodeString(b); !ok || len(b) != 1 {
		return m, false
	}
	m.hops = b[0]
	return m, m.id != "" && m.addr != ""
}

func decodeString(b []byte) (string, []byte, bool) {
	size, k := binary.Uvarint(b)
	if k <= 0 || size > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(size)]), b[k+int(size):], true
}
