package slowlog

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Log keeps the latest commands logged, at most its maximum length, as
// Redis's SLOWLOG. It is safe for concurrent use.
type Log struct {
	maxLen int // set once, by New

	mu      sync.Mutex // guards the fields below
	entries []Entry    // oldest first, at most maxLen
	nextID  uint64
}

// Entry is one logged command, its argv already cut as Redis cuts it.
type Entry struct {
	ID         uint64
	Unix       int64 // seconds
	Micros     int64
	Argv       []string
	Addr       string
	ClientName string
}

// As Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING.
const (
	MaxArgc   = 32
	MaxString = 128
)

// New returns a Log that keeps the newest maxLen entries; 0 keeps none.
func New(maxLen int) *Log { return &Log{maxLen: maxLen} }

// Add logs the command args that the client at addr, named clientName,
// ran in d. It copies what it keeps: args may alias a read buffer.
func (l *Log) Add(args [][]byte, d time.Duration, addr, clientName string) {
	if l.maxLen == 0 {
		return
	}
	e := Entry{Unix: time.Now().Unix(), Micros: int64(d / time.Microsecond), Argv: argv(args), Addr: addr, ClientName: clientName}
	l.mu.Lock()
	defer l.mu.Unlock()
	e.ID = l.nextID
	l.nextID++
	if len(l.entries) == l.maxLen {
		copy(l.entries, l.entries[1:])
		l.entries = l.entries[:len(l.entries)-1]
	}
	l.entries = append(l.entries, e)
}

// Newest returns at most count entries, newest first.
func (l *Log) Newest(count int) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(count, len(l.entries))
	newest := make([]Entry, n)
	for j := range newest {
		newest[j] = l.entries[len(l.entries)-1-j]
	}
	return newest
}

// Len returns the number of entries kept.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Reset drops every entry.
func (l *Log) Reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

// argv copies args as Redis's slowlogCreateEntry keeps them: at most
// MaxArgc, the last saying how many more there were, each cut at
// MaxString bytes with how many more it had; and passwords redacted.
func argv(args [][]byte) []string {
	argc := min(len(args), MaxArgc)
	argv := make([]string, argc)
	redact := redactedArgs(args)
	for j := range argc {
		switch a := args[j]; {
		case argc == MaxArgc && j == argc-1 && len(args) > MaxArgc:
			argv[j] = "... (" + strconv.Itoa(len(args)-argc+1) + " more arguments)"
		case redact(j):
			argv[j] = "(redacted)"
		case len(a) > MaxString:
			argv[j] = string(a[:MaxString]) + "... (" + strconv.Itoa(len(a)-MaxString) + " more bytes)"
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
