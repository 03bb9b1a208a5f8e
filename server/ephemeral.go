package server

import (
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/protocol"
)

// maxEphemeral bounds the EPHEMERAL leases one connection keeps track of, so
// that a client cannot grow the server's memory without bound through them.
const maxEphemeral = 1 << 16

var errTooManyEphemeral = protocol.TooManyEphemeralError(maxEphemeral)

// ephemeralTies records which connection an EPHEMERAL lease is tied to. It
// is the server's, not the connection's, because an OWNER retry can hand the
// same lease to a new connection (after the old one broke, say): the tie
// then moves with it, and the old connection's close must leave it alone.
// A tie is per lease, not per key: the readers of a SHARED lock or the
// holders of a semaphore's permits may each be tied to a connection of their
// own.
type ephemeralTies struct {
	mu      sync.Mutex // guards byLease
	byLease map[lease]*conn
	// count mirrors len(byLease) so that the hot path, grants and releases
	// with no EPHEMERAL lease anywhere, takes neither the lock nor a copy of
	// the key.
	count atomic.Int64
}

// lease names one lease: a lock and a token.
type lease struct {
	key   string
	token uint64
}

// granted records that c was granted key's lease token. An EPHEMERAL grant
// ties the lease to c; any other grant of the same token (the owner's retry
// without EPHEMERAL) unties it.
func (t *ephemeralTies) granted(c *conn, key []byte, token uint64, ephemeral bool) {
	if !ephemeral && t.count.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l := lease{string(key), token}
	_, tied := t.byLease[l]
	switch {
	case ephemeral:
		if t.byLease == nil {
			t.byLease = make(map[lease]*conn)
		}
		if !tied {
			t.count.Add(1)
		}
		t.byLease[l] = c
		if c.ephemeral == nil {
			c.ephemeral = make(map[lease]struct{})
		}
		c.ephemeral[l] = struct{}{}
	case tied:
		t.drop(l)
	}
}

// drop deletes a lease's tie; the caller holds mu.
func (t *ephemeralTies) drop(l lease) {
	delete(t.byLease, l)
	t.count.Add(-1)
}

// untie forgets the tie of key's lease token, if it is c's.
func (t *ephemeralTies) untie(c *conn, key []byte, token uint64) {
	if t.count.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l := lease{string(key), token}
	if t.byLease[l] == c {
		t.drop(l)
	}
}

// closed takes every lease still tied to c and returns them for release.
func (t *ephemeralTies) closed(c *conn) []lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	var leases []lease
	for l := range c.ephemeral {
		if t.byLease[l] == c {
			leases = append(leases, l)
			t.drop(l)
		}
	}
	return leases
}

// takeAll takes every lease still tied to a connection and returns them
// for release: the shutdown's, for connections it had to cut short. The
// connections' own sets are left alone (they belong to their goroutines);
// closed finds nothing of theirs tied any more.
func (t *ephemeralTies) takeAll() []lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	leases := make([]lease, 0, len(t.byLease))
	for l := range t.byLease {
		leases = append(leases, l)
		t.drop(l)
	}
	return leases
}

// roomForEphemeral makes sure c can tie n more leases, first forgetting
// leases whose tie has moved on or that have ended.
func (c *conn) roomForEphemeral(n int) error {
	if len(c.ephemeral)+n <= maxEphemeral {
		return nil
	}
	ties := &c.srv.ties
	ties.mu.Lock()
	for l := range c.ephemeral {
		if ties.byLease[l] != c || !c.srv.lockTable().Verify([]byte(l.key), l.token) {
			delete(c.ephemeral, l)
		}
	}
	ties.mu.Unlock()
	if len(c.ephemeral)+n > maxEphemeral {
		return errTooManyEphemeral
	}
	return nil
}

// releaseEphemeral ends every lease still tied to c; it runs when the
// connection closes, however it closes. A lease that already ended, or
// passed to someone else, is left alone: RELEASE checks the token.
func (c *conn) releaseEphemeral() {
	for _, l := range c.srv.ties.closed(c) {
		c.srv.applier.releaseLater([]byte(l.key), l.token)
	}
	c.ephemeral = nil
}
