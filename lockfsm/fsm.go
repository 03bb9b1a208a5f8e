package lockfsm

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/leasehold/leasehold/locker"
)

// FSM applies committed entries to a lock table in replicated mode. Raft
// calls Apply, Snapshot and Restore one at a time, on one goroutine; the
// table may be read (Table) from any goroutine meanwhile.
type FSM struct {
	cfg   locker.Config
	table atomic.Pointer[locker.Table]
	term  atomic.Uint64 // the term of the last OpTerm applied: OpFire's guard
}

// Result is what one command did, for the server to answer its client.
type Result struct {
	// Token is ACQUIRE's token; Tokens MACQUIRE's, in the order of its
	// keys. Both are set only when Granted.
	Token  uint64
	Tokens []uint64
	// Granted: ACQUIRE and MACQUIRE granted, RELEASE released, EXTEND
	// extended, CREATE created, DELETE deleted.
	Granted bool
	// N is what FORCE-RELEASE ended, or how many expiries a FIRE applied.
	N int
	// Err is the lock table's refusal (locker's errors), as on one node.
	Err error
}

// New returns an FSM over a new, empty table with cfg in replicated mode.
// cfg.Clock is the replica's own: it stamps soft deadlines, decides nothing.
// Every replica must start from the same token floor, cfg.FirstToken (1
// will do: each leader raises the floor when its term begins, OpTerm).
func New(cfg locker.Config) (*FSM, error) {
	cfg.Replicated = true
	t, err := locker.New(cfg)
	if err != nil {
		return nil, err
	}
	f := &FSM{cfg: cfg}
	f.table.Store(t)
	return f, nil
}

// Table is the table as of the last entry applied. A Restore replaces it:
// read it again rather than keeping it.
func (f *FSM) Table() *locker.Table { return f.table.Load() }

// Term is the term of the last leader whose OpTerm was applied.
func (f *FSM) Term() uint64 { return f.term.Load() }

// Apply implements raft.FSM. A command entry's response is its []Result,
// or ErrBadEntry for bytes that do not decode: every replica refuses them
// alike, so the replicas stay the same.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmds, err := DecodeEntry(l.Data)
	if err != nil {
		return err
	}
	t := f.table.Load()
	results := make([]Result, len(cmds))
	for i := range cmds {
		results[i] = f.apply(t, &cmds[i])
	}
	return results
}

func (f *FSM) apply(t *locker.Table, c *Command) (r Result) {
	switch c.Op {
	case OpTerm:
		if c.Term > f.term.Load() {
			f.term.Store(c.Term)
		}
		t.RaiseTokenFloor(c.Floor)
	case OpCreate:
		r.Granted, r.Err = t.Create(c.Key, c.Options)
	case OpAcquire:
		r.Token, r.Granted, r.Err = t.Acquire(&locker.Request{Key: c.Key, TTL: c.TTL, Owner: c.Owner, Mode: modeOf(c.Shared)})
	case OpAcquireAll:
		r.Tokens, r.Granted, r.Err = t.AcquireAll(&locker.Request{Keys: c.Keys, TTL: c.TTL, Owner: c.Owner, Mode: modeOf(c.Shared)})
	case OpRelease:
		r.Granted = t.ReleaseScoped(c.Key, c.Token, c.Scope)
	case OpExtend:
		r.Granted, r.Err = t.ExtendScoped(c.Key, c.Token, c.TTL, c.Scope)
	case OpDelete:
		r.Granted, r.Err = t.Delete(c.Key)
	case OpForceRelease:
		r.N = t.ForceRelease(c.Key, c.Token)
	case OpFire:
		// Only the leader that decided these expiries may have them
		// applied: once a newer leader's term has begun, a deposed
		// leader's decision is stale (etcd#12528).
		if c.Term == f.term.Load() {
			r.N = t.Fire(c.Due)
		}
	default:
		r.Err = fmt.Errorf("%w: op %d", ErrBadEntry, c.Op)
	}
	return r
}

func modeOf(shared bool) locker.Mode {
	if shared {
		return locker.Shared
	}
	return locker.Exclusive
}

// Snapshot implements raft.FSM: an exact copy of the table, made in memory
// while raft applies nothing; Persist writes it out meanwhile.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return snapshot(encodeSnapshot(f.table.Load(), f.term.Load())), nil
}

// Restore implements raft.FSM: the table becomes the snapshot's, on a new
// table of the same configuration.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	t, err := locker.New(f.cfg)
	if err != nil {
		return err
	}
	term, err := decodeSnapshot(b, t)
	if err != nil {
		return errors.Join(errors.New("lockfsm: restoring a snapshot"), err)
	}
	old := f.table.Swap(t)
	f.term.Store(term)
	if old != nil {
		old.Close()
	}
	return nil
}

// snapshot is an encoded table.
type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (snapshot) Release() {}
