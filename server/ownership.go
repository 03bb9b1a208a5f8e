package server

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"

	"github.com/leasehold/leasehold/internal/ownerscope"
	"github.com/leasehold/leasehold/protocol"
)

// Owner ids and tokens per user. Without users, a token is a capability:
// whoever has it, or guesses it (tokens count up), may RELEASE or EXTEND
// the lease, and an owner id lets anyone take over the lease or its place
// in a queue. A user who is not an admin therefore works in a scope of its
// own, its user name and a NUL byte, the scope the lock table is told about:
//
//   - every owner id it gives (ACQUIRE and MACQUIRE's OWNER) is stored with
//     the scope in front, so another user's OWNER, even the same bytes,
//     names another owner: no one takes over its leases or queue places;
//   - a lease it takes without OWNER gets an owner id made up here (the
//     scope, a NUL, a number never used before), so the lease too is its;
//   - RELEASE, MRELEASE and EXTEND act only on leases in its scope
//     (locker.Table.ReleaseScoped), whatever token it sends;
//   - STATUS, HOLDERS and events show it the token and owner of its own
//     leases only (ownerView, eventView).
//
// An admin (and the default user of a server without an ACL file, which may
// run everything) has no scope: it acts on every lease and sees every
// token, with another user's owner ids shown as user:owner.

// scopeUser names c's user and reports whether it works in an owner
// scope: a user that is not an admin.
func (c *conn) scopeUser() (name string, scoped bool) {
	if u := c.user; u != nil && !u.Admin() {
		return u.Name, true
	}
	return "", false
}

// hasScopedUsers reports whether any user works in an owner scope, so that
// admins see scoped owner ids as user:owner.
func (s *Server) hasScopedUsers() bool { return s.users.Load().HasNonAdmins() }

// ownerScope returns the scope of c's user, or nil when c acts on every
// lease. It is cached on c for the user it was made for.
func (c *conn) ownerScope() []byte {
	name, scoped := c.scopeUser()
	if !scoped {
		return nil
	}
	if c.scope == nil || string(c.scope[:len(c.scope)-1]) != name {
		c.scope = append(append(make([]byte, 0, len(name)+1), name...), ownerscope.Sep)
	}
	return c.scope
}

// scopedOwner is the owner id the lock table gets for owner, an ACQUIRE's
// or MACQUIRE's OWNER (nil when none was given), from c.
func (c *conn) scopedOwner(owner []byte) []byte {
	scope := c.ownerScope()
	if scope == nil {
		return owner
	}
	buf := append(c.ownerBuf[:0], scope...)
	if owner == nil {
		buf = c.srv.owners.appendAnonymous(buf)
	} else {
		buf = append(buf, owner...)
	}
	c.ownerBuf = buf
	return buf
}

// ownerNumbers makes the owner ids of leases a scoped user took without
// OWNER. They must never repeat, not even across restarts with a data
// directory, or an anonymous ACQUIRE could renew an old lease of the same
// user instead of being refused: a random number drawn at start and a
// count.
type ownerNumbers struct {
	run  [8]byte
	next atomic.Uint64
}

func newOwnerNumbers() *ownerNumbers {
	o := &ownerNumbers{}
	rand.Read(o.run[:]) // crypto/rand.Read never fails (Go 1.24+)
	return o
}

// appendAnonymous appends a made-up owner id, which starts with ownerscope.Sep so
// that views tell it from one a client gave (see ownerscope.Show).
func (o *ownerNumbers) appendAnonymous(buf []byte) []byte {
	buf = append(buf, ownerscope.Sep)
	buf = append(buf, o.run[:]...)
	return binary.BigEndian.AppendUint64(buf, o.next.Add(1))
}

// ownerView is how STATUS and HOLDERS show leases to c: nil (as stored) on
// a server without scoped users, else by ownerscope.Show.
func (c *conn) ownerView() protocol.OwnerView {
	scope := c.ownerScope()
	if scope == nil && !c.srv.hasScopedUsers() {
		return nil
	}
	return func(owner string) (string, bool) { return ownerscope.Show(owner, scope) }
}

// setEventView records, for the goroutines that publish events, how c sees
// them (viewedFrames): called as c subscribes, by c's own command runner.
func (c *conn) setEventView() {
	scope := c.ownerScope()
	if scope == nil && !c.srv.hasScopedUsers() {
		c.eventView.Store(nil)
		return
	}
	if v := c.eventView.Load(); v == nil || string(v.scope) != string(scope) {
		c.eventView.Store(&eventView{scope: scope})
	}
}

// mayUnblock reports whether c may end target's wait with CLIENT UNBLOCK:
// an admin may end anyone's, a user in a scope only its own user's. To
// anyone else, another user's blocked client is as one that is not blocked
// (CLIENT UNBLOCK answers 0), so that sweeping the ids learns nothing.
func (c *conn) mayUnblock(target *conn) bool {
	name, scoped := c.scopeUser()
	if !scoped {
		return true
	}
	u := target.userShared.Load()
	return u != nil && u.Name == name
}
