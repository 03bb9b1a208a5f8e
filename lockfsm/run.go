package lockfsm

import "github.com/leasehold/leasehold/locker"

// Run applies c, one of the commands a client's request becomes (OpCreate,
// OpAcquire, OpAcquireAll, OpRelease, OpExtend, OpDelete, OpForceRelease,
// and the Redis lock libraries' OpAcquireNew, OpAcquireAllNew,
// OpReleaseOwned, OpExtendOwned, OpExtendAllOwned, OpOwnedTTL),
// to t, and returns what it did. It is the one place these commands meet
// the table: a single node runs them with it on its own table, and the FSM
// applies them with it on every replica (adding what waits need). It
// allocates nothing but what the table does (MACQUIRE's tokens). Any other
// op is refused with ErrBadEntry.
func Run(t *locker.Table, c *Command) (r Result) {
	RunInto(t, c, &r)
	return r
}

// RunInto is Run writing its result to *r: a single node keeps its
// results in the connection's scratch, where a Result returned by value
// would be copied in again (72 bytes, with pointers), every command.
func RunInto(t *locker.Table, c *Command, r *Result) {
	*r = Result{}
	switch c.Op {
	case OpCreate:
		r.Granted, r.Err = t.Create(c.Key, c.Options)
	case OpAcquire:
		req := c.Request()
		r.Token, r.Granted, r.Err = t.Acquire(&req)
	case OpAcquireAll, OpAcquireAllNew:
		req := c.Request()
		r.Tokens, r.Granted, r.Err = t.AcquireAll(&req)
	case OpAcquireNew:
		req := c.Request()
		r.Token, r.Granted, r.Err = t.Acquire(&req)
	case OpReleaseOwned:
		r.N = int(t.ReleaseOwned(c.Key, c.Owner, c.Scope))
		r.Granted = r.N == int(locker.OwnedDone)
	case OpExtendOwned:
		var owned locker.Owned
		owned, r.Err = t.ExtendOwned(c.Key, c.Owner, c.Scope, c.TTL, c.AddTTL)
		r.N, r.Granted = int(owned), owned == locker.OwnedDone
	case OpExtendAllOwned:
		var owned locker.Owned
		owned, r.Err = t.ExtendAllOwned(c.Keys, c.Owner, c.TTL)
		r.N, r.Granted = int(owned), owned == locker.OwnedDone
	case OpOwnedTTL:
		owned, ttl := t.OwnedTTL(c.Key, c.Owner)
		r.N, r.Granted = int(owned), owned == locker.OwnedDone
		r.Token = uint64(ttl.Milliseconds()) // the time left, in ms, when Granted
	case OpRelease:
		r.Granted = t.ReleaseScoped(c.Key, c.Token, c.Scope)
	case OpExtend:
		r.Granted, r.Err = t.ExtendScoped(c.Key, c.Token, c.TTL, c.Scope)
	case OpDelete:
		r.Granted, r.Err = t.Delete(c.Key)
	case OpForceRelease:
		r.N = t.ForceRelease(c.Key, c.Token)
	default:
		r.Err = errBadOp(c.Op)
	}
}

// Request is the lock table's request of an acquiring command (OpAcquire,
// OpAcquireAll, OpWait, OpWaitAll): its key or keys, ttl, owner, mode, and
// for a wait its priority and how long it may wait.
func (c *Command) Request() locker.Request {
	return locker.Request{Key: c.Key, Keys: c.Keys, TTL: c.TTL, Owner: c.Owner, Mode: modeOf(c.Shared), Priority: c.Priority, Wait: c.Wait,
		NoRenew: c.Op == OpAcquireNew || c.Op == OpAcquireAllNew}
}

// modeOf is the lease mode of a command's Shared.
func modeOf(shared bool) locker.Mode {
	if shared {
		return locker.Shared
	}
	return locker.Exclusive
}
