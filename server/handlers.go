package server

import (
	"fmt"

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
