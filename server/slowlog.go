package server

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/protocol"
)

// slowlog keeps the latest commands that ran at least slowerThan, as Redis's
// SLOWLOG. A command's time is measured around its dispatch (conn.dispatch),
// from the parsed command to its buffered reply, without the socket's read
// and write and, for a command that parks in a WAIT, without the wait.
type slowlog struct {
	slowerThan int64 // ns; negative: nothing is measured (set once, by New)
	maxLen     int   // set once, by New

	mu      sync.Mutex  // guards the fields below
	entries []slowEntry // oldest first, at most maxLen
	nextID  uint64
}

// slowEntry is one logged command, its argv already cut as Redis cuts it.
type slowEntry struct {
	id       uint64
	unix     int64 // seconds
	micros   int64
	argv     []string
	addr     string
	clientID string // the client's name
}

// As Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING.
const (
	slowlogMaxArgc   = 32
	slowlogMaxString = 128
)

func newSlowlog(slowerThanMicros int64, maxLen int) slowlog {
	ns := int64(-1)
	if slowerThanMicros >= 0 {
		ns = slowerThanMicros * int64(time.Microsecond)
	}
	return slowlog{slowerThan: ns, maxLen: maxLen}
}

// add logs the command args that c ran in d ns. It copies what it keeps:
// args alias the connection's read buffer.
func (l *slowlog) add(c *conn, args [][]byte, d int64) {
	if l.maxLen == 0 {
		return
	}
	argv := slowlogArgv(args)
	e := slowEntry{unix: time.Now().Unix(), micros: d / int64(time.Microsecond), argv: argv, addr: c.remote, clientID: c.name}
	l.mu.Lock()
	defer l.mu.Unlock()
	e.id = l.nextID
	l.nextID++
	if len(l.entries) == l.maxLen {
		copy(l.entries, l.entries[1:])
		l.entries = l.entries[:len(l.entries)-1]
	}
	l.entries = append(l.entries, e)
}

// slowlogArgv copies args as Redis's slowlogCreateEntry keeps them: at most
// slowlogMaxArgc, the last saying how many more there were, each cut at
// slowlogMaxString bytes with how many more it had; and passwords redacted.
func slowlogArgv(args [][]byte) []string {
	argc := min(len(args), slowlogMaxArgc)
	argv := make([]string, argc)
	redact := redactedArgs(args)
	for j := range argc {
		switch a := args[j]; {
		case argc == slowlogMaxArgc && j == argc-1 && len(args) > slowlogMaxArgc:
			argv[j] = "... (" + strconv.Itoa(len(args)-argc+1) + " more arguments)"
		case redact(j):
			argv[j] = "(redacted)"
		case len(a) > slowlogMaxString:
			argv[j] = string(a[:slowlogMaxString]) + "... (" + strconv.Itoa(len(a)-slowlogMaxString) + " more bytes)"
		default:
			argv[j] = string(a)
		}
	}
	return argv
}

// redactedArgs says which arguments of a command are passwords, as Redis's
// redactClientCommandArgument: AUTH's, and HELLO's after AUTH's user name.
func redactedArgs(args [][]byte) func(j int) bool {
	switch strings.ToLower(string(args[0])) {
	case "auth":
		return func(j int) bool { return j > 0 }
	case "hello":
		pass := -1
		for j := 2; j+2 < len(args); j++ {
			if strings.EqualFold(string(args[j]), "auth") {
				pass = j + 2
				break
			}
		}
		return func(j int) bool { return j == pass }
	}
	return func(int) bool { return false }
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
		l.mu.Lock()
		n := min(count, len(l.entries))
		newest := make([]slowEntry, n)
		for j := range newest {
			newest[j] = l.entries[len(l.entries)-1-j]
		}
		l.mu.Unlock()
		c.wr.WriteArray(len(newest))
		for _, e := range newest {
			c.wr.WriteArray(6)
			c.wr.WriteInt64(int64(e.id))
			c.wr.WriteInt64(e.unix)
			c.wr.WriteInt64(e.micros)
			c.wr.WriteArray(len(e.argv))
			for _, a := range e.argv {
				c.wr.WriteBulkString(a)
			}
			c.wr.WriteBulkString(e.addr)
			c.wr.WriteBulkString(e.clientID)
		}
		return nil
	case "len":
		if len(args) != 2 {
			return protocol.ArityError("slowlog|len")
		}
		l.mu.Lock()
		n := len(l.entries)
		l.mu.Unlock()
		c.wr.WriteInt(n)
		return nil
	case "reset":
		if len(args) != 2 {
			return protocol.ArityError("slowlog|reset")
		}
		l.mu.Lock()
		l.entries = nil
		l.mu.Unlock()
		c.wr.WriteString("OK")
		return nil
	case "help":
		return writeHelpSubcommand(c, args)
	}
	return protocol.UnknownSubcommandError("slowlog", args[1])
}
