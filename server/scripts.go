package server

import (
	"strings"

	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/lockfsm"
	"github.com/leasehold/leasehold/protocol"
)

// EVAL, EVALSHA and SCRIPT: a lock library's script runs as the lock
// operation it is (protocol/scripts.go), through the applier like any lock
// command, so that it is written once for both modes and is one entry in
// cluster mode's log.

// handleEval is EVAL, EVALSHA, EVAL_RO and EVALSHA_RO.
func handleEval(c *conn, args [][]byte) error {
	name := protocol.Lookup(args[0]).Name
	req, err := protocol.ParseEval(args)
	if err != nil {
		return err
	}
	var s *protocol.Script
	if strings.HasPrefix(name, "evalsha") {
		if s = c.srv.scripts.Lookup(req.Script); s == nil {
			return protocol.ErrNoScript
		}
	} else if s, _ = c.srv.scripts.Recognize(req.Script); s == nil {
		return protocol.UnknownScriptError()
	}
	call, err := s.Call(req)
	if err != nil {
		return err
	}
	owner := c.scopedOwner(call.Value)
	if strings.HasSuffix(name, "_ro") {
		if !s.ReadOnly() {
			return protocol.ErrWriteInReadOnlyScript
		}
		// A read, answered from the table as GET is (linearizable in
		// cluster mode: the applier admitted it as a read).
		res := c.scratch.results(1)
		res[0] = lockfsm.Run(c.srv.lockTable(), &lockfsm.Command{Op: lockfsm.OpOwnedTTL, Key: call.Keys[0], Owner: owner})
		return replyScript(c, lockReply{script: s}, nil, res)
	}
	key := call.Keys[0]
	var cmds []lockfsm.Command
	switch s.Kind {
	case protocol.ScriptRelease, protocol.ScriptReleaseOrMissing:
		var cmd *lockfsm.Command
		cmds, cmd = c.scratch.cleared()
		cmd.Op, cmd.Key, cmd.Owner = lockfsm.OpReleaseOwned, key, owner
	case protocol.ScriptExtend, protocol.ScriptExtendAddOrReplace:
		cmds = c.scratch.one()
		if call.TTL <= 0 && !call.Add {
			// PEXPIRE with a ttl at or below 0 deletes the key.
			cmds[0] = lockfsm.Command{Op: lockfsm.OpReleaseOwned, Key: key, Owner: owner}
		} else {
			cmds[0] = lockfsm.Command{Op: lockfsm.OpExtendOwned, Key: key, Owner: owner, TTL: call.TTL, AddTTL: call.Add}
		}
	case protocol.ScriptExtendOrAcquire, protocol.ScriptObtain:
		if call.TTL <= 0 {
			return protocol.InvalidExpireError("set")
		}
		// Both run, in one entry: the owner's lease is extended, or the
		// free lock is taken; a lock held by another is left alone by both.
		cmds = c.scratch.commands(2)
		cmds[0] = lockfsm.Command{Op: lockfsm.OpExtendOwned, Key: key, Owner: owner, TTL: call.TTL}
		cmds[1] = lockfsm.Command{Op: lockfsm.OpAcquireNew, Key: key, Owner: owner, TTL: call.TTL}
	case protocol.ScriptOwnedTTL:
		cmds = c.scratch.one()
		cmds[0] = lockfsm.Command{Op: lockfsm.OpOwnedTTL, Key: key, Owner: owner}
	case protocol.ScriptAcquireAll, protocol.ScriptExtendAll:
		if call.TTL <= 0 {
			return protocol.InvalidExpireError("set")
		}
		if len(call.Keys) > protocol.MaxMultiKeys {
			return protocol.ErrBadNumKeys
		}
		op := lockfsm.OpAcquireAllNew // all or none, as the library's script
		if s.Kind == protocol.ScriptExtendAll {
			op = lockfsm.OpExtendAllOwned
		}
		cmds = c.scratch.one()
		cmds[0] = lockfsm.Command{Op: op, Keys: call.Keys, Owner: owner, TTL: call.TTL}
	case protocol.ScriptReleaseEach:
		if len(call.Keys) > protocol.MaxMultiKeys {
			return protocol.ErrBadNumKeys
		}
		cmds = c.scratch.commands(len(call.Keys))
		for j, k := range call.Keys {
			cmds[j] = lockfsm.Command{Op: lockfsm.OpReleaseOwned, Key: k, Owner: owner}
		}
	default:
		return protocol.UnsupportedScriptError(s.Library)
	}
	return c.srv.applier.apply(c, cmds, lockReply{write: replyScript, script: s})
}

// replyScript is a script's reply, as the library's script would have
// answered on Redis.
func replyScript(c *conn, r lockReply, cmds []lockfsm.Command, res []lockfsm.Result) error {
	done := 0
	for j := range res {
		if res[j].Err != nil {
			return res[j].Err
		}
		if res[j].Granted {
			done++
		}
	}
	switch r.script.Kind {
	case protocol.ScriptReleaseOrMissing:
		switch {
		case res[0].Granted:
			c.wr.WriteInt(1)
		case res[0].N == int(locker.NotHeld):
			c.wr.WriteInt(-1)
		default:
			c.wr.WriteInt(0)
		}
	case protocol.ScriptObtain:
		if done > 0 {
			c.wr.WriteString("OK")
		} else {
			c.wr.WriteNull()
		}
	case protocol.ScriptOwnedTTL:
		if res[0].Granted {
			c.wr.WriteInt64(int64(res[0].Token))
		} else {
			c.wr.WriteInt(-3)
		}
	case protocol.ScriptAcquireAll, protocol.ScriptExtendAll:
		if res[0].Granted {
			c.wr.WriteInt(len(cmds[0].Keys))
		} else {
			c.wr.WriteInt(0)
		}
	case protocol.ScriptReleaseEach:
		c.wr.WriteInt(done)
	default: // release, extend, extend or acquire: 1 or 0
		c.wr.WriteInt(min(done, 1))
	}
	return nil
}

func handleScript(c *conn, args [][]byte) error {
	sub := args[1]
	switch {
	case strings.EqualFold(string(sub), "load") && len(args) == 3:
		s, sha := c.srv.scripts.Recognize(args[2])
		if s == nil {
			return protocol.UnknownScriptError()
		}
		c.wr.WriteBulkString(sha)
	case strings.EqualFold(string(sub), "exists") && len(args) >= 3:
		c.wr.WriteArray(len(args) - 2)
		for _, sha := range args[2:] {
			if c.srv.scripts.Lookup(sha) != nil {
				c.wr.WriteInt(1)
			} else {
				c.wr.WriteInt(0)
			}
		}
	case strings.EqualFold(string(sub), "flush") && len(args) <= 3:
		if len(args) == 3 && !strings.EqualFold(string(args[2]), "async") && !strings.EqualFold(string(args[2]), "sync") {
			return protocol.ErrSyntax
		}
		c.srv.scripts.Flush()
		c.wr.WriteString("OK")
	default:
		return protocol.UnknownSubcommandError("script", sub)
	}
	return nil
}
