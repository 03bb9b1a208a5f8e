package server

import (
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/slowlog"
	"github.com/leasehold/leasehold/protocol"
)

// slowCommands decides which commands SLOWLOG keeps, as Redis's: those that
// ran at least slowerThan. A command's time is measured around its dispatch
// (conn.dispatch), from the parsed command to its buffered reply, without
// the socket's read and write and, for a command that parks in a WAIT,
// without the wait. The entries are a slowlog.Log's.
type slowCommands struct {
	slowerThan int64 // ns; negative: nothing is measured (set once, by New)
	log        *slowlog.Log
}

func newSlowlog(slowerThanMicros int64, maxLen int) slowCommands {
	ns := int64(-1)
	if slowerThanMicros >= 0 {
		ns = slowerThanMicros * int64(time.Microsecond)
	}
	return slowCommands{slowerThan: ns, log: slowlog.New(maxLen)}
}

// add logs the command args that c ran in d ns.
func (l *slowCommands) add(c *conn, args [][]byte, d int64) {
	l.log.Add(args, time.Duration(d), c.remote, c.name)
}

func handleSlowlog(c *conn, args [][]byte) error {
	l := &c.srv.slowlog
	switch sub := strings.ToLower(string(args[1])); sub {
	case "get":
		if len(args) > 3 {
			return protocol.ArityError("slowlog|get")
		}
		count := protocol.SlowlogDefaultCount
		if len(args) == 3 {
			var err error
			if count, err = protocol.ParseSlowlogCount(args[2]); err != nil {
				return err
			}
		}
		newest := l.log.Newest(count)
		c.wr.WriteArray(len(newest))
		for _, e := range newest {
			c.wr.WriteArray(6)
			c.wr.WriteInt64(int64(e.ID))
			c.wr.WriteInt64(e.Unix)
			c.wr.WriteInt64(e.Micros)
			c.wr.WriteArray(len(e.Argv))
			for _, a := range e.Argv {
				c.wr.WriteBulkString(a)
			}
			c.wr.WriteBulkString(e.Addr)
			c.wr.WriteBulkString(e.ClientName)
		}
		return nil
	case "len":
		if len(args) != 2 {
			return protocol.ArityError("slowlog|len")
		}
		c.wr.WriteInt(l.log.Len())
		return nil
	case "reset":
		if len(args) != 2 {
			return protocol.ArityError("slowlog|reset")
		}
		l.log.Reset()
		c.wr.WriteString("OK")
		return nil
	case "help":
		return writeHelpSubcommand(c, args)
	}
	return protocol.UnknownSubcommandError("slowlog", args[1])
}
