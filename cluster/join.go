package cluster

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
)

const (
	// joinBackoffMin and joinBackoffMax bound the wait between two rounds
	// of join requests over Config.Join.
	joinBackoffMin = 100 * time.Millisecond
	joinBackoffMax = 5 * time.Second
)

// Peer is one member of a static initial configuration (Config.Peers).
type Peer struct {
	ID   string
	Addr string // Raft address
}

// Joined is closed once this node is known to be a member of the cluster:
// at Open if it has Raft state, bootstraps (Config.Bootstrap or
// Config.Peers) or has no Config.Join; else once a join request succeeded
// (the node is a voter), or the node found itself a voter in a
// configuration the leader sent it (added by an operator meanwhile).
// Until the leader first replicates to it, the node knows no leader:
// Forward and ReadIndex fail with ErrNoLeader, as during an election.
func (n *Node) Joined() <-chan struct{} { return n.joined }

// joinLoop asks the Config.Join addresses in turn to add this node, with a
// backoff between rounds (joinBackoffMin doubling to joinBackoffMax),
// until one succeeds or the node closes. A request takes as long as the
// leader's Join: up to CatchUpTimeout for this node to catch up.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	me := serverRef{id: n.cfg.NodeID, addr: n.Addr()}
	backoff := joinBackoffMin
	for {
		for _, addr := range n.cfg.Join {
			if n.isVoter() {
				close(n.joined)
				return
			}
			err := n.askJoin(addr, me)
			if err == nil {
				n.cfg.Logger.Info().Str("via", addr).Msg("joined the cluster")
				close(n.joined)
				return
			}
			if errors.Is(err, ErrNotRaftPort) {
				// A mistake in the configuration, not a member that is
				// down: said as such, every round, as long as it lasts.
				n.cfg.Logger.Error().Err(err).Str("via", addr).
					Msgf("join request: %s answered as a RESP server, not a Raft port: --join wants a member's --raft-addr, not its --addr; trying the next address", addr)
			} else {
				n.cfg.Logger.Warn().Err(err).Str("via", addr).Msg("join request failed; trying the next address")
			}
			select {
			case <-n.closeC:
				return
			default:
			}
		}
		select {
		case <-time.After(backoff):
		case <-n.closeC:
			return
		}
		backoff = min(2*backoff, joinBackoffMax)
	}
}

// joinRPCTimeout bounds a join or add request: the leader's catch-up wait
// and a forwarding hop.
func (n *Node) joinRPCTimeout() time.Duration { return n.cfg.CatchUpTimeout + 2*transportTimeout }

// askJoin asks the member at addr to add this node. It probes addr first
// (kindProbe, one round trip of at most the transport timeout), so that a
// member's RESP address given for its Raft address fails at once with
// ErrNotRaftPort: a RESP server reads the join request's frame as the
// start of an inline command and waits, silent, for the rest of its line.
func (n *Node) askJoin(addr string, me serverRef) error {
	if err := n.probe(addr); err != nil {
		return err
	}
	f, err := n.client.call(addr, kindJoin, me.encode(), time.Now().Add(n.joinRPCTimeout()), n.closeC)
	if err != nil {
		return err
	}
	if f.kind != statusOK {
		return decodeError(f.body)
	}
	return nil
}

// probe checks that addr is a member's Raft port: any reply to a kindProbe
// frame is a member's; a RESP server's answer fails the call with
// ErrNotRaftPort (readFrame), as does any answer that is not a frame.
func (n *Node) probe(addr string) error {
	_, err := n.client.call(addr, kindProbe, nil, time.Now().Add(transportTimeout), n.closeC)
	var resp *respAnswerError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &resp):
		return fmt.Errorf("%s: %w", addr, resp) // not "outcome unknown ... lost before the reply"
	case errors.Is(err, ErrFrameTooLarge) && errors.Is(err, ErrOutcomeUnknown):
		// The answer was no frame at all: some other server.
		return fmt.Errorf("%w: %s answered the probe with something other than a frame: %w", ErrNotRaftPort, addr, err)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s closed the connection without answering (is it a member's Raft address?): %w", addr, err)
	}
	return err
}

// isVoter reports whether this node's latest configuration lists it as a
// voter: the leader added it and replicated to it. A non-voter keeps
// asking: the leader's Join may have stopped at the catch-up wait, and
// asking again resumes it.
func (n *Node) isVoter() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(n.cfg.NodeID) {
			return s.Suffrage == raft.Voter
		}
	}
	return false
}

// admit answers a join request: the leader runs Join; a follower that
// knows the leader passes the request on to it once (a request that has
// been passed on already is not passed again, so two nodes with stale
// ideas of the leader cannot bounce it between them); otherwise the
// joiner is told there is no leader and tries its next address.
func (n *Node) admit(m serverRef) error {
	if n.IsLeader() {
		return n.Join(m.id, m.addr)
	}
	addr, id := n.raft.LeaderWithID()
	if addr == "" || string(id) == n.cfg.NodeID {
		return ErrNoLeader
	}
	if m.hops > 0 {
		return &outcomeError{kinds: []error{ErrNotLeader}, cause: fmt.Errorf("join passed on already; the leader is %s", id)}
	}
	m.hops++
	f, err := n.client.call(string(addr), kindJoin, m.encode(), time.Now().Add(n.joinRPCTimeout()), n.closeC)
	if err != nil {
		return err
	}
	if f.kind != statusOK {
		return fmt.Errorf("via %s: %w", id, decodeError(f.body))
	}
	return nil
}

// AddVia adds the server id at Raft address addr as Join does, from any
// node: on the leader it is Join; elsewhere the request goes to the leader
// over the RPC. Like Join it may be retried after any error; it blocks for
// up to CatchUpTimeout while the new server catches up.
func (n *Node) AddVia(id, addr string) error {
	return n.viaLeader(kindAdd, serverRef{id: id, addr: addr}.encode(), func() error { return n.Join(id, addr) })
}

// RemoveVia removes the server id as RemoveServer does, from any node: on
// the leader it is RemoveServer; elsewhere the request goes to the leader
// over the RPC. It may be retried after any error.
func (n *Node) RemoveVia(id string) error {
	return n.viaLeader(kindRemove, []byte(id), func() error { return n.RemoveServer(id) })
}

// viaLeader runs local on the leader, or sends kind with body to the
// leader. Errors: ErrNoLeader (wrapped with ErrNotDelivered), an RPC
// failure, or the leader's error (ErrNotLeader, ErrServerConflict,
// ErrCatchUpTimeout, ...), all told apart with errors.Is.
func (n *Node) viaLeader(kind byte, body []byte, local func() error) error {
	addr, id := n.raft.LeaderWithID()
	switch {
	case n.isClosed():
		return notDelivered(ErrClosed)
	case addr == "":
		return notDelivered(ErrNoLeader)
	case string(id) == n.cfg.NodeID:
		return local()
	}
	f, err := n.client.call(string(addr), kind, body, time.Now().Add(n.joinRPCTimeout()), n.closeC)
	if err != nil {
		return err
	}
	if f.kind != statusOK {
		return fmt.Errorf("cluster: leader %s: %w", id, decodeError(f.body))
	}
	return nil
}

// validatePeers reports what is wrong with c's Peers, Join and Bootstrap
// together, nil if nothing is.
func (c Config) validatePeers() error {
	starts := 0
	for _, set := range []bool{c.Bootstrap, len(c.Peers) > 0, len(c.Join) > 0} {
		if set {
			starts++
		}
	}
	if starts > 1 {
		return errors.New("cluster: Bootstrap, Peers and Join are exclusive: a node starts a cluster, is one of a static list, or joins one")
	}
	if c.Seed != nil && !c.Bootstrap {
		return errors.New("cluster: Seed starts a new group from this node's state: it needs Bootstrap")
	}
	if len(c.Peers) == 0 {
		return nil
	}
	for _, p := range c.Peers {
		if p.ID == c.NodeID {
			if p.Addr != c.RaftAddr {
				return fmt.Errorf("cluster: Peers gives %s the address %s, RaftAddr is %s", p.ID, p.Addr, c.RaftAddr)
			}
			return nil
		}
	}
	return fmt.Errorf("cluster: Peers does not list this node (%s)", c.NodeID)
}
