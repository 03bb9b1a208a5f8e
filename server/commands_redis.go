package server

import (
	"time"

	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
)

// The Redis commands that Redis lock libraries send (docs/redis-compat.md),
// each written once for both modes as the lock commands are: a key set
// with SET key value NX PX ms is a lock, its value the owner (scoped to the
// user as an ACQUIRE's OWNER is) and its ttl the lease, granted with a
// fencing token like any other.

func handleSet(c *conn, args [][]byte) error {
	req, err := protocol.ParseSet(args)
	if err != nil {
		return err
	}
	ttl := req.TTL
	if req.AtMillis != 0 {
		// A deadline already past takes the shortest lease: the key is set
		// and gone at once, as in Redis.
		ttl = max(untilUnixMillis(req.AtMillis), time.Millisecond)
	}
	cmds, cmd := c.scratch.cleared()
	cmd.Op, cmd.Key, cmd.TTL, cmd.Owner = lockfsm.OpAcquireNew, req.Key, ttl, c.scopedOwner(req.Value)
	return c.srv.applier.apply(c, cmds, lockReply{write: replySet})
}

// replySet is SET's reply: OK when the lock was taken, nil when it is held.
func replySet(c *conn, _ lockReply, _ []lockfsm.Command, res []lockfsm.Result) error {
	if res[0].Err != nil {
		return res[0].Err
	}
	if res[0].Granted {
		c.wr.WriteString("OK")
	} else {
		c.wr.WriteNull()
	}
	return nil
}

// untilUnixMillis is the time from now, by this node's clock, to the Unix
// time ms, as Redis's PXAT and PEXPIREAT read it.
func untilUnixMillis(ms int64) time.Duration {
	return time.Until(time.UnixMilli(ms))
}

// handleDel is DEL and UNLINK: every lease of each key in the user's scope
// (all of them for a user without one) is released.
func handleDel(c *conn, args [][]byte) error {
	keys := args[1:]
	cmds := c.scratch.commands(len(keys))
	for j, key := range keys {
		cmds[j] = lockfsm.Command{Op: lockfsm.OpReleaseOwned, Key: key, Scope: c.ownerScope()}
	}
	return c.srv.applier.apply(c, cmds, lockReply{write: replyCountGranted})
}

// replyCountGranted is the reply of DEL: how many of its commands did what
// they were asked.
func replyCountGranted(c *conn, _ lockReply, _ []lockfsm.Command, res []lockfsm.Result) error {
	n := 0
	for j := range res {
		if res[j].Err != nil {
			return res[j].Err
		}
		if res[j].Granted {
			n++
		}
	}
	c.wr.WriteInt(n)
	return nil
}

func handleExpire(c *conn, args [][]byte) error {
	cmd := protocol.Lookup(args[0]).Name
	req, err := protocol.ParseExpire(cmd, args)
	if err != nil {
		return err
	}
	ttl := req.TTL
	if req.Absolute {
		ttl = untilUnixMillis(req.AtMillis)
	}
	cmds := c.scratch.one()
	if ttl <= 0 {
		// As Redis deletes a key whose expire time has passed.
		cmds[0] = lockfsm.Command{Op: lockfsm.OpReleaseOwned, Key: req.Key, Scope: c.ownerScope()}
	} else {
		cmds[0] = lockfsm.Command{Op: lockfsm.OpExtendOwned, Key: req.Key, Scope: c.ownerScope(), TTL: ttl}
	}
	return c.srv.applier.apply(c, cmds, lockReply{write: replyGranted})
}

// The reads answer from the applier's table once it has admitted them, as
// VERIFY and STATUS do.

func handleGet(c *conn, args [][]byte) error {
	st, ok := c.srv.lockTable().Status(args[1])
	switch {
	case !ok || !st.Held && st.HoldersTotal == 0:
		c.wr.WriteNull()
		return nil
	case !st.Held:
		return protocol.ErrWrongType
	}
	owner := st.Owner
	if view := c.ownerView(); view != nil {
		owner, _ = view(owner) // another user's lease shows as held, by ""
	}
	c.wr.WriteBulkString(owner)
	return nil
}

// handlePTTL is PTTL and TTL.
func handlePTTL(c *conn, args [][]byte) error {
	st, ok := c.srv.lockTable().Status(args[1])
	switch {
	case !ok || !st.Held && st.HoldersTotal == 0:
		c.wr.WriteInt64(protocol.TTLNoKey)
		return nil
	case !st.Held:
		return protocol.ErrWrongType
	}
	c.wr.WriteInt64(protocol.TTLReply(st.TTL, protocol.Lookup(args[0]).Name == "ttl"))
	return nil
}

func handleExists(c *conn, args [][]byte) error {
	n := 0
	for _, key := range args[1:] {
		if st, ok := c.srv.lockTable().Status(key); ok && (st.Held || st.HoldersTotal > 0) {
			n++
		}
	}
	c.wr.WriteInt(n)
	return nil
}
