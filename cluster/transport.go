package cluster

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// netTransport is what a Node needs of a transport: raft.Transport plus the
// optional interfaces raft.NetworkTransport implements. raft discovers
// those by type assertion, so a wrapper that dropped WithPreVote would
// silently turn pre-vote off, and one that dropped WithClose would leak the
// listener on Shutdown.
type netTransport interface {
	raft.Transport
	raft.WithPreVote
	raft.WithClose
}

// mainThreadTransport is the transport a Node hands to raft. It does two
// things to the transport it wraps:
//
//   - SetHeartbeatHandler is a no-op, so that heartbeats reach raft through
//     Consumer() and are handled on raft's main goroutine like every other
//     AppendEntries. hashicorp/raft v1.8.0 otherwise handles them on the
//     transport's connection goroutine ("fast path", raft.go
//     processHeartbeat), and that goroutine runs appendEntries, whose own
//     comment says it must only be called from the main thread: a heartbeat
//     of a newer term can then change currentTerm and the node's state while
//     the main goroutine is writing or answering for the old term, and logs
//     can diverge after a partition heals (hashicorp/raft issue #695, open;
//     fix PR #701 unmerged). raft's own InmemTransport has no fast path
//     either. The cost: a follower answers a heartbeat only after the
//     AppendEntries ahead of it (a disk write) are done, so a disk slower
//     than the heartbeat timeout can cause an election; the defaults (1 s)
//     leave room for bolt's two fsyncs per append.
//   - It records, per peer, the highest log index the peer has confirmed in
//     the current term (AppendEntries and InstallSnapshot responses), which
//     raft keeps private. Join uses it to wait until a non-voter has caught
//     up before making it a voter.
//   - It records, per peer, when the latest request that the peer answered
//     in the request's own term was sent. ReadIndex uses it to make sure
//     a quorum acknowledged this leader after the read began: raft's
//     VerifyLeader also counts answers to requests sent before it.
//
// Remove the no-op once #695 is fixed in a release we use.
type mainThreadTransport struct {
	netTransport
	progress *progressTracker
}

func newMainThreadTransport(inner netTransport) *mainThreadTransport {
	return &mainThreadTransport{netTransport: inner, progress: newProgressTracker()}
}

// SetHeartbeatHandler does nothing: see the type comment (#695).
func (t *mainThreadTransport) SetHeartbeatHandler(func(raft.RPC)) {}

func (t *mainThreadTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	sent := time.Now()
	err := t.netTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.progress.observeAppend(id, args, resp, sent)
	}
	return err
}

func (t *mainThreadTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	sent := time.Now()
	err := t.netTransport.InstallSnapshot(id, target, args, resp, data)
	if err == nil && resp.Term == args.Term {
		t.progress.heard(id, args.Term, sent)
	}
	if err == nil && resp.Success {
		t.progress.raise(id, args.Term, args.LastLogIndex)
	}
	return err
}

func (t *mainThreadTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.netTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newObservedPipeline(p, id, t.progress), nil
}

// progressTracker holds, per peer, the highest index that peer confirmed
// holding, and the term of the request that confirmed it. Only a
// confirmation from the current term counts: within one term the leader's
// entries are never truncated from a follower, while an older term's match
// may have been.
//
// It also holds, per peer, when the latest request the peer answered in
// that request's term was sent (contact): an answer in the same term,
// successful or not, means the peer took this node for the leader of the
// term when it answered, which was after the request was sent.
type progressTracker struct {
	mu      sync.Mutex // guards match, contact
	match   map[raft.ServerID]termIndex
	contact map[raft.ServerID]termTime
}

type termIndex struct{ term, index uint64 }

type termTime struct {
	term uint64
	sent time.Time
}

func newProgressTracker() *progressTracker {
	return &progressTracker{match: make(map[raft.ServerID]termIndex), contact: make(map[raft.ServerID]termTime)}
}

func (p *progressTracker) observeAppend(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, sent time.Time) {
	if resp == nil {
		return
	}
	if resp.Term == req.Term {
		p.heard(id, req.Term, sent)
	}
	if !resp.Success {
		return
	}
	index := req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		index = req.Entries[n-1].Index
	}
	p.raise(id, req.Term, index)
}

func (p *progressTracker) raise(id raft.ServerID, term, index uint64) {
	if index == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.match[id]
	if term > old.term || (term == old.term && index > old.index) {
		p.match[id] = termIndex{term, index}
	}
}

// matchIndex returns the highest index id confirmed in term, 0 if none.
func (p *progressTracker) matchIndex(id raft.ServerID, term uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.match[id]; m.term == term {
		return m.index
	}
	return 0
}

// heard records that id answered, in term, a request sent at sent.
func (p *progressTracker) heard(id raft.ServerID, term uint64, sent time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.contact[id]
	if term > old.term || (term == old.term && sent.After(old.sent)) {
		p.contact[id] = termTime{term, sent}
	}
}

// heardSince reports whether id answered, in term, a request sent at or
// after t.
func (p *progressTracker) heardSince(id raft.ServerID, term uint64, t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.contact[id]
	return c.term == term && !c.sent.Before(t)
}

// forget drops what is known of id: a server that joins again under the
// same ID may come back with an empty disk.
func (p *progressTracker) forget(id raft.ServerID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.match, id)
	delete(p.contact, id)
}

// observedPipeline passes the futures of a pipelined AppendEntries through
// to raft unchanged, recording on the way each successful response. Its
// goroutine is owned by the pipeline and ends on Close, which raft calls
// when it stops pipelining to the peer.
type observedPipeline struct {
	raft.AppendPipeline
	id        raft.ServerID
	progress  *progressTracker
	ch        chan raft.AppendFuture
	stopC     chan struct{}
	doneC     chan struct{}
	closeOnce sync.Once
}

func newObservedPipeline(p raft.AppendPipeline, id raft.ServerID, progress *progressTracker) *observedPipeline {
	o := &observedPipeline{
		AppendPipeline: p,
		id:             id,
		progress:       progress,
		ch:             make(chan raft.AppendFuture),
		stopC:          make(chan struct{}),
		doneC:          make(chan struct{}),
	}
	go o.run()
	return o
}

func (o *observedPipeline) run() {
	defer close(o.doneC)
	in := o.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			o.progress.observeAppend(o.id, f.Request(), f.Response(), f.Start())
			select {
			case o.ch <- f:
			case <-o.stopC:
				return
			}
		case <-o.stopC:
			return
		}
	}
}

func (o *observedPipeline) Consumer() <-chan raft.AppendFuture { return o.ch }

func (o *observedPipeline) Close() error {
	err := o.AppendPipeline.Close()
	o.closeOnce.Do(func() { close(o.stopC) })
	<-o.doneC
	return err
}
