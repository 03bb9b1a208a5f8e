package protocol

import (
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/locker"
)

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
	// Category is the ACL category (docs/security.md) that a user's +@cat
	// and -@cat rules grant or take away, one of Categories.
	Category string
	// RedisCategories are Redis's ACL categories of a Redis command
	// (@write, @keyspace, @string, @scripting), which a user's rules may
	// name too, as they would for Redis.
	RedisCategories []string
	// Subcommands are the subcommands that have an ACL category of their
	// own (CLIENT, ACL), each allowed or denied by +cmd|sub rules. A
	// subcommand not listed is CategoryAdmin: an unlisted one fails
	// closed.
	Subcommands []Subcommand
	Args        []Arg // the arguments after the name, for docs and redis-cli's hints
	Summary     string
}

// Subcommand is a subcommand with an ACL category of its own.
type Subcommand struct {
	Name     string // lower case, without the command's name
	Arity    int    // as Command.Arity, the command's name and the subcommand's counted
	Category string
}

// The ACL categories. A user's rules grant or take away the commands of a
// category as a whole (+@read, -@admin); connection commands are always
// allowed to an authenticated user.
const (
	CategoryRead       = "read"       // VERIFY, STATUS, HOLDERS, LOCKS and listening for events
	CategoryLock       = "lock"       // taking, extending and ending one's leases
	CategoryManage     = "manage"     // making and removing locks and their settings
	CategoryAdmin      = "admin"      // the server's settings, other clients, the operator's override
	CategoryConnection = "connection" // the connection's own state: always allowed
)

// Redis's ACL categories of the Redis commands leasehold runs (SET, GET,
// DEL, PEXPIRE, EVAL...), for rules written for Redis. @read is
// CategoryRead.
const (
	CategoryWrite     = "write"
	CategoryKeyspace  = "keyspace"
	CategoryString    = "string"
	CategoryScripting = "scripting"
)

// Categories lists the ACL categories, in the order ACL CAT lists them.
var Categories = []string{CategoryRead, CategoryLock, CategoryManage, CategoryAdmin, CategoryConnection,
	CategoryWrite, CategoryKeyspace, CategoryString, CategoryScripting}

// InCategory reports whether c is in the ACL category cat: its own or one
// of its Redis categories.
func (c *Command) InCategory(cat string) bool {
	return c.Category == cat || slices.Contains(c.RedisCategories, cat)
}

// Arg describes one argument in the shape of Redis's COMMAND DOCS, which
// redis-cli turns into typing hints.
type Arg struct {
	Name     string
	Type     string // key, integer, string, pattern, pure-token, oneof or block
	Token    string // the keyword before the value, e.g. OWNER
	Optional bool
	Multiple bool
	Args     []Arg // the parts of a oneof or a block
}

// Argument constructors, to keep the table readable.
func key(name string) Arg     { return Arg{Name: name, Type: "key"} }
func integer(name string) Arg { return Arg{Name: name, Type: "integer"} }
func str(name string) Arg     { return Arg{Name: name, Type: "string"} }
func token(tok string) Arg    { return Arg{Name: strings.ToLower(tok), Type: "pure-token", Token: tok} }
func block(name string, args ...Arg) Arg {
	return Arg{Name: name, Type: "block", Args: args}
}
func oneof(name string, args ...Arg) Arg {
	return Arg{Name: name, Type: "oneof", Args: args}
}
func (a Arg) opt() Arg             { a.Optional = true; return a }
func (a Arg) many() Arg            { a.Multiple = true; return a }
func (a Arg) after(tok string) Arg { a.Token = tok; return a }

// Syntax renders the argument in Redis's documentation notation.
func (a Arg) Syntax() string {
	var s string
	switch a.Type {
	case "pure-token":
		s = a.Token
	case "block":
		s = joinSyntax(a.Args, " ")
	case "oneof":
		s = joinSyntax(a.Args, " | ")
		if !a.Optional {
			s = "<" + s + ">"
		}
	default:
		s = a.Name
	}
	if a.Multiple {
		s = s + " [" + s + " ...]"
	}
	if a.Token != "" && a.Type != "pure-token" {
		s = a.Token + " " + s
	}
	if a.Optional {
		s = "[" + s + "]"
	}
	return s
}

func joinSyntax(args []Arg, sep string) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = a.Syntax()
	}
	return strings.Join(parts, sep)
}

// Groups of commands.
const (
	GroupLock       = "lock"
	GroupConnection = "connection"
	GroupServer     = "server"
	GroupPubSub     = "pubsub"
	// GroupRedis are the Redis commands that Redis lock libraries send,
	// run on the lock table (docs/redis-compat.md).
	GroupRedis = "redis"
)

// UsesLocks reports whether c runs on the lock table: the lock group, and
// the Redis commands the lock libraries send.
func (c *Command) UsesLocks() bool { return c.Group == GroupLock || c.Group == GroupRedis }

// Commands is the command table, in the order the docs list them.
var Commands = []Command{
	{Name: "create", Arity: -2, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock, Category: CategoryManage,
		Args: []Arg{key("key"), integer("ms").after("TTL").opt(), integer("ms").after("LOCKDELAY").opt(), integer("n").after("LIMIT").opt()}, Summary: "Creates a named lock, optionally with a default lease ttl and a lock-delay, or a semaphore of n permits with LIMIT; it stays when free, until DELETE."},
	{Name: "acquire", Arity: -2, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock, Category: CategoryLock,
		Args: []Arg{key("key"), integer("ttl-ms").opt(), str("id").after("OWNER").opt(), integer("ms").after("WAIT").opt(), integer("n").after("PRIORITY").opt(), token("SHARED").opt(), token("EPHEMERAL").opt()}, Summary: "Takes a lease on a lock (a read lease with SHARED, a permit of a semaphore) and returns its fencing token; nil when it is not free, at once or after waiting up to WAIT ms in a fair queue."},
	{Name: "macquire", Arity: -4, Flags: []string{"write", "movablekeys"}, Group: GroupLock, Category: CategoryLock,
		Args: []Arg{integer("ttl-ms"), integer("numkeys"), key("key").many(), str("id").after("OWNER").opt(), integer("ms").after("WAIT").opt(), integer("n").after("PRIORITY").opt(), token("SHARED").opt(), token("EPHEMERAL").opt()}, Summary: "Takes leases on several locks, all or none, and returns their tokens in the order given; deadlock-free whatever order clients name the keys in."},
	{Name: "verify", Arity: 3, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock, Category: CategoryRead,
		Args: []Arg{key("key"), integer("token")}, Summary: "Returns 1 when the token is a live lease of the lock, else 0."},
	{Name: "release", Arity: 3, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock, Category: CategoryLock,
		Args: []Arg{key("key"), integer("token")}, Summary: "Ends the lease the token holds; 0 when it does not hold the lock."},
	{Name: "mrelease", Arity: -3, Flags: []string{"write"}, FirstKey: 1, LastKey: -1, Step: 2, Group: GroupLock, Category: CategoryLock,
		Args: []Arg{block("lease", key("key"), integer("token")).many()}, Summary: "Ends several leases, as MACQUIRE returned them; returns how many it ended."},
	{Name: "extend", Arity: 4, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock, Category: CategoryLock,
		Args: []Arg{key("key"), integer("token"), integer("ttl-ms")}, Summary: "Moves the lease's deadline to now + ttl-ms; 0 when the token does not hold the lock."},
	{Name: "status", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock, Category: CategoryRead,
		Args: []Arg{key("key")}, Summary: "Returns the lock's state as field/value pairs, or nil for an unknown lock; lists its oldest " + strconv.Itoa(locker.StatusHolders) + " holders and counts them all (HOLDERS lists the rest)."},
	{Name: "holders", Arity: -3, Flags: []string{"readonly"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock, Category: CategoryRead,
		Args: []Arg{key("key"), integer("cursor"), integer("count").after("COUNT").opt()}, Summary: "Iterates over a lock's live leases, SSCAN-style, oldest first: each its token, owner and ttl."},
	{Name: "delete", Arity: 2, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock, Category: CategoryManage,
		Args: []Arg{key("key")}, Summary: "Removes a free lock; INUSE while a lease holds it."},
	{Name: "force-release", Arity: -2, Flags: []string{"write"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupLock, Category: CategoryAdmin,
		Args: []Arg{key("key"), integer("token").opt()}, Summary: "The operator's override: ends the lease the token names whoever holds it, or every lease of the lock, and a lock-delay in progress; returns how many it ended."},
	{Name: "locks", Arity: -1, Flags: []string{"readonly"}, Group: GroupLock, Category: CategoryRead,
		Args: []Arg{integer("cursor").opt(), Arg{Name: "pattern", Type: "pattern", Token: "MATCH", Optional: true}, integer("count").after("COUNT").opt()}, Summary: "Iterates over lock names, SCAN-style; without a cursor, the first page (as cursor 0)."},

	{Name: "set", Arity: -3, Flags: []string{"write", "denyoom"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupRedis, Category: CategoryLock, RedisCategories: []string{CategoryWrite, CategoryString},
		Args:    []Arg{key("key"), str("owner"), token("NX"), oneof("expiration", integer("seconds").after("EX"), integer("milliseconds").after("PX"), integer("unix-time-seconds").after("EXAT"), integer("unix-time-milliseconds").after("PXAT"), token("KEEPTTL")).opt()},
		Summary: "Redis's lock: takes the lock with the value as its owner and the expiration as its lease (a fencing token is granted, STATUS shows it); OK, or nil when held. NX is required: a value is never overwritten."},
	{Name: "get", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupRedis, Category: CategoryRead, RedisCategories: []string{CategoryString},
		Args: []Arg{key("key")}, Summary: "The owner of the lock's exclusive lease (a SET's value), or nil when it is free."},
	{Name: "del", Arity: -2, Flags: []string{"write"}, FirstKey: 1, LastKey: -1, Step: 1, Group: GroupRedis, Category: CategoryLock, RedisCategories: []string{CategoryWrite, CategoryKeyspace},
		Args: []Arg{key("key").many()}, Summary: "Releases every lease of each lock, whoever holds it (a user of --acl-file only their own); returns how many locks it released."},
	{Name: "unlink", Arity: -2, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: -1, Step: 1, Group: GroupRedis, Category: CategoryLock, RedisCategories: []string{CategoryWrite, CategoryKeyspace},
		Args: []Arg{key("key").many()}, Summary: "The same as DEL."},
	{Name: "exists", Arity: -2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: -1, Step: 1, Group: GroupRedis, Category: CategoryRead, RedisCategories: []string{CategoryKeyspace},
		Args: []Arg{key("key").many()}, Summary: "How many of the keys are held by a live lease (a key named twice counts twice)."},
	{Name: "pexpire", Arity: -3, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupRedis, Category: CategoryLock, RedisCategories: []string{CategoryWrite, CategoryKeyspace},
		Args: []Arg{key("key"), integer("milliseconds")}, Summary: "Sets the ttl of the lock's leases, whoever holds them; 0 when it is free. A ttl at or below 0 releases them."},
	{Name: "expire", Arity: -3, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupRedis, Category: CategoryLock, RedisCategories: []string{CategoryWrite, CategoryKeyspace},
		Args: []Arg{key("key"), integer("seconds")}, Summary: "PEXPIRE in seconds."},
	{Name: "pexpireat", Arity: -3, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupRedis, Category: CategoryLock, RedisCategories: []string{CategoryWrite, CategoryKeyspace},
		Args: []Arg{key("key"), integer("unix-time-milliseconds")}, Summary: "PEXPIRE to a Unix time in milliseconds, by this node's clock."},
	{Name: "expireat", Arity: -3, Flags: []string{"write", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupRedis, Category: CategoryLock, RedisCategories: []string{CategoryWrite, CategoryKeyspace},
		Args: []Arg{key("key"), integer("unix-time-seconds")}, Summary: "PEXPIRE to a Unix time in seconds, by this node's clock."},
	{Name: "pttl", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupRedis, Category: CategoryRead, RedisCategories: []string{CategoryKeyspace},
		Args: []Arg{key("key")}, Summary: "Milliseconds left on the lock's exclusive lease; -2 when it is free."},
	{Name: "ttl", Arity: 2, Flags: []string{"readonly", "fast"}, FirstKey: 1, LastKey: 1, Step: 1, Group: GroupRedis, Category: CategoryRead, RedisCategories: []string{CategoryKeyspace},
		Args: []Arg{key("key")}, Summary: "PTTL in seconds, rounded."},
	{Name: "eval", Arity: -3, Flags: []string{"write", "movablekeys"}, Group: GroupRedis, Category: CategoryLock, RedisCategories: []string{CategoryScripting},
		Args: []Arg{str("script"), integer("numkeys"), key("key").many().opt(), str("arg").many().opt()}, Summary: "Runs a Redis lock library's script (compare-and-delete, compare-and-expire...) as the lock operation it is; a script leasehold does not know is refused, naming the libraries it runs."},
	{Name: "evalsha", Arity: -3, Flags: []string{"write", "movablekeys"}, Group: GroupRedis, Category: CategoryLock, RedisCategories: []string{CategoryScripting},
		Args: []Arg{str("sha1"), integer("numkeys"), key("key").many().opt(), str("arg").many().opt()}, Summary: "EVAL of a script by its SHA1, once this node has seen it (EVAL, SCRIPT LOAD); NOSCRIPT otherwise."},
	{Name: "eval_ro", Arity: -3, Flags: []string{"readonly", "movablekeys"}, Group: GroupRedis, Category: CategoryRead, RedisCategories: []string{CategoryScripting},
		Args: []Arg{str("script"), integer("numkeys"), key("key").many().opt(), str("arg").many().opt()}, Summary: "EVAL of a script that only reads."},
	{Name: "evalsha_ro", Arity: -3, Flags: []string{"readonly", "movablekeys"}, Group: GroupRedis, Category: CategoryRead, RedisCategories: []string{CategoryScripting},
		Args: []Arg{str("sha1"), integer("numkeys"), key("key").many().opt(), str("arg").many().opt()}, Summary: "EVALSHA of a script that only reads."},
	{Name: "script", Arity: -2, Flags: []string{}, Group: GroupRedis, Category: CategoryLock, RedisCategories: []string{CategoryScripting},
		Args: []Arg{oneof("subcommand", str("script").after("LOAD"), str("sha1").many().after("EXISTS"), block("flush", oneof("mode", token("ASYNC"), token("SYNC")).opt()).after("FLUSH"))}, Summary: "This node's scripts, as Redis's: LOAD one (refused if leasehold does not know it) and get its SHA1, ask which EXIST, FLUSH them."},

	{Name: "subscribe", Arity: -2, Flags: []string{"pubsub", "fast"}, Group: GroupPubSub, Category: CategoryRead,
		Args: []Arg{str("channel").many()}, Summary: "Listens for lock events on channels named __lock__:<key>."},
	{Name: "psubscribe", Arity: -2, Flags: []string{"pubsub", "fast"}, Group: GroupPubSub, Category: CategoryRead,
		Args: []Arg{Arg{Name: "pattern", Type: "pattern"}.many()}, Summary: "Listens for lock events on channels matching glob patterns, such as __lock__:jobs:*."},
	{Name: "unsubscribe", Arity: -1, Flags: []string{"pubsub", "fast"}, Group: GroupPubSub, Category: CategoryRead,
		Args: []Arg{str("channel").many().opt()}, Summary: "Stops listening on channels; all of them without arguments."},
	{Name: "punsubscribe", Arity: -1, Flags: []string{"pubsub", "fast"}, Group: GroupPubSub, Category: CategoryRead,
		Args: []Arg{Arg{Name: "pattern", Type: "pattern"}.many().opt()}, Summary: "Stops listening on patterns; all of them without arguments."},

	{Name: "ping", Arity: -1, Flags: []string{"fast", "stale"}, Group: GroupConnection, Category: CategoryConnection,
		Args: []Arg{str("message").opt()}, Summary: "Returns PONG, or the message."},
	{Name: "echo", Arity: 2, Flags: []string{"fast"}, Group: GroupConnection, Category: CategoryConnection,
		Args: []Arg{str("message")}, Summary: "Returns the message."},
	{Name: "quit", Arity: -1, Flags: []string{"fast", "no_auth"}, Group: GroupConnection, Category: CategoryConnection,
		Args: []Arg{}, Summary: "Replies OK and closes the connection."},
	{Name: "select", Arity: 2, Flags: []string{"fast"}, Group: GroupConnection, Category: CategoryConnection,
		Args: []Arg{integer("index")}, Summary: "Accepts database 0 only, for clients that select it on connect."},
	{Name: "readonly", Arity: 1, Flags: []string{"fast"}, Group: GroupConnection, Category: CategoryConnection,
		Args: []Arg{}, Summary: "Cluster mode: this connection's VERIFY, STATUS, HOLDERS and LOCKS answer from this node's table at once, without the leader check: faster, and they work on a node cut off from the leader, but may be stale. As Redis Cluster's READONLY."},
	{Name: "readwrite", Arity: 1, Flags: []string{"fast"}, Group: GroupConnection, Category: CategoryConnection,
		Args: []Arg{}, Summary: "Cluster mode: ends READONLY; reads are linearizable again (the default)."},
	{Name: "hello", Arity: -1, Flags: []string{"fast", "no_auth"}, Group: GroupConnection, Category: CategoryConnection,
		Args: []Arg{block("arguments", integer("protover"), block("auth", str("username"), str("password")).after("AUTH").opt(), str("clientname").after("SETNAME").opt()).opt()}, Summary: "Handshake, authenticating with AUTH as the AUTH command does; speaks RESP2 only and answers NOPROTO to 3 so clients fall back (to AUTH)."},
	{Name: "auth", Arity: -2, Flags: []string{"fast", "no_auth"}, Group: GroupConnection, Category: CategoryConnection,
		Args: []Arg{str("username").opt(), str("password")}, Summary: "Authenticates the connection as a user of --acl-file, or as the default user with its password alone (--requirepass-file); a wrong password and an unknown or disabled user get the same WRONGPASS."},
	{Name: "client", Arity: -2, Flags: []string{}, Group: GroupConnection, Category: CategoryConnection,
		Subcommands: []Subcommand{
			{"id", 2, CategoryConnection}, {"getname", 2, CategoryConnection}, {"setname", 3, CategoryConnection},
			{"setinfo", 4, CategoryConnection}, {"info", 2, CategoryConnection}, {"unblock", -3, CategoryConnection},
			{"help", 2, CategoryConnection},
		},
		Args: []Arg{oneof("subcommand", token("ID"), token("GETNAME"), str("name").after("SETNAME"), block("setinfo", str("attr"), str("value")).after("SETINFO"), token("INFO"), block("unblock", integer("client-id"), oneof("unblock-type", token("TIMEOUT"), token("ERROR")).opt()).after("UNBLOCK"))}, Summary: "Connection identity, as clients set it on connect; UNBLOCK ends another connection's WAIT."},
	{Name: "command", Arity: -1, Flags: []string{}, Group: GroupServer, Category: CategoryConnection,
		Args: []Arg{oneof("subcommand", token("COUNT"), block("docs", str("name").many().opt()).after("DOCS"), block("info", str("name").many().opt()).after("INFO"), token("LIST")).opt()}, Summary: "Describes the commands, from this table."},
	{Name: "info", Arity: -1, Flags: []string{}, Group: GroupServer, Category: CategoryAdmin,
		Args: []Arg{str("section").many().opt()}, Summary: "Server, clients, memory, stats, locks, persistence, limits and cluster sections, as Redis's INFO; commandstats and latencystats by name or with all."},
	{Name: "config", Arity: -2, Flags: []string{}, Group: GroupServer, Category: CategoryAdmin,
		Args: []Arg{str("parameter").many().after("GET")}, Summary: "Reads settings; answers what redis-benchmark asks."},
	{Name: "acl", Arity: -2, Flags: []string{}, Group: GroupServer, Category: CategoryAdmin,
		Subcommands: []Subcommand{
			{"whoami", 2, CategoryConnection}, {"cat", -2, CategoryConnection}, {"help", 2, CategoryConnection},
			{"list", 2, CategoryAdmin}, {"users", 2, CategoryAdmin}, {"log", -2, CategoryAdmin}, {"load", 2, CategoryAdmin},
		},
		Args: []Arg{oneof("subcommand", token("WHOAMI"), block("cat", str("category").opt()).after("CAT"), token("LIST"), token("USERS"), block("log", oneof("count-or-reset", integer("count"), token("RESET")).opt()).after("LOG"), token("LOAD"))}, Summary: "Users and permissions, as Redis's ACL: WHOAMI and CAT for every user; LIST, USERS, LOG and LOAD (re-read --acl-file) for admins."},
	{Name: "cluster", Arity: -2, Flags: []string{}, Group: GroupServer, Category: CategoryAdmin,
		Subcommands: []Subcommand{
			{"info", 2, CategoryRead}, {"nodes", 2, CategoryRead}, {"myid", 2, CategoryRead}, {"help", 2, CategoryConnection},
			{"slots", 2, CategoryRead}, {"shards", 2, CategoryRead}, {"keyslot", 3, CategoryRead},
			{"addnode", 4, CategoryAdmin}, {"forget", 3, CategoryAdmin}, {"snapshot", 2, CategoryAdmin},
		},
		Args: []Arg{oneof("subcommand", token("INFO"), token("NODES"), token("MYID"), token("SLOTS"), token("SHARDS"), str("key").after("KEYSLOT"), block("addnode", str("node-id"), str("raft-addr")).after("ADDNODE"), str("node-id").after("FORGET"), token("SNAPSHOT"))}, Summary: "Cluster mode: the Raft group's state (INFO, NODES, MYID); SLOTS and SHARDS as Redis Cluster's, one shard of every slot, led by the leader; KEYSLOT; ADDNODE and FORGET change its voters one at a time, SNAPSHOT takes one now (admins)."},
	{Name: "slowlog", Arity: -2, Flags: []string{"admin", "loading", "stale"}, Group: GroupServer, Category: CategoryAdmin,
		Args: []Arg{oneof("subcommand", block("get", integer("count").opt()).after("GET"), token("LEN"), token("RESET"), token("HELP"))}, Summary: "As Redis's: the latest commands that ran at least --slowlog-log-slower-than microseconds, newest first (GET, 10 by default, -1 for all), how many are kept (LEN), or forgets them (RESET)."},
	{Name: "lockstats", Arity: -1, Flags: []string{"readonly"}, Group: GroupServer, Category: CategoryRead,
		Args: []Arg{integer("n").after("TOP").opt(), oneof("order", token("WAITS"), token("WAIT-TIME"), token("HOLD-TIME"), token("EXPIRIES"), token("ACQUISITIONS")).after("BY").opt()}, Summary: "The hottest locks (at most TOP n, of the --lockstats-top tracked) with their acquisitions, waits, timeouts, expiries and wait and hold time percentiles, sorted BY waits (the default) or another field, descending."},
	{Name: "help", Arity: -1, Flags: []string{"fast", "stale"}, Group: GroupServer, Category: CategoryConnection,
		Args: []Arg{str("command").opt()}, Summary: "Lists the commands with their summaries, or gives one command's syntax and summary, as lines to read in a terminal."},
}

// maxNameLen is the longest command name; longer names cannot match.
const maxNameLen = 16

// slotWays is how many commands may share a slot of commandSlots.
const slotWays = 3

// commandSlots finds a command from its name's length and first two letters
// without hashing the name: at most slotWays commands share the three
// (EXTEND, EXISTS and EXPIRE do; init checks), so a lookup is an array read
// and a comparison or three.
var commandSlots = func() (t [maxNameLen + 1][26][26][slotWays]int8) {
	for i, c := range Commands {
		n := c.Name
		if len(n) < 2 || len(n) > maxNameLen || n[0] < 'a' || n[0] > 'z' || n[1] < 'a' || n[1] > 'z' {
			panic("protocol: command name " + n + " does not fit the lookup table")
		}
		slot := &t[len(n)][n[0]-'a'][n[1]-'a']
		way := 0
		for way < slotWays && slot[way] != 0 {
			way++
		}
		if way == slotWays {
			panic("protocol: more than " + strconv.Itoa(slotWays) + " commands share the lookup slot of " + n)
		}
		slot[way] = int8(i + 1)
	}
	return t
}()

// LookupIndex finds a command by name, case-insensitively and without
// allocating, and returns its index in Commands, or -1.
func LookupIndex(name []byte) int {
	if len(name) < 2 || len(name) > maxNameLen {
		return -1
	}
	first, second := name[0]|0x20, name[1]|0x20 // ASCII lower case
	if first < 'a' || first > 'z' || second < 'a' || second > 'z' {
		return -1
	}
	for _, way := range &commandSlots[len(name)][first-'a'][second-'a'] {
		i := int(way) - 1
		if i < 0 {
			return -1
		}
		if equalFoldASCII(name, Commands[i].Name) {
			return i
		}
	}
	return -1
}

// equalFoldASCII compares b with the lower-case name s, ignoring ASCII case.
func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// IsCrossProtocol reports whether name, a command name no RESP client sends,
// is the first word of an HTTP request (POST) or of one of its header lines
// (Host:): someone, often a browser a web page steered at the port, is
// speaking HTTP to it, and whatever follows (a request body can hold any
// command) must not run. Redis flags the same two names
// (securityWarningCommand).
func IsCrossProtocol(name []byte) bool {
	return equalFoldASCII(name, "post") || equalFoldASCII(name, "host:")
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
	return strings.TrimSpace(strings.ToUpper(c.Name) + " " + joinSyntax(c.Args, " "))
}

// Keys returns the keys that args, a call of c, name: those at the places
// the command table gives, or MACQUIRE's or a script's numkeys keys. A MACQUIRE that does
// not parse has none: its handler replies with the parse error and takes
// nothing.
func (c *Command) Keys(args [][]byte) [][]byte {
	if c.Name == "macquire" {
		req, err := ParseMAcquire(args)
		if err != nil {
			return nil
		}
		return req.Keys
	}
	if strings.HasPrefix(c.Name, "eval") {
		req, err := ParseEval(args)
		if err != nil {
			return nil
		}
		return req.Keys
	}
	if c.FirstKey <= 0 {
		return nil
	}
	last := c.LastKey
	if last < 0 {
		last += len(args)
	}
	var keys [][]byte
	for k := c.FirstKey; k <= last && k < len(args); k += max(c.Step, 1) {
		keys = append(keys, args[k])
	}
	return keys
}
