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
	client     string
	seq        uint64
	results    []Result
	last       uint64 // log index
	prev, next *session
}

// sessions is the session table: by client, and in a list from the least
// to the most recently used. Entries use sessions in log order, so the
// list is in order of last index, the same on every replica; no map is
// iterated to decide anything.
type sessions struct {
	byClient   map[string]*session
	head, tail *session // least, most recently used
	max        int
}

func newSessions() *sessions {
	return &sessions{byClient: make(map[string]*session), max: MaxSessions}
}

func (ss *sessions) get(client []byte) *session { return ss.byClient[string(client)] }

func (ss *sessions) len() int { return len(ss.byClient) }

// record makes tag's session hold results, used at index, as the most
// recently used, and forgets the least recently used if the table is
// over its bound.
func (ss *sessions) record(tag Tag, results []Result, index uint64) {
	s := ss.get(tag.Client)
	if s == nil {
		s = &session{client: string(tag.Client)}
		ss.byClient[s.client] = s
	} else {
		ss.unlink(s)
	}
	s.seq, s.results, s.last = tag.Seq, results, index
	ss.pushBack(s)
	for len(ss.byClient) > ss.max {
		ss.drop(ss.head)
	}
}

// touch marks s as used at index.
func (ss *sessions) touch(s *session, index uint64) {
	ss.unlink(s)
	s.last = index
	ss.pushBack(s)
}

// end forgets client's session and reports whether there was one.
func (ss *sessions) end(client []byte) bool {
	s := ss.get(client)
	if s == nil {
		return false
	}
	ss.drop(s)
	return true
}

func (ss *sessions) drop(s *session) {
	ss.unlink(s)
	delete(ss.byClient, s.client)
}

func (ss *sessions) pushBack(s *session) {
	s.prev, s.next = ss.tail, nil
	if ss.tail != nil {
		ss.tail.next = s
	} else {
		ss.head = s
	}
	ss.tail = s
}

func (ss *sessions) unlink(s *session) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		ss.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		ss.tail = s.prev
	}
	s.prev, s.next = nil, nil
}

// each calls fn for every session, least recently used first.
func (ss *sessions) each(fn func(*session)) {
	for s := ss.head; s != nil; s = s.next {
		fn(s)
	}
}
