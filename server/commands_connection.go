package server

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/protocol"
)

// The commands Redis clients send on their own, answered as a Redis server
// would, so that redis-cli, go-redis, redis-benchmark and node's redis work
// without flags.

func handlePing(c *conn, args [][]byte) error {
	if len(args) <= 2 && c.subscriptions() > 0 {
		// In RESP2 a listening connection's PING is answered in the
		// message shape, as Redis does.
		c.wr.WriteArray(2)
		c.wr.WriteBulkString("pong")
		if len(args) == 2 {
			c.wr.WriteBulk(args[1])
		} else {
			c.wr.WriteBulkString("")
		}
		return nil
	}
	switch len(args) {
	case 1:
		c.wr.WriteString("PONG")
	case 2:
		c.wr.WriteBulk(args[1])
	default:
		return protocol.ArityError("ping")
	}
	return nil
}

func handleEcho(c *conn, args [][]byte) error {
	c.wr.WriteBulk(args[1])
	return nil
}

func handleQuit(c *conn, _ [][]byte) error {
	c.wr.WriteString("OK")
	c.quit = true
	return nil
}

func handleSelect(c *conn, args [][]byte) error {
	db, ok := protocol.ParseInt(args[1])
	if !ok {
		return protocol.ErrNotInteger
	}
	if db != 0 {
		return protocol.ErrDBIndex
	}
	c.wr.WriteString("OK")
	return nil
}

// handleHello speaks RESP2 only. HELLO 3 gets NOPROTO, as from a Redis
// server that predates RESP3, and clients such as go-redis fall back to 2
// (and to AUTH for their password). Its AUTH option authenticates as AUTH
// does (auth.go).
func handleHello(c *conn, args [][]byte) error {
	if len(args) >= 2 {
		v, ok := protocol.ParseInt(args[1])
		if !ok {
			return protocol.ErrBadProtover
		}
		if v != 2 {
			return protocol.ErrNoProto
		}
	}
	var user, password []byte
	name, setName := "", false
	for i := 2; i < len(args); i++ {
		switch {
		case bytes.EqualFold(args[i], []byte("auth")) && i+2 < len(args):
			user, password = args[i+1], args[i+2]
			i += 2
		case bytes.EqualFold(args[i], []byte("setname")) && i+1 < len(args):
			if err := protocol.CheckClientName(args[i+1]); err != nil {
				return err
			}
			name, setName = string(args[i+1]), true
			i++
		default:
			return protocol.HelloOptionError(args[i])
		}
	}
	// As Redis: every option is checked before AUTH runs, and HELLO does
	// nothing more for a connection that has not authenticated.
	if user != nil {
		if err := c.authenticate(user, password); err != nil {
			return err
		}
	}
	if !c.authenticated() {
		return protocol.ErrHelloNoAuth
	}
	if setName {
		c.name = name
	}
	c.wr.WriteArray(14)
	c.wr.WriteBulkString("server")
	c.wr.WriteBulkString("leasehold")
	c.wr.WriteBulkString("version")
	c.wr.WriteBulkString(c.srv.cfg.Version)
	c.wr.WriteBulkString("proto")
	c.wr.WriteInt(2)
	c.wr.WriteBulkString("id")
	c.wr.WriteUint64(c.id)
	c.wr.WriteBulkString("mode")
	c.wr.WriteBulkString("standalone")
	c.wr.WriteBulkString("role")
	c.wr.WriteBulkString("master")
	c.wr.WriteBulkString("modules")
	c.wr.WriteArray(0)
	return nil
}

func handleClient(c *conn, args [][]byte) error {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "id" && len(args) == 2:
		c.wr.WriteUint64(c.id)
	case sub == "getname" && len(args) == 2:
		if c.name == "" {
			c.wr.WriteNull()
		} else {
			c.wr.WriteBulkString(c.name)
		}
	case sub == "setname" && len(args) == 3:
		if err := protocol.CheckClientName(args[2]); err != nil {
			return err
		}
		c.name = string(args[2])
		c.wr.WriteString("OK")
	case sub == "setinfo" && len(args) == 4:
		switch strings.ToLower(string(args[2])) {
		case "lib-name":
			if err := protocol.CheckClientName(args[3]); err != nil {
				return err
			}
			c.libName = string(args[3])
		case "lib-ver":
			if err := protocol.CheckClientName(args[3]); err != nil {
				return err
			}
			c.libVer = string(args[3])
		default:
			return protocol.UnrecognizedOptionError(args[2])
		}
		c.wr.WriteString("OK")
	case sub == "info" && len(args) == 2:
		c.wr.WriteBulkString(c.describe() + "\n")
	case sub == "help":
		return writeHelpSubcommand(c, args)
	case sub == "unblock" && (len(args) == 3 || len(args) == 4):
		return clientUnblock(c, args[2:])
	case sub == "id" || sub == "getname" || sub == "setname" || sub == "setinfo" || sub == "info" || sub == "unblock":
		return protocol.ArityError("client|" + sub)
	default:
		return protocol.UnknownSubcommandError("client", args[1])
	}
	return nil
}

// clientUnblock serves CLIENT UNBLOCK id [TIMEOUT|ERROR] as Redis does: the
// connection id, if parked in ACQUIRE or MACQUIRE ... WAIT, gets the reply
// of a timeout (nil), or with ERROR the UNBLOCKED error, and the reply is 1;
// otherwise 0. A client gives up a wait this way without closing the
// connection it waits on.
func clientUnblock(c *conn, args [][]byte) error {
	asError := false
	if len(args) == 2 { // checked before the id, as Redis does
		switch strings.ToLower(string(args[1])) {
		case "timeout":
		case "error":
			asError = true
		default:
			return protocol.ErrUnblockReason
		}
	}
	// Redis reads a signed id: a negative one names nobody.
	id, err := strconv.ParseInt(string(args[0]), 10, 64)
	if err != nil {
		return protocol.ErrNotInteger
	}
	if target := c.srv.connByID(uint64(max(id, 0))); target != nil && c.mayUnblock(target) && target.unblockWait(asError) {
		c.wr.WriteInt(1)
	} else {
		c.wr.WriteInt(0)
	}
	return nil
}

func (c *conn) describe() string {
	return fmt.Sprintf("id=%d addr=%s laddr=%s name=%s db=0 lib-name=%s lib-ver=%s",
		c.id, c.remote, c.local, c.name, c.libName, c.libVer)
}
