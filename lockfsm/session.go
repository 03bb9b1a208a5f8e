package lockfsm

import "errors"

// ErrStaleRequest is the result of every command of a tagged entry whose
// Seq is below the last one applied for its client: an older batch that
// arrives late (a retry overtaken by a newer batch). Nothing of it is
// applied.
var ErrStaleRequest = errors.New("lockfsm: stale request: a newer batch of its client was applied")

// MaxSessions bounds the session table: past it, the session used least
// recently (by log index) is forgotten, and a retry of its last batch
// would be applied again.
const MaxSessions = 1 << 16

// session is what the FSM remembers of one client: its last batch's Seq
// and results, and the index of the entry that last used it.
type session struct {
	seq     uint64
	results []Result
	last    uint64 // log index
}

// sessions is the session table, by client, from the least to the most
// recently used. Entries use sessions in log order, so the order is that
// of their last index, the same on every replica.
type sessions struct {
	o   *ordered[session]
	max int
}

func newSessions() *sessions { return &sessions{o: newOrdered[session](), max: MaxSessions} }

// get returns client's session, or nil.
func (ss *sessions) get(client []byte) *session {
	if it := ss.o.get(client); it != nil {
		return &it.val
	}
	return nil
}

func (ss *sessions) len() int { return ss.o.len() }

// record makes tag's session hold results, used at index, as the most
// recently used, and forgets the least recently used if the table is
// over its bound.
func (ss *sessions) record(tag Tag, results []Result, index uint64) {
	ss.o.put(tag.Client, session{seq: tag.Seq, results: results, last: index})
	for ss.o.len() > ss.max {
		ss.o.remove(ss.o.front())
	}
}

// touch marks client's session as used at index.
func (ss *sessions) touch(client []byte, index uint64) {
	it := ss.o.get(client)
	it.val.last = index
	ss.o.moveToBack(it)
}

// end forgets client's session and reports whether there was one.
func (ss *sessions) end(client []byte) bool {
	it := ss.o.get(client)
	if it == nil {
		return false
	}
	ss.o.remove(it)
	return true
}

// each calls fn for every session, least recently used first.
func (ss *sessions) each(fn func(client string, s *session)) {
	ss.o.each(func(it *item[session]) { fn(it.key, &it.val) })
}
