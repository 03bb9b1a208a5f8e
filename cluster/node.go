package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

const (
	// snapshotsRetained is how many snapshots the file store keeps: the
	// newest, and one to fall back on if the newest turns out damaged.
	snapshotsRetained = 2
	// logCacheSize is how many recent entries are kept in memory in front
	// of the bolt log, so that replication to followers rarely reads disk.
	logCacheSize = 512
	// transportPool and transportTimeout are the TCP transport's
	// connection pool per peer and its I/O deadline (Consul's values).
	transportPool    = 3
	transportTimeout = 10 * time.Second
	// catchUpPoll is how often Join looks at a non-voter's progress.
	catchUpPoll = 20 * time.Millisecond
)

// Node is one member of a Raft group: hashicorp/raft with a bolt log, a file
// snapshot store and a TCP or mutual-TLS transport whose heartbeats run on
// raft's main goroutine (see mainThreadTransport). Its methods are safe for
// concurrent use. Leader-only methods return an error wrapping ErrNotLeader
// elsewhere; they do not forward (Forward, ReadIndex, AddVia and RemoveVia
// are the ones that reach the leader from any node).
type Node struct {
	cfg    Config
	raft   *raft.Raft
	trans  *mainThreadTransport
	mux    *muxLayer // the Raft port, closed by raft's Shutdown (trans.Close)
	store  logStore
	logs   raft.LogStore // the log cache in front of store
	fsm    *appliedFSM
	client *rpcClient
	server *rpcServer
	verify *verifier

	termCommitted atomic.Uint64 // the latest term known to have committed an entry of its own (ReadIndex)
	barrierMu     sync.Mutex    // one ReadIndex Barrier at a time

	joined chan struct{}  // closed once a member (Joined)
	closeC chan struct{}  // closed by Close: stops the join loop and waiting calls
	wg     sync.WaitGroup // the join loop and VerifyLeader rounds

	closeOnce   sync.Once
	closeErr    error
	transferErr error // the outcome of Close's leadership transfer, for tests
}

// Open starts a node from cfg: it opens (or creates) the stores under
// cfg.DataDir/raft, listens on cfg.RaftAddr, bootstraps a one-voter cluster
// if cfg.Bootstrap is set and the stores are empty, and replays the newest
// snapshot and the log into cfg.FSM. If the stores are empty it bootstraps
// with cfg.Peers as the initial configuration, or, with cfg.Join, starts
// asking those addresses in the background to add it (see Joined). It
// returns without waiting for a leader or for the join. The caller must
// Close the node.
func Open(cfg Config) (*Node, error) {
	return open(cfg, testHooks{})
}

// testHooks change how open builds a node, for tests only.
type testHooks struct {
	// wrapTransport wraps the network transport (fault injection). The #695
	// wrapper always goes outermost.
	wrapTransport func(netTransport) netTransport
	// handshakeTimeout replaces transportTimeout as the time an accepted
	// TLS connection has to complete its handshake.
	handshakeTimeout time.Duration
}

// newNetTransport listens on cfg.RaftAddr, plain TCP or mutual TLS with
// cfg.TLS, through a muxLayer that also carries the node's RPC streams. An
// accepted connection has transportTimeout to complete its handshake and
// send its marker byte, the bound raft puts on every other exchange.
func newNetTransport(cfg Config, hooks testHooks) (*raft.NetworkTransport, *muxLayer, error) {
	handshake := transportTimeout
	if hooks.handshakeTimeout > 0 {
		handshake = hooks.handshakeTimeout
	}
	mux, err := listenMux(cfg.RaftAddr, cfg.TLS, cfg.AllowedPeer, handshake, cfg.Logger)
	if err != nil {
		return nil, nil, err
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  mux,
		MaxPool: transportPool,
		Timeout: transportTimeout,
		Logger:  newHclogAdapter(cfg.Logger, "raft-net"),
	}), mux, nil
}

func open(cfg Config, hooks testHooks) (n *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
		}
	}()

	store, err := openLogStore(dir, cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: opening the raft log: %w", err)
	}
	closers = append(closers, store.Close)
	logs, err := raft.NewLogCache(logCacheSize, store)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	fileSnaps, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, newHclogAdapter(cfg.Logger, "raft-snapshots"))
	if err != nil {
		return nil, fmt.Errorf("cluster: opening the snapshot store: %w", err)
	}
	snaps := &openedSnapshots{SnapshotStore: fileSnaps}
	network, mux, err := newNetTransport(cfg, hooks)
	if err != nil {
		return nil, fmt.Errorf("cluster: listening on %s: %w", cfg.RaftAddr, err)
	}
	var inner netTransport = network
	if hooks.wrapTransport != nil {
		inner = hooks.wrapTransport(inner)
	}
	trans := newMainThreadTransport(inner)
	closers = append(closers, trans.Close)

	rc := cfg.raftConfig()
	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the raft stores: %w", err)
	}
	if !existing && (cfg.Bootstrap || len(cfg.Peers) > 0) {
		first := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: trans.LocalAddr(),
		}}}
		if len(cfg.Peers) > 0 {
			// Every node of a static list bootstraps the same
			// configuration, which raft permits.
			first.Servers = nil
			for _, p := range cfg.Peers {
				first.Servers = append(first.Servers, raft.Server{
					Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr),
				})
			}
		}
		if cfg.Seed != nil {
			if err := seed(cfg.Seed, first, store, snaps, trans); err != nil {
				return nil, fmt.Errorf("cluster: bootstrap from a seed: %w", err)
			}
		} else if err := raft.BootstrapCluster(rc, logs, store, snaps, trans, first); err != nil {
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	if existing && cfg.Recover {
		alone := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: trans.LocalAddr(),
		}}}
		if err := raft.RecoverCluster(rc, cfg.FSM, logs, store, snaps, trans, alone); err != nil {
			return nil, fmt.Errorf("cluster: recover: %w", err)
		}
		cfg.Logger.Warn().Str("node_id", cfg.NodeID).Msg("recovered: this node is now the only voter of its group; the others must join it again with empty data directories")
	}
	fsm := newAppliedFSM(cfg.FSM, snaps)
	r, err := raft.NewRaft(rc, fsm, logs, store, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n = &Node{
		cfg: cfg, raft: r, trans: trans, mux: mux, store: store, logs: logs, fsm: fsm,
		client: newRPCClient(mux),
		joined: make(chan struct{}),
		closeC: make(chan struct{}),
	}
	n.verify = &verifier{verifyLeader: n.VerifyLeader, wg: &n.wg}
	n.server = &rpcServer{n: n}
	n.server.start()
	if existing || len(cfg.Join) == 0 || cfg.Bootstrap || len(cfg.Peers) > 0 {
		close(n.joined)
	} else {
		n.wg.Add(1)
		go n.joinLoop()
	}
	return n, nil
}

func (n *Node) isClosed() bool {
	select {
	case <-n.closeC:
		return true
	default:
		return false
	}
}

// ID is the node's ID (Config.NodeID).
func (n *Node) ID() string { return n.cfg.NodeID }

// Addr is the address the node's Raft transport listens on and advertises.
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// Close shuts the node down and closes its stores; it is safe to call twice.
// A leader with other voters first tries to hand leadership to the most
// up-to-date of them, for at most Config.TransferTimeout, so that the
// cluster does not wait out an election timeout. Close does not wait for
// commands in flight to commit: their Apply returns ErrOutcomeUnknown. It
// does wait for the node's goroutines, among them Config.Handler calls in
// progress for forwarded requests (their connections are closed first, so
// their callers get ErrOutcomeUnknown at once).
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.IsLeader() && n.otherVoters() {
			n.transferErr = n.transferLeadership()
		}
		n.closeErr = n.shutdown()
	})
	return n.closeErr
}

// transferLeadership asks raft to hand leadership over and waits for the
// answer for at most TransferTimeout. raft gives up by itself after an
// election timeout; the bound is for the case where its answer is late.
// The goroutine ends when raft answers, at the latest on Shutdown.
func (n *Node) transferLeadership() error {
	done := make(chan error, 1)
	go func() { done <- n.raft.LeadershipTransfer().Error() }()
	timer := time.NewTimer(n.cfg.TransferTimeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		err = fmt.Errorf("no answer within %s", n.cfg.TransferTimeout)
	}
	if err != nil {
		n.cfg.Logger.Warn().Err(err).Msg("leadership transfer before shutdown failed; the cluster will elect a leader after its heartbeat timeout")
	} else {
		n.cfg.Logger.Info().Msg("leadership transferred before shutdown")
	}
	return err
}

// shutdown stops raft (which closes the transport and with it the Raft
// port and every connection accepted on it), the RPC client and server
// and the stores, without a leadership transfer: what a crash leaves
// behind, apart from the unsynced page cache. It waits for every goroutine
// the node started, including Config.Handler calls in progress.
func (n *Node) shutdown() error {
	close(n.closeC)
	n.client.close()
	err := n.raft.Shutdown().Error()
	n.server.wg.Wait()
	n.wg.Wait()
	return errors.Join(err, n.store.Close())
}

func (n *Node) otherVoters() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(n.cfg.NodeID) {
			return true
		}
	}
	return false
}

// Apply proposes cmd and, once it is committed and applied to the local FSM,
// returns what the FSM's Apply returned for it (an error the FSM returns
// is a response, not a failure of Apply). timeout bounds only the wait to
// hand cmd to raft (0: no bound); after that Apply waits until the entry is
// applied or raft reports leadership lost, which a leader cut off from its
// quorum does within LeaderLeaseTimeout. On failure the error wraps
// ErrNotApplied (with ErrNotLeader on a follower) or ErrOutcomeUnknown;
// see errors.go.
func (n *Node) Apply(cmd []byte, timeout time.Duration) (any, error) {
	f := n.raft.Apply(cmd, timeout)
	armed := endOnShutdown(f, n.closeC)
	if err := f.Error(); err != nil {
		// A future that got a log index was dispatched: written to the
		// leader's log, perhaps replicated. raft's early refusals (and its
		// errorFuture) have index 0. A future whose wait Close ended
		// (ErrRaftShutdown on an armed one) may not be answered yet: raft
		// may still be writing its index, which is then not ours to read,
		// and it may have been dispatched.
		dispatched := armed && errors.Is(err, raft.ErrRaftShutdown) || f.Index() != 0
		return nil, commandError(err, dispatched)
	}
	return f.Response(), nil
}

// IsLeader reports whether this node believes it is the leader. Only
// VerifyLeader makes sure.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the ID and Raft address of the leader as this node knows
// it, both empty if it knows none (during an election).
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// Term is the current Raft term as this node knows it.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }

// LeaderCh delivers true when this node becomes the leader and false when
// it stops being it. It holds only the latest change: a reader that is
// late sees the newest state, not every transition (raft.LeaderCh).
func (n *Node) LeaderCh() <-chan bool { return n.raft.LeaderCh() }

// VerifyLeader confirms with a quorum that this node is still the leader,
// the check a linearizable read needs. It blocks for one round trip to the
// followers, and returns an error wrapping ErrNotLeader if not.
func (n *Node) VerifyLeader() error {
	return leaderError(n.raft.VerifyLeader().Error())
}

// Barrier blocks until every entry committed before the call is applied to
// the local FSM; a new leader calls it before serving reads. timeout bounds
// the wait to enqueue (0: no bound). Leader only.
func (n *Node) Barrier(timeout time.Duration) error {
	return leaderError(n.wait(n.raft.Barrier(timeout)))
}

// CommitIndex is the highest log index this node knows to be committed.
func (n *Node) CommitIndex() uint64 { return n.raft.CommitIndex() }

// AppliedIndex is the highest log index raft has handed to this node's FSM
// (configuration and no-op entries count too); the FSM may still be
// applying the last of them. WaitApplied waits for the FSM itself.
func (n *Node) AppliedIndex() uint64 { return n.raft.AppliedIndex() }

// Snapshot takes a snapshot now (raft.Snapshot) and compacts the log up to
// TrailingLogs behind it. It blocks until the snapshot is on disk and
// returns raft.ErrNothingNewToSnapshot if nothing was applied since the
// last one.
func (n *Node) Snapshot() error {
	return n.raft.Snapshot().Error()
}

// Join adds the server id at Raft address addr as a voter, the safe way:
// first as a non-voter, then, once it holds every entry the leader had
// committed when it was added (waiting at most Config.CatchUpTimeout), as a
// voter, so that a new, empty server never counts towards a quorum it
// cannot yet serve. Joining a server that is already a voter at addr does
// nothing, so Join may be retried after any error (a configuration change
// that failed with ErrNotLeader may still have committed). Leader only;
// one membership change commits at a time.
func (n *Node) Join(id, addr string) error {
	if !n.IsLeader() {
		return &outcomeError{kinds: []error{ErrNotLeader}, cause: raft.ErrNotLeader}
	}
	sid, saddr := raft.ServerID(id), raft.ServerAddress(addr)
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return leaderError(err)
	}
	for _, s := range f.Configuration().Servers {
		switch {
		case s.ID == sid && s.Address == saddr && s.Suffrage == raft.Voter:
			return nil
		case s.ID == sid && s.Address != saddr, s.ID != sid && s.Address == saddr:
			return fmt.Errorf("%w: %s at %s", ErrServerConflict, s.ID, s.Address)
		}
	}
	// Progress seen under this ID before may belong to a server that has
	// since lost its disk.
	n.trans.progress.forget(sid)
	if err := n.wait(n.raft.AddNonvoter(sid, saddr, 0, n.cfg.CatchUpTimeout)); err != nil {
		return leaderError(err)
	}
	if err := n.waitCaughtUp(sid); err != nil {
		return err
	}
	return leaderError(n.wait(n.raft.AddVoter(sid, saddr, 0, n.cfg.CatchUpTimeout)))
}

// waitCaughtUp polls until id has confirmed the leader's commit index as of
// the call, for at most CatchUpTimeout.
func (n *Node) waitCaughtUp(id raft.ServerID) error {
	target, term := n.raft.CommitIndex(), n.raft.CurrentTerm()
	deadline := time.NewTimer(n.cfg.CatchUpTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(catchUpPoll)
	defer tick.Stop()
	for {
		if !n.IsLeader() || n.raft.CurrentTerm() != term {
			return &outcomeError{kinds: []error{ErrNotLeader}, cause: raft.ErrLeadershipLost}
		}
		if n.trans.progress.matchIndex(id, term) >= target {
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("%w: %s has index %d of %d after %s", ErrCatchUpTimeout,
				id, n.trans.progress.matchIndex(id, term), target, n.cfg.CatchUpTimeout)
		}
	}
}

// RemoveServer removes the server id from the configuration, voter or not.
// A leader may remove itself; it steps down once the change commits.
// Removing a server that is not there changes nothing, so RemoveServer may
// be retried after any error. Leader only; one membership change commits
// at a time.
func (n *Node) RemoveServer(id string) error {
	sid := raft.ServerID(id)
	err := leaderError(n.wait(n.raft.RemoveServer(sid, 0, n.cfg.CatchUpTimeout)))
	if err == nil {
		n.trans.progress.forget(sid)
	}
	return err
}

// Server is one member of the configuration, as CLUSTER NODES lists it.
type Server struct {
	ID     string
	Addr   string
	Voter  bool // false: a non-voter, still catching up or kept as a read replica
	Leader bool // the leader as this node knows it
}

// Servers returns the latest configuration this node knows (committed or
// not), in configuration order.
func (n *Node) Servers() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, leaderError(err)
	}
	leaderID, _ := n.Leader()
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{
			ID:     string(s.ID),
			Addr:   string(s.Address),
			Voter:  s.Suffrage == raft.Voter,
			Leader: string(s.ID) == leaderID,
		})
	}
	return out, nil
}

// Stats returns hashicorp/raft's statistics (state, term, last_log_index,
// commit_index, applied_index, last_snapshot_index, num_peers,
// last_contact, ...) plus node_id, raft_addr, leader_id and leader_addr,
// as CLUSTER INFO lists them.
func (n *Node) Stats() map[string]string {
	s := n.raft.Stats()
	s["node_id"] = n.cfg.NodeID
	s["raft_addr"] = n.Addr()
	s["leader_id"], s["leader_addr"] = n.Leader()
	s["heartbeat_fast_path"] = "off" // see mainThreadTransport (#695)
	return s
}

// seed starts a new group from a snapshot of the state machine made outside
// it (Config.Seed), in place of raft.BootstrapCluster's first entry: the
// snapshot, at index 1 of term 1, carries the first configuration, and the
// node's term is 1, as after a bootstrap. A node that joins later receives
// the state with the snapshot, as it would any compacted log.
func seed(state func() ([]byte, error), first raft.Configuration, stable raft.StableStore, snaps raft.SnapshotStore, trans raft.Transport) error {
	data, err := state()
	if err != nil {
		return err
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, 1, 1, first, 1, trans)
	if err != nil {
		return err
	}
	if _, err := sink.Write(data); err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	return stable.SetUint64(keyCurrentTerm, 1)
}

// keyCurrentTerm is where hashicorp/raft keeps the current term in its
// stable store (raft.go's keyCurrentTerm, unexported).
var keyCurrentTerm = []byte("CurrentTerm")

// wait is f.Error(), ended by Close if raft never answers f (endOnShutdown):
// every future raft answers from its FSM goroutine (entries, barriers,
// configuration changes) is waited for through it.
func (n *Node) wait(f raft.Future) error {
	endOnShutdown(f, n.closeC)
	return f.Error()
}

// endOnShutdown makes f's Error return raft.ErrRaftShutdown once done is
// closed, if raft has not answered f by then. hashicorp/raft's FSM goroutine
// returns on Shutdown with committed batches perhaps still queued for it,
// and never answers their futures (hashicorp/raft#498): Apply would wait
// for ever, and with it a Close that waits for the handlers calling Apply.
// raft's futures have a field for this, deferError.ShutdownCh, which raft
// sets only on futures of its own; it is reached by reflection, since the
// future's type is raft's unexported logFuture. The field is read only by
// Error, on the caller's goroutine, after this sets it.
//
// It reports whether it set the field: then an ErrRaftShutdown from Error
// may be the close, not raft's answer, and nothing else of f may be read
// (raft may still be writing it).
func endOnShutdown(f raft.Future, done chan struct{}) bool {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return false // raft's errorFuture, a value: already answered
	}
	index := shutdownChOf(v.Type())
	if index == nil {
		return false
	}
	v.Elem().FieldByIndex(index).Set(reflect.ValueOf(done))
	return true
}

// shutdownChIndex maps each future type seen (raft's *logFuture and
// *configurationChangeFuture) to the index of its ShutdownCh field, a nil
// []int if it has none that endOnShutdown can set.
var shutdownChIndex sync.Map // reflect.Type -> []int

// shutdownChOf returns the index of the ShutdownCh field of the struct t
// points to, nil if it has none that endOnShutdown can set.
func shutdownChOf(t reflect.Type) []int {
	if index, ok := shutdownChIndex.Load(t); ok {
		return index.([]int)
	}
	var index []int
	if t.Elem().Kind() == reflect.Struct {
		if sf, ok := t.Elem().FieldByName("ShutdownCh"); ok && sf.IsExported() && sf.Type == reflect.TypeFor[chan struct{}]() {
			index = sf.Index
		}
	}
	shutdownChIndex.Store(t, index)
	return index
}
