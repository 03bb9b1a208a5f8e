package server

import (
	"errors"
	"fmt"
	"github.com/leasehold/leasehold/internal/cmdstats"
	"slices"

	"github.com/leasehold/leasehold/protocol"
)

// Dispatch: every command, on either transport, passes through
// conn.dispatch, which times and counts it; execute checks it (the command
// table, arity, AUTH, ACL, key rules) and handle runs it: the data
// directory's MISCONF refusal, the applier's admission of a lock command,
// then its handler from the table below.

// handler runs one command whose arity has been checked. It writes its reply
// to c.wr, or returns an error for the connection to reply with.
type handler func(c *conn, args [][]byte) error

var handlersByName = map[string]handler{
	"create":       handleCreate,
	"acquire":      handleAcquire,
	"macquire":     handleMAcquire,
	"mrelease":     handleMRelease,
	"verify":       handleVerify,
	"release":      handleRelease,
	"extend":       handleExtend,
	"status":       handleStatus,
	"holders":      handleHolders,
	"delete":       handleDelete,
	"locks":        handleLocks,
	"subscribe":    handleSubscribe,
	"psubscribe":   handlePSubscribe,
	"unsubscribe":  handleUnsubscribe,
	"punsubscribe": handlePUnsubscribe,
	"ping":         handlePing,
	"echo":         handleEcho,
	"quit":         handleQuit,
	"select":       handleSelect,
	"readonly":     handleReadOnly,
	"readwrite":    handleReadWrite,
	"hello":        handleHello,
	"auth":         handleAuth,
	"client":       handleClient,
	"command":      handleCommand,
	"info":         handleInfo,
	"config":       handleConfig,
	"slowlog":      handleSlowlog,
	"lockstats":    handleLockStats,
	"help":         handleHelp,
	"acl":          handleACL,
	"cluster":      handleCluster,

	"force-release": handleForceRelease, // the operator's override

	// The Redis commands of Redis lock libraries (commands_redis.go).
	"set":        handleSet,
	"get":        handleGet,
	"del":        handleDel,
	"unlink":     handleDel,
	"exists":     handleExists,
	"pexpire":    handleExpire,
	"expire":     handleExpire,
	"pexpireat":  handleExpire,
	"expireat":   handleExpire,
	"pttl":       handlePTTL,
	"ttl":        handlePTTL,
	"eval":       handleEval,
	"evalsha":    handleEval,
	"eval_ro":    handleEval,
	"evalsha_ro": handleEval,
	"script":     handleScript,
}

// commandHandlers lines the handlers up with protocol.Commands. A command
// in the table without a handler is a programming error caught at start.
func commandHandlers() []handler {
	hs := make([]handler, len(protocol.Commands))
	for i, cmd := range protocol.Commands {
		h, ok := handlersByName[cmd.Name]
		if !ok {
			panic(fmt.Sprintf("server: command %q has no handler", cmd.Name))
		}
		hs[i] = h
	}
	return hs
}

// writeCommands[i] says whether protocol.Commands[i] changes the lock table:
// Redis's "write" flag.
var writeCommands = commandsFlagged("write")

// handle is conn.dispatch's last step: it runs command i's handler, unless
// the data directory cannot be written and the command would change the
// table: that one does not run, and gets MISCONF. A change that runs marks
// the connection as owing a commit before its replies go out.
func (c *conn) handle(i int, args [][]byte) error {
	if writeCommands[i] && c.srv.store != nil {
		if err := c.srv.store.WriteFailure(); err != nil {
			return protocol.MisconfError(failureReason(err))
		}
		c.owesCommit = true
	}
	if lockCommands[i] {
		if err := c.srv.applier.admit(c, i, args); err != nil {
			return err
		}
	}
	return c.srv.handlers[i](c, args)
}

// fastCommand marks the commands the command table flags "fast" (as Redis
// flags those that take O(1) or O(log n)); runCommands reads the clock after
// any other.
var fastCommand = commandsFlagged("fast")

// commandsFlagged returns, by index into protocol.Commands, whether each
// command has flag: a table dispatch reads without searching the flags.
func commandsFlagged(flag string) []bool {
	has := make([]bool, len(protocol.Commands))
	for i, cmd := range protocol.Commands {
		has[i] = slices.Contains(cmd.Flags, flag)
	}
	return has
}

// dispatch runs one command and buffers its reply, counts it (cmdstats.go)
// and logs it in the SLOWLOG if it took long enough: the one place every
// command passes on either transport. Timing costs one monotonic clock read
// a command, which the latency histograms need whether the slowlog is on or
// off: a command's end is the next one's start, within a round of
// runCommands, which reads nothing but buffered or available input between
// them (so a command's time includes parsing it); the round's first command
// reads the clock before it too. A command that parks (ACQUIRE ... WAIT) is
// timed until it parked: the wait is no command's.
func (c *conn) dispatch(args [][]byte) {
	start := c.clockAt
	if start == 0 {
		start = c.srv.monotonic()
	}
	c.parkedAt = 0
	c.dispatching = dispatchNote{active: true, start: start}
	i, out := c.execute(args)
	queued := c.dispatching.queued
	c.dispatching = dispatchNote{}
	end := c.parkedAt // a command that parked ran until it parked
	if end == 0 {
		end = c.srv.monotonic()
		c.clockAt = end
	} else {
		c.clockAt = 0 // the wait is no command's
	}
	d := end - start
	if queued {
		c.proposals.timed(d) // counted once its proposal is answered
	} else {
		c.tally.Record(c.counters, i, out, d)
	}
	if sl := &c.srv.slowlog; sl.slowerThan >= 0 && d >= sl.slowerThan {
		sl.add(c, args, d)
		c.clockAt = 0 // logging is no command's either
	}
}

// execute runs one command and buffers its reply. It returns the command's
// index in protocol.Commands (-1 for a name not there) and how it ended, for
// its counters: refused before it ran (rejected: unknown, arity, before
// AUTH, by ACL, on a subscribed connection), or ran, failing if its reply is
// an error.
func (c *conn) execute(args [][]byte) (int, cmdstats.Outcome) {
	i := protocol.LookupIndex(args[0])
	c.dispatching.cmd = i
	if i >= 0 && !fastCommand[i] {
		c.ranSlow = true
	}
	if len(c.proposals.replies) > 0 && (i < 0 || !lockWriteCommands[i]) {
		c.runProposals() // their replies come before this command's
	}
	if i < 0 {
		if protocol.IsCrossProtocol(args[0]) {
			c.abortCrossProtocol(args[0])
			return i, cmdstats.Rejected
		}
		c.writeErr(protocol.UnknownCommandError(args))
		return i, cmdstats.Rejected
	}
	cmd := &protocol.Commands[i]
	if c.subscriptions() > 0 && !allowedWhileSubscribed[cmd.Name] {
		c.writeErr(protocol.SubscribedOnlyError(cmd.Name))
		return i, cmdstats.Rejected
	}
	if err := cmd.CheckArity(len(args)); err != nil {
		c.writeErr(err)
		return i, cmdstats.Rejected
	}
	if c.user == nil && c.refuseBeforeAuth(i) {
		return i, cmdstats.Rejected
	}
	if c.user != nil {
		if c.usersSeen != c.srv.users.Load() && !c.reloadUser() {
			return i, cmdstats.Rejected
		}
		if !c.user.Unrestricted() {
			if err := c.checkACL(i, cmd, args); err != nil {
				c.writeErr(err)
				return i, cmdstats.Rejected
			}
		}
	}
	if err := c.checkKeys(cmd, args); err != nil {
		c.writeErr(err) // the command's own rule on its arguments: a failure, as in Redis
		return i, cmdstats.Failed
	}
	if err := c.handle(i, args); err != nil {
		c.writeErr(err)
		return i, cmdstats.Failed
	}
	return i, cmdstats.OK
}

// errCrossProtocol is c.sockErr once a connection spoke HTTP: nothing more
// is written on it, and it closes.
var errCrossProtocol = errors.New("server: connection aborted: POST or Host: command (cross-protocol request)")

// abortCrossProtocol ends a connection that sent a command named POST or
// Host: (see protocol.IsCrossProtocol), as Redis does: at once, dropping the
// replies it has not been sent yet and running nothing more it sent, such as
// the rest of an HTTP request already read, body and all.
func (c *conn) abortCrossProtocol(name []byte) {
	c.srv.stats.securityAttacks.Add(1)
	c.srv.warnCrossProtocol(c, name)
	c.wr.SetBuffer(nil)
	c.sockErr = errCrossProtocol
	c.quit = true
}

// checkKeys applies the lock table's key rules to every key argument the
// command table declares, so that every lock command, not only those that
// store a key, refuses an empty or overlong name.
func (c *conn) checkKeys(cmd *protocol.Command, args [][]byte) error {
	if cmd.FirstKey <= 0 {
		return nil
	}
	last := cmd.LastKey
	if last < 0 {
		last += len(args)
	}
	for k := cmd.FirstKey; k <= last && k < len(args); k += max(cmd.Step, 1) {
		if err := c.srv.lockTable().CheckKey(args[k]); err != nil {
			return err
		}
	}
	return nil
}

// writeErr replies with err mapped to its wire code; errors nobody mapped
// are logged, since the client only sees "internal error".
func (c *conn) writeErr(err error) {
	if len(c.proposals.replies) > 0 {
		c.queueError(err) // their replies come first
		return
	}
	c.writeReplyErr(err)
}

// writeReplyErr is writeErr once the replies before it are written.
func (c *conn) writeReplyErr(err error) {
	text, known := protocol.Reply(err)
	if !known {
		c.log.Error().Err(err).Msg("unmapped error")
	}
	c.wr.WriteError(text)
}
