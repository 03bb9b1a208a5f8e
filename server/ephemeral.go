package server

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/leasehold/leasehold/protocol"
)

// maxEphemeral bounds the EPHEMERAL leases one connection keeps track of, so
// that a client cannot grow the server's memory without bound through them.
const maxEphemeral = 1 << 16

var errTooManyEphemeral = &protocol.Error{Code: protocol.CodeErr,
	Msg: "too many EPHEMERAL leases on this connection (" + strconv.Itoa(maxEphemeral) + "); release some first"}

// ephemeralTies records which connection an EPHEMERAL lease is tied to. It
// is the server's, not the connection's, because an OWNER retry can hand the
// same lease to a new connection (after the old one broke, say): the tie
// then moves with it, and the old connection's close must leave it alone.
type ephemeralTies struct {
	mu    sync.Mutex // guards byKey
	byKey map[string]tie
	// count mirrors len(byKey) so that the hot path, grants and releases
	// with no EPHEMERAL lease anywhere, takes neither the lock nor a copy of
	// the key.
	count atomic.Int64
}

type tie struct {
	c     *conn
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
	old, tied := t.byKey[string(key)]
	switch {
	case ephemeral:
		if t.byKey == nil {
			t.byKey = make(map[string]tie)
		}
		k := string(key)
		if !tied {
			t.count.Add(1)
		}
		t.byKey[k] = tie{c, token}
		if c.ephemeral == nil {
			c.ephemeral = make(map[string]struct{})
		}
		c.ephemeral[k] = struct{}{}
	case tied && old.token == token:
		t.drop(string(key))
	}
}

// drop deletes key's tie; the caller holds mu.
func (t *ephemeralTies) drop(key string) {
	delete(t.byKey, key)
	t.count.Add(-1)
}

// untie forgets key's tie to c, if it is c's and for token.
func (t *ephemeralTies) untie(c *conn, key []byte, token uint64) {
	if t.count.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byKey[string(key)]; ok && old.c == c && old.token == token {
		t.drop(string(key))
	}
}

// closed takes every lease still tied to c and returns them for release.
func (t *ephemeralTies) closed(c *conn) map[string]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var leases map[string]uint64
	for key := range c.ephemeral {
		if old, ok := t.byKey[key]; ok && old.c == c {
			if leases == nil {
				leases = make(map[string]uint64)
			}
			leases[key] = old.token
			t.drop(key)
		}
	}
	return leases
}

// roomForEphemeral makes sure c can tie one more lease, first forgetting
// keys whose tie has moved on or whose lease has ended.
func (c *conn) roomForEphemeral() error {
	if len(c.ephemeral) < maxEphemeral {
		return nil
	}
	ties := &c.srv.ties
	ties.mu.Lock()
	for key := range c.ephemeral {
		if t, ok := ties.byKey[key]; !ok || t.c != c || !c.srv.table.Verify([]byte(key), t.token) {
			delete(c.ephemeral, key)
		}
	}
	ties.mu.Unlock()
	if len(c.ephemeral) >= maxEphemeral {
		return errTooManyEphemeral
	}
	return nil
}

// releaseEphemeral ends every lease still tied to c; it runs when the
// connection closes, however it closes. A lease that already ended, or
// passed to someone else, is left alone: RELEASE checks the token.
func (c *conn) releaseEphemeral() {
	for key, token := range c.srv.ties.closed(c) {
		c.srv.table.Release([]byte(key), token)
	}
	c.ephemeral = nil
}
