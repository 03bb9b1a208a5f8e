package protocol

import "strings"

// Command describes one command: the single source for dispatch checks,
// the COMMAND reply and docs/commands.md.
type Command struct {
	Name string // lower case
	// Arity counts the command name too, as Redis does: N means exactly N
	// arguments, -N at least N.
	Arity    int
	Flags    []string // Redis command flags, as COMMAND reports them
	FirstKey int      // position of the first key argument, 0 for none
	LastKey  int      // position of the last key, -1 for the last argument
	Step     int      // distance between keys
	Group    string   // "lock" or "connection" / "server" for Redis's own
	Syntax   string   // the arguments after the name, in Redis's doc notation
	Summary  string
}

// Groups of commands.
const (
	GroupLock       = "lock"
	GroupConnection = "connection"
	GroupServer     = "server"
)

// Commands is the command table, in the order the docs list them.
var Commands = []Command{
	{Name: "create", Arity: -2, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock,
		Syntax: "key [TTL ms]", Summary: "Creates a named lock, optionally with a default lease ttl; it stays when free, until DELETE."},
	{Name: "acquire", Arity: -2, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock,
		Syntax: "key [ttl-ms] [OWNER id]", Summary: "Takes a lease on a lock and returns its fencing token, or nil when another holder has it."},
	{Name: "verify", Arity: 3, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock,
		Syntax: "key token", Summary: "Returns 1 when the token is the live lease of the lock, else 0."},
	{Name: "release", Arity: 3, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock,
		Syntax: "key token", Summary: "Ends the lease the token holds; 0 when it does not hold the lock."},
	{Name: "extend", Arity: 4, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock,
		Syntax: "key token ttl-ms", Summary: "Moves the lease's deadline to now + ttl-ms; 0 when the token does not hold the lock."},
	{Name: "status", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock,
		Syntax: "key", Summary: "Returns the lock's state as field/value pairs, or nil for an unknown lock."},
	{Name: "delete", Arity: 2, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock,
		Syntax: "key", Summary: "Removes a free lock; INUSE while a lease holds it."},
	{Name: "locks", Arity: -2, Flags: []string{"readonly"}, Group: GroupLock,
		Syntax: "cursor [MATCH pattern] [COUNT count]", Summary: "Iterates over lock names, SCAN-style."},

	{Name: "ping", Arity: -1, Flags: []string{"fast", "stale"}, Group: GroupConnection,
		Syntax: "[message]", Summary: "Returns PONG, or the message."},
	{Name: "echo", Arity: 2, Flags: []string{"fast"}, Group: GroupConnection,
		Syntax: "message", Summary: "Returns the message."},
	{Name: "quit", Arity: -1, Flags: []string{"fast"}, Group: GroupConnection,
		Syntax: "", Summary: "Replies OK and closes the connection."},
	{Name: "select", Arity: 2, Flags: []string{"fast"}, Group: GroupConnection,
		Syntax: "index", Summary: "Accepts database 0 only, for clients that select it on connect."},
	{Name: "hello", Arity: -1, Flags: []string{"fast"}, Group: GroupConnection,
		Syntax: "[protover [AUTH username password] [SETNAME clientname]]", Summary: "Handshake; speaks RESP2 only and answers NOPROTO to 3 so clients fall back."},
	{Name: "auth", Arity: -2, Flags: []string{"fast"}, Group: GroupConnection,
		Syntax: "[username] password", Summary: "Fails as Redis does without a password: leasehold has no authentication."},
	{Name: "client", Arity: -2, Flags: []string{}, Group: GroupConnection,
		Syntax: "ID | GETNAME | SETNAME name | SETINFO attr value", Summary: "Connection identity, as clients set it on connect."},
	{Name: "command", Arity: -1, Flags: []string{}, Group: GroupServer,
		Syntax: "[COUNT | DOCS [name ...] | INFO [name ...] | LIST]", Summary: "Describes the commands, from this table."},
	{Name: "info", Arity: -1, Flags: []string{}, Group: GroupServer,
		Syntax: "[section ...]", Summary: "Server, clients, memory, stats and locks sections, as Redis's INFO."},
	{Name: "config", Arity: -2, Flags: []string{}, Group: GroupServer,
		Syntax: "GET parameter [parameter ...]", Summary: "Reads settings; answers what redis-benchmark asks."},
}

var commandIndex = func() map[string]int {
	m := make(map[string]int, len(Commands))
	for i := range Commands {
		m[Commands[i].Name] = i
	}
	return m
}()

// maxNameLen is the longest command name; longer names cannot match.
const maxNameLen = 16

// LookupIndex finds a command by name, case-insensitively and without
// allocating, and returns its index in Commands, or -1.
func LookupIndex(name []byte) int {
	if len(name) > maxNameLen {
		return -1
	}
	var buf [maxNameLen]byte
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	if i, ok := commandIndex[string(buf[:len(name)])]; ok {
		return i
	}
	return -1
}

// Lookup finds a command by name, case-insensitively, or returns nil.
func Lookup(name []byte) *Command {
	if i := LookupIndex(name); i >= 0 {
		return &Commands[i]
	}
	return nil
}

// CheckArity returns the arity error for a call with n arguments (the name
// included), or nil.
func (c *Command) CheckArity(n int) error {
	if c.Arity >= 0 && n != c.Arity || c.Arity < 0 && n < -c.Arity {
		return ArityError(c.Name)
	}
	return nil
}

// Usage is the command's syntax line, as the docs show it.
func (c *Command) Usage() string {
	return strings.TrimSpace(strings.ToUpper(c.Name) + " " + c.Syntax)
}
