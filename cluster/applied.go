package cluster

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// appliedFSM is the FSM a Node hands to raft: the caller's, plus a record
// of the highest log index whose entry the caller's FSM has applied, and a
// channel closed each time it rises, for WaitApplied. raft's own
// AppliedIndex cannot serve: it counts an entry as applied once it is
// queued for the FSM goroutine, before the FSM has seen it.
//
// It always implements raft.BatchingFSM, so it sees configuration entries
// as well as commands; for a caller's FSM that does not batch it applies
// the commands one by one, as raft would (configuration entries go to the
// caller only if it implements raft.ConfigurationStore). No-op and
// barrier entries never reach an FSM, so the index may stay below a
// trailing run of them; ReadIndex accounts for that (lastCommandAt).
type appliedFSM struct {
	inner raft.FSM
	snaps *openedSnapshots

	mu      sync.Mutex // guards index, changed
	index   uint64
	changed chan struct{}
}

func newAppliedFSM(inner raft.FSM, snaps *openedSnapshots) *appliedFSM {
	return &appliedFSM{inner: inner, snaps: snaps, changed: make(chan struct{})}
}

func (f *appliedFSM) Apply(l *raft.Log) any {
	resp := f.inner.Apply(l)
	f.raise(l.Index)
	return resp
}

func (f *appliedFSM) ApplyBatch(logs []*raft.Log) []any {
	var resps []any
	if b, ok := f.inner.(raft.BatchingFSM); ok {
		resps = b.ApplyBatch(logs)
	} else {
		resps = make([]any, len(logs))
		for i, l := range logs {
			switch l.Type {
			case raft.LogCommand:
				resps[i] = f.inner.Apply(l)
			case raft.LogConfiguration:
				if cs, ok := f.inner.(raft.ConfigurationStore); ok {
					cs.StoreConfiguration(l.Index, raft.DecodeConfiguration(l.Data))
				}
			}
		}
	}
	if n := len(logs); n > 0 {
		f.raise(logs[n-1].Index)
	}
	return resps
}

func (f *appliedFSM) Snapshot() (raft.FSMSnapshot, error) { return f.inner.Snapshot() }

// Restore restores the caller's FSM and sets the index to the restored
// snapshot's. raft opens a snapshot from the store just before restoring
// it, on the same goroutine, so the snapshot last opened is the one being
// restored (see openedSnapshots for the one exception).
func (f *appliedFSM) Restore(rc io.ReadCloser) error {
	if err := f.inner.Restore(rc); err != nil {
		return err
	}
	f.mu.Lock()
	f.index = f.snaps.lastOpened()
	f.notifyLocked()
	f.mu.Unlock()
	return nil
}

func (f *appliedFSM) raise(index uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if index > f.index {
		f.index = index
		f.notifyLocked()
	}
}

func (f *appliedFSM) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// state returns the index and a channel closed when it next changes.
func (f *appliedFSM) state() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.index, f.changed
}

// openedSnapshots is the snapshot store a Node hands to raft: the file
// store, remembering the index of the snapshot it last opened, which
// appliedFSM.Restore takes as the restored state's index. The one other
// reader of snapshots is a leader sending its latest to a follower; a
// node restores only as a follower (or on start, before it replicates),
// so the two meet only if a node that has just stepped down is sent a
// snapshot while its old replication goroutine is still opening its own.
type openedSnapshots struct {
	raft.SnapshotStore

	mu     sync.Mutex // guards opened
	opened uint64
}

func (s *openedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err == nil {
		s.mu.Lock()
		s.opened = meta.Index
		s.mu.Unlock()
	}
	return meta, rc, err
}

func (s *openedSnapshots) lastOpened() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened
}

// WaitApplied blocks until this node's FSM has applied every command up to
// index (ReadIndex's answer), or timeout passes (an error wrapping
// ErrTimeout), or the node closes (ErrClosed). It does not poll: the
// node's wrapper around Config.FSM records each applied entry's index and
// wakes the waiters.
func (n *Node) WaitApplied(index uint64, timeout time.Duration) error {
	var timer <-chan time.Time
	for {
		applied, changed := n.fsm.state()
		if applied >= index {
			return nil
		}
		if timer == nil {
			t := time.NewTimer(timeout)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-changed:
		case <-timer:
			return &outcomeError{kinds: []error{ErrTimeout}, cause: fmt.Errorf("applied index %d, not %d, after %s", applied, index, timeout)}
		case <-n.closeC:
			return ErrClosed
		}
	}
}
