package lockfsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
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

	// Used by Apply, Snapshot and Restore only, which raft calls one at a
	// time; but for the waits' due heap, which CollectDue reads.
	sessions *sessions
	waits    atomic.Pointer[waits]
	onGrant  func(waiter, key []byte, tokens []uint64)

	settings   string                 // Settings
	mismatch   atomic.Pointer[string] // the leader's settings if not ours (OpSettings)
	onMismatch func(own, leader string)
}

// Option sets up an FSM at New.
type Option func(*FSM)

// OnGrant has fn called when a queued wait (OpWait or OpWaitAll) ends
// otherwise than by its own OpCancelWait, in the apply of the entry that
// ended it, on every replica: with the tokens when the lock was handed to
// it (one; an OpWaitAll's in the order of its keys) by a RELEASE, an expiry
// or lock-delay's end through OpFire, a FORCE-RELEASE, a cancel ahead of
// it, or with nil when it ended ungranted (its deadline passed, through
// OpFire, or a WAIT of the same owner took its place; an OpWaitAll's also
// when a key it took on its way was lost). fn runs on the applying
// goroutine, after the command that ended the wait: it must not block or
// call into the FSM. key is the key the wait stood in the queue of last.
// It may keep waiter, key and tokens, but not change them.
func OnGrant(fn func(waiter, key []byte, tokens []uint64)) Option {
	return func(f *FSM) { f.onGrant = fn }
}

// Result is what one command did, for the server to answer its client.
type Result struct {
	// Token is ACQUIRE's token; Tokens MACQUIRE's, in the order of its
	// keys. Both are set only when Granted. For OpOwnedTTL, Token is the
	// milliseconds left on the owner's lease.
	//
	// For the owner's operations (OpReleaseOwned, OpExtendOwned,
	// OpExtendAllOwned, OpOwnedTTL), N is the locker.Owned they found.
	Token  uint64
	Tokens []uint64
	// Granted: ACQUIRE and MACQUIRE granted, RELEASE released, EXTEND
	// extended, CREATE created, DELETE deleted.
	Granted bool
	// N is what FORCE-RELEASE ended, or how many items a FIRE ended
	// (leases, lock-delays, waits); for END-SESSION, 1 if the session was
	// known; for CANCEL-WAIT, 1 if the wait had been granted and its lease
	// was released (then Token is that lease's).
	N int
	// Queued: WAIT did not grant the lease now, and the request waits in
	// the lock's queue (see OpWait).
	Queued bool
	// Err is the lock table's refusal (locker's errors), as on one node.
	Err error
}

// New returns an FSM over a new, empty table with cfg in replicated mode.
// cfg.Clock is the replica's own: it stamps soft deadlines, decides nothing.
// Every replica must start from the same token floor, cfg.FirstToken (1
// will do: each leader raises the floor when its term begins, OpTerm).
func New(cfg locker.Config, opts ...Option) (*FSM, error) {
	cfg.Replicated = true
	t, err := locker.New(cfg)
	if err != nil {
		return nil, err
	}
	f := &FSM{cfg: cfg, sessions: newSessions(), settings: settingsOf(cfg)}
	for _, o := range opts {
		o(f)
	}
	f.table.Store(t)
	f.waits.Store(newWaits())
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
//
// A tagged entry (AppendTaggedEntry) is applied at most once: the FSM
// keeps, per Tag.Client, the last Seq applied and its results. An entry
// with that Seq again is not applied and answers with the recorded
// results; one with a lower Seq is not applied and answers ErrStaleRequest
// for each command. The table of sessions is bounded (MaxSessions, least
// recently used forgotten first) and ends with OpEndSession.
//
// A group entry (AppendGroupEntry) applies its members in order, each as
// if it were an entry of its own, and returns a []any of their answers.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if isGroupEntry(l.Data) {
		members, err := decodeGroupEntry(l.Data)
		if err != nil {
			return err
		}
		out := make([]any, len(members))
		for i, m := range members {
			out[i] = f.applyEntry(m, l.Index)
		}
		return out
	}
	return f.applyEntry(l.Data, l.Index)
}

// applyEntry applies one tagged entry of the log entry at index.
func (f *FSM) applyEntry(entry []byte, index uint64) any {
	tag, cmds, err := DecodeTaggedEntry(entry)
	if err != nil {
		return err
	}
	tagged := len(tag.Client) > 0
	if tagged {
		if s := f.sessions.get(tag.Client); s != nil {
			switch {
			case tag.Seq == s.seq:
				f.sessions.touch(tag.Client, index)
				return slices.Clone(s.results)
			case tag.Seq < s.seq:
				stale := make([]Result, len(cmds))
				for i := range stale {
					stale[i].Err = ErrStaleRequest
				}
				return stale
			}
		}
	}
	t := f.table.Load()
	results := make([]Result, len(cmds))
	for i := range cmds {
		results[i] = f.apply(t, &cmds[i])
		f.flushNotes(t)
	}
	if tagged && !endsSession(cmds, tag.Client) {
		f.sessions.record(tag, slices.Clone(results), index)
	}
	return results
}

// endsSession reports whether cmds end client's session.
func endsSession(cmds []Command, client []byte) bool {
	for i := range cmds {
		if cmds[i].Op == OpEndSession && bytes.Equal(cmds[i].Client, client) {
			return true
		}
	}
	return false
}

func (f *FSM) apply(t *locker.Table, c *Command) (r Result) {
	switch c.Op {
	case OpTerm:
		if c.Term > f.term.Load() {
			f.term.Store(c.Term)
		}
		t.RaiseTokenFloor(c.Floor)
	case OpCreate, OpRelease, OpExtend, OpDelete, OpForceRelease, OpReleaseOwned, OpExtendOwned, OpExtendAllOwned, OpOwnedTTL:
		r = Run(t, c)
	case OpAcquire, OpAcquireNew:
		if r = Run(t, c); r.Granted {
			f.waits.Load().claim(c.Key, r.Token)
		}
	case OpAcquireAll, OpAcquireAllNew:
		req := c.Request()
		r = f.acquireAll(t, &req)
	case OpFire:
		// Only the leader that decided these expiries may have them
		// applied: once a newer leader's term has begun, a deposed
		// leader's decision is stale (etcd#12528).
		if c.Term == f.term.Load() {
			r.N = f.fire(t, c.Due)
		}
	case OpEndSession:
		if f.sessions.end(c.Client) {
			r.N = 1
		}
	case OpWait:
		r = f.applyWait(t, c)
	case OpWaitAll:
		r = f.applyWaitAll(t, c)
	case OpGrace:
		r.N = applyGrace(t, c.TTL)
	case OpCancelWait:
		r = f.applyCancelWait(t, c)
	case OpSettings:
		// Changes nothing replicated: it tells this replica whether it
		// applies entries as the leader does.
		if string(c.Settings) == f.settings {
			f.mismatch.Store(nil)
			r.N = 1
		} else {
			leader := string(c.Settings)
			if old := f.mismatch.Swap(&leader); (old == nil || *old != leader) && f.onMismatch != nil {
				f.onMismatch(f.settings, leader)
			}
		}
	default:
		r.Err = errBadOp(c.Op)
	}
	return r
}

// fire applies an OpFire's items in order: leases and lock-delays by the
// table, waits here.
func (f *FSM) fire(t *locker.Table, due []locker.Due) (n int) {
	for i := range due {
		switch {
		case due[i].Kind == locker.DueWait:
			if f.fireWait(t, &due[i]) {
				n++
			}
		default:
			n += t.Fire(due[i : i+1])
		}
	}
	return n
}

// CollectDue is what the leader proposes in an OpFire: up to limit items
// whose time has passed by this replica's clock: leases and lock-delays
// (locker.Table.CollectDue), then waits past their deadline. Like the
// table's, it reports an item at most once per locker.DueRetry. It may be
// called from any goroutine, one at a time.
func (f *FSM) CollectDue(limit int) []locker.Due {
	t, ws := f.table.Load(), f.waits.Load()
	due := t.CollectDue(limit)
	return ws.collectDue(int64(t.Config().Clock.Now()), limit, due)
}

// errBadOp is the error of a command whose op this FSM does not know.
func errBadOp(op Op) error { return fmt.Errorf("%w: op %d", ErrBadEntry, op) }

// Snapshot implements raft.FSM: an exact copy of the table, made in memory
// while raft applies nothing; Persist writes it out meanwhile.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	b, err := encodeSnapshot(f.table.Load(), f.term.Load(), f.sessions, f.waits.Load())
	if err != nil {
		return nil, err
	}
	return snapshot(b), nil
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
	ss, ws := newSessions(), newWaits()
	ss.max, ws.maxGrants = f.sessions.max, f.waits.Load().maxGrants
	term, err := decodeSnapshot(b, t, ss, ws)
	if err != nil {
		t.Close()
		return errors.Join(errors.New("lockfsm: restoring a snapshot"), err)
	}
	old := f.table.Swap(t)
	f.waits.Store(ws)
	f.term.Store(term)
	f.sessions = ss
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
