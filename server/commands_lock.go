package server

import (
	"github.com/leasehold/leasehold/internal/glob"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
)

// The lock commands, each written once for both modes (see applier.go):
// parse, turn into lockfsm.Commands, apply, reply.

func handleCreate(c *conn, args [][]byte) error {
	req, err := protocol.ParseCreate(args)
	if err != nil {
		return err
	}
	cmds := c.scratch.one()
	cmds[0] = lockfsm.Command{Op: lockfsm.OpCreate, Key: req.Key, Options: locker.CreateOptions{
		DefaultTTL:   req.DefaultTTL,
		LockDelay:    req.LockDelay,
		LockDelaySet: req.LockDelaySet,
		Limit:        req.Limit,
	}}
	return c.srv.applier.apply(c, cmds, lockReply{write: replyGranted})
}

func handleAcquire(c *conn, args [][]byte) error {
	req, err := protocol.ParseAcquire(args)
	if err != nil {
		return err
	}
	cmds, cmd := c.scratch.cleared()
	cmd.Op, cmd.Key, cmd.TTL, cmd.Owner, cmd.Shared = lockfsm.OpAcquire, req.Key, req.TTL, c.scopedOwner(req.Owner), req.Shared
	cmd.Priority, cmd.Wait = req.Priority, req.Wait
	return c.acquire(cmds, 1, req.Ephemeral, lockfsm.OpWait, replyAcquire)
}

// acquire runs ACQUIRE's or MACQUIRE's command, cmds[0], for keys keys:
// at once, or, with a WAIT, as waitOp, waiting in the locks' queues.
func (c *conn) acquire(cmds []lockfsm.Command, keys int, ephemeral bool, waitOp lockfsm.Op,
	write func(*conn, lockReply, []lockfsm.Command, []lockfsm.Result) error) error {
	if ephemeral {
		if err := c.roomForEphemeral(keys); err != nil {
			return err
		}
	}
	if cmd := &cmds[0]; cmd.Wait > 0 {
		if err := c.checkWait(cmd.Wait); err != nil {
			return err
		}
		cmd.Op = waitOp
		return c.srv.applier.wait(c, *cmd, ephemeral)
	}
	return c.srv.applier.apply(c, cmds, lockReply{write: write, ephemeral: ephemeral})
}

// replyAcquire is ACQUIRE's reply: the token, or nil.
func replyAcquire(c *conn, r lockReply, cmds []lockfsm.Command, res []lockfsm.Result) error {
	if res[0].Err != nil {
		return res[0].Err
	}
	if res[0].Granted {
		c.srv.ties.granted(c, cmds[0].Key, res[0].Token, r.ephemeral)
	}
	protocol.WriteToken(c.wr, res[0].Token, res[0].Granted)
	return nil
}

func handleMAcquire(c *conn, args [][]byte) error {
	req, err := protocol.ParseMAcquire(args)
	if err != nil {
		return err
	}
	cmds := c.scratch.one()
	cmds[0] = lockfsm.Command{Op: lockfsm.OpAcquireAll, Keys: req.Keys, TTL: req.TTL, Owner: c.scopedOwner(req.Owner), Shared: req.Shared,
		Priority: req.Priority, Wait: req.Wait}
	return c.acquire(cmds, len(req.Keys), req.Ephemeral, lockfsm.OpWaitAll, replyAcquireAll)
}

// replyAcquireAll is MACQUIRE's reply: the tokens, or nil.
func replyAcquireAll(c *conn, r lockReply, cmds []lockfsm.Command, res []lockfsm.Result) error {
	if res[0].Err != nil {
		return res[0].Err
	}
	var tokens []uint64
	if res[0].Granted {
		tokens = res[0].Tokens
		c.tieAll(cmds[0].Keys, tokens, r.ephemeral)
	}
	protocol.WriteTokens(c.wr, tokens)
	return nil
}

func handleMRelease(c *conn, args [][]byte) error {
	req, err := protocol.ParseMRelease(args)
	if err != nil {
		return err
	}
	cmds := c.scratch.commands(len(req.Keys))
	for j, key := range req.Keys {
		cmds[j] = lockfsm.Command{Op: lockfsm.OpRelease, Key: key, Token: req.Tokens[j], Scope: c.ownerScope()}
	}
	return c.srv.applier.apply(c, cmds, lockReply{write: replyReleased})
}

func handleRelease(c *conn, args [][]byte) error {
	req, err := protocol.ParseToken(args)
	if err != nil {
		return err
	}
	cmds, cmd := c.scratch.cleared()
	cmd.Op, cmd.Key, cmd.Token, cmd.Scope = lockfsm.OpRelease, req.Key, req.Token, c.ownerScope()
	return c.srv.applier.apply(c, cmds, lockReply{write: replyReleased})
}

// replyReleased is RELEASE's reply (1 or 0) and MRELEASE's (how many were
// released); the leases released are no longer tied to the connection.
func replyReleased(c *conn, _ lockReply, cmds []lockfsm.Command, res []lockfsm.Result) error {
	released := 0
	for j := range res {
		if res[j].Granted {
			c.srv.ties.untie(c, cmds[j].Key, cmds[j].Token)
			released++
		}
	}
	c.wr.WriteInt(released)
	return nil
}

func handleExtend(c *conn, args [][]byte) error {
	req, err := protocol.ParseExtend(args)
	if err != nil {
		return err
	}
	cmds, cmd := c.scratch.cleared()
	cmd.Op, cmd.Key, cmd.Token, cmd.TTL, cmd.Scope = lockfsm.OpExtend, req.Key, req.Token, req.TTL, c.ownerScope()
	return c.srv.applier.apply(c, cmds, lockReply{write: replyGranted})
}

func handleDelete(c *conn, args [][]byte) error {
	cmds := c.scratch.one()
	cmds[0] = lockfsm.Command{Op: lockfsm.OpDelete, Key: args[1]}
	return c.srv.applier.apply(c, cmds, lockReply{write: replyGranted})
}

// replyGranted is the reply of a command that answers 1 when it did what
// it was asked (CREATE created, EXTEND extended, DELETE deleted), 0 if not.
func replyGranted(c *conn, _ lockReply, _ []lockfsm.Command, res []lockfsm.Result) error {
	if res[0].Err != nil {
		return res[0].Err
	}
	protocol.WriteBool(c.wr, res[0].Granted)
	return nil
}

// handleForceRelease is the operator's override. Every call is logged at
// warn level, with the peer (on c.log) and the client's name, since it ends
// leases that are not the caller's: the log is the trail of who did it.
func handleForceRelease(c *conn, args [][]byte) error {
	req, err := protocol.ParseForceRelease(args)
	if err != nil {
		return err
	}
	req.Key = cloneBytes(req.Key) // logged once applied; the reader reuses args
	reply := lockReply{write: replyForceRelease, force: &req}
	if !req.All && req.Token == locker.AllLeases { // token 0, given, names no lease
		return c.srv.applier.apply(c, nil, reply)
	}
	cmds := c.scratch.one()
	cmds[0] = lockfsm.Command{Op: lockfsm.OpForceRelease, Key: req.Key, Token: req.Token}
	return c.srv.applier.apply(c, cmds, reply)
}

// replyForceRelease is FORCE-RELEASE's reply: how many leases and
// lock-delays it ended.
func replyForceRelease(c *conn, r lockReply, _ []lockfsm.Command, res []lockfsm.Result) error {
	ended := 0
	if len(res) > 0 {
		ended = res[0].N
	}
	c.logForceRelease(*r.force, ended)
	c.wr.WriteInt(ended)
	return nil
}

// logForceRelease counts and logs what a FORCE-RELEASE ended.
func (c *conn) logForceRelease(req protocol.ForceReleaseRequest, ended int) {
	c.srv.stats.forcedReleases.Add(uint64(ended))
	ev := c.log.Warn().Str("user", c.user.Name).Str("client_name", c.name).Str("key", string(req.Key[:min(len(req.Key), 256)]))
	if req.All {
		ev = ev.Str("token", "all")
	} else {
		ev = ev.Uint64("token", req.Token)
	}
	ev.Int("ended", ended).Msg("FORCE-RELEASE: the operator's override")
}

// The commands that read the table read the applier's table once it has
// admitted them (in cluster mode, after the leader check that makes them
// linearizable).

func handleVerify(c *conn, args [][]byte) error {
	req, err := protocol.ParseToken(args)
	if err != nil {
		return err
	}
	protocol.WriteBool(c.wr, c.srv.lockTable().Verify(req.Key, req.Token))
	return nil
}

func handleStatus(c *conn, args [][]byte) error {
	st, ok := c.srv.lockTable().Status(args[1])
	if !ok {
		c.wr.WriteNull()
		return nil
	}
	protocol.WriteStatus(c.wr, st, c.ownerView())
	return nil
}

func handleHolders(c *conn, args [][]byte) error {
	req, err := protocol.ParseHolders(args)
	if err != nil {
		return err
	}
	next, holders := c.srv.lockTable().Holders(req.Key, req.Cursor, req.Count, nil)
	protocol.WriteHolders(c.wr, next, holders, c.ownerView())
	return nil
}

// locksMatchSteps bounds the pattern matching of one LOCKS call, in
// glob.MatchCost steps (a nanosecond or two each): about a millisecond, after
// which the call returns early with a cursor, so a costly MATCH delays the
// other clients of its event loop, and the shard it walks, that long at most.
const locksMatchSteps = 1 << 20

func handleLocks(c *conn, args [][]byte) error {
	req, err := protocol.ParseLocks(args)
	if err != nil {
		return err
	}
	var match func([]byte) (keep, more bool)
	// Like SCAN, "*" skips matching altogether.
	if req.Match != nil && string(req.Match) != "*" {
		// COUNT bounds the names examined; this bounds what matching them
		// costs, which a long pattern over long names makes large.
		steps := 0
		match = func(key []byte) (bool, bool) {
			ok, n := glob.MatchCost(req.Match, key)
			steps += n
			return ok, steps < locksMatchSteps
		}
	}
	next, names := c.srv.lockTable().Scan(req.Cursor, req.Count, c.keyFilter(match), nil)
	protocol.WriteScan(c.wr, next, names)
	return nil
}
