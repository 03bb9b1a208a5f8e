package server

import (
	"fmt"

	"github.com/leasehold/leasehold/internal/glob"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/protocol"
)

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
}

// commandHandlers lines the handlers up with protocol.Commands, cluster
// mode's where clustered says so, answering MOVED on a follower where
// redirect says so. A command in the table without a handler is a
// programming error caught at start.
func commandHandlers(clustered, redirect bool) []handler {
	hs := make([]handler, len(protocol.Commands))
	for i, cmd := range protocol.Commands {
		h, ok := handlersByName[cmd.Name]
		if ch, replaced := clusterHandlersByName[cmd.Name]; clustered && replaced {
			h = sameSettings(ch)
			if redirect && cmd.FirstKey > 0 {
				h = redirected(h, cmd.FirstKey)
			}
		}
		if !ok {
			panic(fmt.Sprintf("server: command %q has no handler", cmd.Name))
		}
		hs[i] = h
	}
	return hs
}

func handleCreate(c *conn, args [][]byte) error {
	req, err := protocol.ParseCreate(args)
	if err != nil {
		return err
	}
	created, err := c.srv.lockTable().Create(req.Key, createOptions(req))
	if err != nil {
		return err
	}
	protocol.WriteBool(c.wr, created)
	return nil
}

// createOptions are the lock settings a CREATE asks for.
func createOptions(req protocol.CreateRequest) locker.CreateOptions {
	return locker.CreateOptions{
		DefaultTTL:   req.DefaultTTL,
		LockDelay:    req.LockDelay,
		LockDelaySet: req.LockDelaySet,
		Limit:        req.Limit,
	}
}

func handleAcquire(c *conn, args [][]byte) error {
	req, err := protocol.ParseAcquire(args)
	if err != nil {
		return err
	}
	if req.Ephemeral {
		if err := c.roomForEphemeral(1); err != nil {
			return err
		}
	}
	if req.Wait > 0 {
		return acquireWaiting(c, req)
	}
	lr := locker.Request{Key: req.Key, TTL: req.TTL, Owner: c.scopedOwner(req.Owner), Mode: modeOf(req.Shared)}
	token, granted, err := c.srv.lockTable().Acquire(&lr)
	if err != nil {
		return err
	}
	if granted {
		c.srv.ties.granted(c, req.Key, token, req.Ephemeral)
	}
	protocol.WriteToken(c.wr, token, granted)
	return nil
}

func handleMAcquire(c *conn, args [][]byte) error {
	req, err := protocol.ParseMAcquire(args)
	if err != nil {
		return err
	}
	if req.Ephemeral {
		if err := c.roomForEphemeral(len(req.Keys)); err != nil {
			return err
		}
	}
	if req.Wait > 0 {
		return macquireWaiting(c, req)
	}
	lr := locker.Request{Keys: req.Keys, TTL: req.TTL, Owner: c.scopedOwner(req.Owner), Mode: modeOf(req.Shared)}
	tokens, granted, err := c.srv.lockTable().AcquireAll(&lr)
	if err != nil {
		return err
	}
	if granted {
		c.tieAll(req.Keys, tokens, req.Ephemeral)
	}
	protocol.WriteTokens(c.wr, tokens)
	return nil
}

// modeOf is the lease mode of SHARED's presence.
func modeOf(shared bool) locker.Mode {
	if shared {
		return locker.Shared
	}
	return locker.Exclusive
}

func handleMRelease(c *conn, args [][]byte) error {
	req, err := protocol.ParseMRelease(args)
	if err != nil {
		return err
	}
	released := 0
	for j, key := range req.Keys {
		if c.srv.lockTable().ReleaseScoped(key, req.Tokens[j], c.ownerScope()) {
			c.srv.ties.untie(c, key, req.Tokens[j])
			released++
		}
	}
	c.wr.WriteInt(released)
	return nil
}

func handleVerify(c *conn, args [][]byte) error {
	req, err := protocol.ParseToken(args)
	if err != nil {
		return err
	}
	protocol.WriteBool(c.wr, c.srv.lockTable().Verify(req.Key, req.Token))
	return nil
}

func handleRelease(c *conn, args [][]byte) error {
	req, err := protocol.ParseToken(args)
	if err != nil {
		return err
	}
	released := c.srv.lockTable().ReleaseScoped(req.Key, req.Token, c.ownerScope())
	if released {
		c.srv.ties.untie(c, req.Key, req.Token)
	}
	protocol.WriteBool(c.wr, released)
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
	ended := 0
	if req.All || req.Token != locker.AllLeases { // token 0, given, names no lease
		ended = c.srv.lockTable().ForceRelease(req.Key, req.Token)
	}
	c.logForceRelease(req, ended)
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

func handleExtend(c *conn, args [][]byte) error {
	req, err := protocol.ParseExtend(args)
	if err != nil {
		return err
	}
	ok, err := c.srv.lockTable().ExtendScoped(req.Key, req.Token, req.TTL, c.ownerScope())
	if err != nil {
		return err
	}
	protocol.WriteBool(c.wr, ok)
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

func handleDelete(c *conn, args [][]byte) error {
	deleted, err := c.srv.lockTable().Delete(args[1])
	if err != nil {
		return err
	}
	protocol.WriteBool(c.wr, deleted)
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
