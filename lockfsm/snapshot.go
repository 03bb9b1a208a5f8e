package lockfsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// A snapshot is the FSM's term, the table's token state (floor and
// per-slot counters) and every lock as Dump reports it, deadlines as time
// left on the snapshotting replica's clock: a restoring replica counts
// them from its own now, so a lease ends no earlier there than here.
// Version 2 adds, after the locks, the sessions of tagged entries, least
// recently used first; then the wait queues, lock by lock in key order,
// each in the order it is served, every wait with its waiter id, number
// and time left on the same clock; then the grants made from the queues
// that an OpCancelWait may still release, oldest first. A version 1
// snapshot restores with none of these. Version 3 adds MACQUIRE ... WAIT
// (OpWaitAll): each queued wait says whether it is one, and if so carries
// its progress (locker.MultiWaitState: the keys it took, with their tokens,
// and the rest); each grant has one or more leases.

var (
	snapshotMagic   = []byte("leasehold-fsm-3\n")
	snapshotMagicV2 = []byte("leasehold-fsm-2\n")
	snapshotMagicV1 = []byte("leasehold-fsm-1\n")
)

func encodeSnapshot(t *locker.Table, term uint64, ss *sessions, ws *waits) ([]byte, error) {
	b := append([]byte(nil), snapshotMagic...)
	b = binary.AppendUvarint(b, term)
	floor, counters := t.TokenState()
	b = binary.AppendUvarint(b, floor)
	b = binary.AppendUvarint(b, uint64(len(counters)))
	for _, c := range counters {
		b = binary.AppendUvarint(b, c)
	}
	now := int64(t.Config().Clock.Now())
	t.Dump(func(st *locker.LockState) {
		b = append(b, 1) // a lock follows
		b = appendBytes(b, st.Key)
		b = appendBool(b, st.Created)
		b = binary.AppendVarint(b, int64(st.Options.DefaultTTL))
		b = binary.AppendVarint(b, int64(st.Options.LockDelay))
		b = appendBool(b, st.Options.LockDelaySet)
		b = binary.AppendVarint(b, int64(st.Options.Limit))
		b = binary.AppendUvarint(b, st.LastToken)
		b = binary.AppendUvarint(b, uint64(len(st.Leases)))
		for _, l := range st.Leases {
			b = binary.AppendUvarint(b, l.Token)
			b = binary.AppendUvarint(b, uint64(l.Renewals))
			b = appendBytes(b, l.Owner)
			b = appendBool(b, l.Shared)
			delayed := l.DelayedUntil != 0
			b = appendBool(b, delayed)
			if delayed {
				b = binary.AppendVarint(b, l.DelayedUntil-now)
			} else {
				b = binary.AppendVarint(b, l.Deadline-now)
			}
		}
	})
	b = append(b, 0) // no more locks
	b = binary.AppendUvarint(b, uint64(ss.len()))
	var results []byte
	ss.each(func(client string, s *session) {
		b = appendBytes(b, []byte(client))
		b = binary.AppendUvarint(b, s.seq)
		b = binary.AppendUvarint(b, s.last)
		results = AppendResults(results[:0], s.results)
		b = appendBytes(b, results)
	})
	return appendWaits(b, t, ws, now)
}

func appendWaits(b []byte, t *locker.Table, ws *waits, now int64) ([]byte, error) {
	b = binary.AppendUvarint(b, ws.number)
	var keys []string
	for _, w := range ws.queued {
		keys = append(keys, string(w.key))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		q := t.Queue([]byte(k))
		b = appendBytes(b, []byte(k))
		b = binary.AppendUvarint(b, uint64(len(q)))
		for _, qw := range q {
			w := ws.byHandle[qw.Wait]
			if w == nil {
				return nil, fmt.Errorf("lockfsm: snapshot: a wait queued for %q that is not the FSM's", k)
			}
			b = appendBytes(b, []byte(w.waiter))
			b = binary.AppendUvarint(b, w.number)
			b = appendBytes(b, qw.Owner)
			b = binary.AppendVarint(b, int64(qw.TTL))
			b = binary.AppendVarint(b, int64(qw.Priority))
			b = appendBool(b, qw.Mode == locker.Shared)
			b = binary.AppendVarint(b, w.deadline-now)
			b = appendBool(b, w.multi != nil)
			if w.multi != nil {
				b = appendMultiWait(b, w.multi)
			}
		}
	}
	b = binary.AppendUvarint(b, uint64(ws.grants.len()))
	ws.grants.each(func(it *item[grant]) {
		b = appendBytes(b, []byte(it.key))
		b = binary.AppendUvarint(b, uint64(len(it.val.keys)))
		for j, key := range it.val.keys {
			b = appendBytes(b, key)
			b = binary.AppendUvarint(b, it.val.tokens[j])
		}
	})
	return b, nil
}

// appendMultiWait encodes an OpWaitAll's progress.
func appendMultiWait(b []byte, mw *locker.MultiWait) []byte {
	st, _ := mw.State()
	b = binary.AppendUvarint(b, uint64(len(st.Keys)))
	for j, key := range st.Keys {
		b = appendBytes(b, key)
		b = binary.AppendUvarint(b, uint64(st.Order[j]))
	}
	b = binary.AppendUvarint(b, uint64(st.Next))
	for _, token := range st.Tokens {
		b = binary.AppendUvarint(b, token)
	}
	b = binary.AppendVarint(b, int64(st.TTL))
	b = binary.AppendVarint(b, int64(st.Hold))
	b = appendBytes(b, st.Owner)
	b = binary.AppendVarint(b, int64(st.Priority))
	return appendBool(b, st.Mode == locker.Shared)
}

// multiWait decodes an OpWaitAll's progress into w, for waiter in ws.
func (d *decoder) multiWait(ws *waits, w *wait) error {
	n := d.Uvarint()
	if n == 0 || n > uint64(len(d.B)) {
		return ErrBadEntry
	}
	var st locker.MultiWaitState
	st.Keys, st.Order = make([][]byte, n), make([]int, n)
	for j := range st.Keys {
		st.Keys[j] = d.Bytes()
		order := d.Uvarint()
		if order >= n {
			return ErrBadEntry
		}
		st.Order[j] = int(order)
	}
	next := d.Uvarint()
	if next >= n {
		return ErrBadEntry
	}
	st.Next = int(next)
	st.Tokens = make([]uint64, next)
	for j := range st.Tokens {
		st.Tokens[j] = d.Uvarint()
	}
	st.TTL, st.Hold = time.Duration(d.Varint()), time.Duration(d.Varint())
	st.Owner, st.Priority, st.Mode = d.Bytes(), int(d.Varint()), modeOf(d.bool())
	if len(st.Owner) == 0 {
		st.Owner = nil
	}
	if d.Err != nil {
		return d.Err
	}
	mw, handle, err := locker.RestoreMultiWait(st, func() { ws.moved = append(ws.moved, w) })
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	w.multi, w.handle = mw, handle
	w.keys = make([][]byte, n)
	for j, at := range st.Order {
		w.keys[at] = bytes.Clone(st.Keys[j])
	}
	if !bytes.Equal(w.key, st.Keys[st.Next]) {
		return fmt.Errorf("%w: a MACQUIRE wait queued for a key it does not wait for", ErrBadEntry)
	}
	return nil
}

// decodeSnapshot installs a snapshot into t, new and empty, and its
// sessions and waits into ss and ws, and returns its term.
func decodeSnapshot(b []byte, t *locker.Table, ss *sessions, ws *waits) (uint64, error) {
	var version int
	switch {
	case bytes.HasPrefix(b, snapshotMagic):
		version = 3
	case bytes.HasPrefix(b, snapshotMagicV2):
		version = 2
	case bytes.HasPrefix(b, snapshotMagicV1):
		version = 1
	default:
		return 0, fmt.Errorf("%w: not a lock table snapshot", ErrBadEntry)
	}
	d := newDecoder(b[len(snapshotMagic):])
	term, floor := d.Uvarint(), d.Uvarint()
	n := d.Uvarint()
	if n > uint64(len(d.B)) {
		return 0, ErrBadEntry
	}
	counters := make([]uint64, n)
	for i := range counters {
		counters[i] = d.Uvarint()
	}
	if d.Err != nil {
		return 0, d.Err
	}
	if err := t.RestoreTokenState(floor, counters); err != nil {
		return 0, err
	}
	now := int64(t.Config().Clock.Now())
	for d.bool() {
		st := locker.LockState{Key: d.Bytes(), Created: d.bool()}
		st.Options.DefaultTTL = time.Duration(d.Varint())
		st.Options.LockDelay = time.Duration(d.Varint())
		st.Options.LockDelaySet = d.bool()
		st.Options.Limit = int(d.Varint())
		st.LastToken = d.Uvarint()
		leases := d.Uvarint()
		if leases > uint64(len(d.B)) {
			return 0, ErrBadEntry
		}
		for range leases {
			l := locker.LeaseState{Token: d.Uvarint(), Renewals: d.uint32(), Owner: d.Bytes(), Shared: d.bool()}
			if len(l.Owner) == 0 {
				l.Owner = nil
			}
			if d.bool() {
				l.DelayedUntil = now + d.Varint()
			} else {
				l.Deadline = now + d.Varint()
			}
			st.Leases = append(st.Leases, l)
		}
		if d.Err != nil {
			return 0, d.Err
		}
		if err := t.Restore(&st); err != nil {
			return 0, err
		}
	}
	if version >= 2 {
		n := d.Uvarint()
		if n > uint64(len(d.B)) {
			return 0, ErrBadEntry
		}
		for range n {
			client, seq, last := d.Bytes(), d.Uvarint(), d.Uvarint()
			encoded := d.Bytes()
			if d.Err != nil {
				return 0, d.Err
			}
			if len(client) == 0 || ss.get(client) != nil {
				return 0, fmt.Errorf("%w: a session with an empty or repeated client", ErrBadEntry)
			}
			results, err := DecodeResults(encoded)
			if err != nil {
				return 0, err
			}
			ss.record(Tag{Client: bytes.Clone(client), Seq: seq}, results, last)
		}
		if err := d.waits(t, ws, now, version); err != nil {
			return 0, err
		}
	}
	if d.Err != nil {
		return 0, d.Err
	}
	if len(d.B) != 0 {
		return 0, fmt.Errorf("%w: %d bytes after the snapshot", ErrBadEntry, len(d.B))
	}
	return term, nil
}

// waits installs the wait queues and grants of a snapshot.
func (d *decoder) waits(t *locker.Table, ws *waits, now int64, version int) error {
	ws.number = d.Uvarint()
	keys := d.Uvarint()
	if keys > uint64(len(d.B)) {
		return ErrBadEntry
	}
	for range keys {
		key, n := d.Bytes(), d.Uvarint()
		if n > uint64(len(d.B)) {
			return ErrBadEntry
		}
		q := make([]locker.QueuedWait, n)
		for j := range q {
			waiter, number := d.Bytes(), d.Uvarint()
			w := ws.newWait(waiter, key)
			w.number = number
			q[j] = locker.QueuedWait{Wait: w.handle, Owner: d.Bytes(), TTL: time.Duration(d.Varint()), Priority: int(d.Varint())}
			if len(q[j].Owner) == 0 {
				q[j].Owner = nil
			}
			q[j].Mode = modeOf(d.bool())
			w.deadline = now + d.Varint()
			if version >= 3 && d.bool() {
				if err := d.multiWait(ws, w); err != nil {
					return err
				}
				q[j].Wait = w.handle
			}
			if d.Err != nil {
				return d.Err
			}
			if len(waiter) == 0 || ws.queued[w.waiter] != nil || number == 0 || number > ws.number {
				return fmt.Errorf("%w: a wait with no id, a repeated id or a number out of range", ErrBadEntry)
			}
			ws.add(w)
		}
		if err := t.RestoreQueue(key, q); err != nil {
			return err
		}
	}
	grants := d.Uvarint()
	if grants > uint64(len(d.B)) {
		return ErrBadEntry
	}
	for range grants {
		waiter, leases := d.Bytes(), uint64(1)
		if version >= 3 {
			leases = d.Uvarint()
		}
		if leases == 0 || leases > uint64(len(d.B)) {
			return ErrBadEntry
		}
		g := grant{keys: make([][]byte, leases), tokens: make([]uint64, leases)}
		for j := range g.keys {
			g.keys[j], g.tokens[j] = bytes.Clone(d.Bytes()), d.Uvarint()
		}
		if d.Err != nil {
			return d.Err
		}
		if ws.grants.get(waiter) != nil {
			return fmt.Errorf("%w: a repeated grant", ErrBadEntry)
		}
		ws.putGrant(waiter, g)
	}
	return d.Err
}
