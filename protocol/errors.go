package protocol

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/tidwall/redcon"
)

// Error is an error as it goes on the wire: an uppercase code word and a
// message. Unlike other packages' sentinels, its text has no package prefix,
// because it is the reply itself: Error() is exactly what follows the '-'.
//
// This file is the one place that decides what error text a client sees:
// every Error value and constructor is here, each code is documented in
// ErrorCodes (and so in docs/commands.md), and other packages' errors are
// mapped by Reply. The server returns these and never builds its own (a test
// in server checks its sources).
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Code + " " + e.Msg }

// Frame is e as a RESP error reply, for writing straight to a socket that
// has no reply writer, such as one refused before it is served.
func (e *Error) Frame() []byte { return redcon.AppendError(nil, e.Error()) }

// The error codes leasehold puts on the wire. Redis's own codes are reused
// where they mean the same thing, so that clients that type them (go-redis,
// redis-py) recognise them.
const (
	CodeErr       = "ERR"       // generic: bad arguments, limits, unknown commands
	CodeNoLock    = "NOLOCK"    // the lock does not exist and the server requires CREATE
	CodeInUse     = "INUSE"     // DELETE of a lock whose lease is live
	CodeNoProto   = "NOPROTO"   // HELLO asked for a protocol version other than 2 (Redis's code)
	CodeUnblocked = "UNBLOCKED" // a WAIT ended by CLIENT UNBLOCK ... ERROR (Redis's code)
	CodeWrongPass = "WRONGPASS" // AUTH or HELLO ... AUTH with a wrong user or password (Redis's code)
	CodeNoAuth    = "NOAUTH"    // a command before AUTH on a server with a password (Redis's code)
	CodeDenied    = "DENIED"    // protected mode refused a connection from a non-loopback peer (Redis's code)
	CodeNoPerm    = "NOPERM"    // the user's ACL rules do not allow the command, a key or a channel (Redis's code)
	CodeShutdown  = "SHUTDOWN"  // the server is stopping (SIGTERM): a parked WAIT ends with it
	CodeOOM       = "OOM"       // the lock table holds --max-locks locks, or the heap is over --maxmemory (Redis's code for maxmemory)
	CodeMisconf   = "MISCONF"   // the data directory cannot be written: changes are refused (Redis's code)
	CodeTryAgain  = "TRYAGAIN"  // cluster mode: no leader ready (an election); nothing ran, retry (Redis Cluster's code, which go-redis retries)
	CodeUncertain = "UNCERTAIN" // cluster mode: a change may or may not have been applied (the leader was lost mid-way)
	CodeMoved     = "MOVED"     // cluster mode with --redirect: send the command to the leader at this address (Redis Cluster's code)
	CodeWrongType = "WRONGTYPE" // GET, PTTL or a script of a lock held in shared mode or as a semaphore: no one owner (Redis's code)
	CodeNoScript  = "NOSCRIPT"  // EVALSHA of a script this node has not seen (Redis's code; the libraries then send EVAL)
)

// ErrorCodes documents every code, for COMMAND DOCS' neighbours and docs/commands.md.
var ErrorCodes = []struct{ Code, Meaning string }{
	{CodeErr, "Generic error: wrong arity, unknown command or option, a number that is not an integer or out of range, an empty or too long key, a protocol error (the connection is then closed)."},
	{CodeNoLock, "The lock does not exist and the server runs with `--require-create`; `CREATE` it first."},
	{CodeInUse, "`DELETE` of a lock that a live lease holds, or that is in its lock-delay; release it, or wait for the lease or the delay to end."},
	{CodeNoProto, "`HELLO` asked for a protocol version this server does not speak (only RESP2); clients fall back to RESP2."},
	{CodeUnblocked, "Another connection ended this `ACQUIRE` or `MACQUIRE` ... `WAIT` with `CLIENT UNBLOCK id ERROR`; nothing was granted."},
	{CodeWrongPass, "`AUTH` or `HELLO ... AUTH` with an unknown user, a disabled (`off`) user, or a wrong password; the reply never says which. A `nopass` user (the `default` user of a server without a password) accepts any password, as in Redis. See [security.md](security.md)."},
	{CodeNoAuth, "The server has a password and this connection has not authenticated: only `AUTH`, `HELLO` (with its `AUTH` option) and `QUIT` run before `AUTH` succeeds, as in Redis. See [security.md](security.md)."},
	{CodeNoPerm, "The connection's user may not run this command, touch one of its keys, or listen on this channel or pattern (its rules in `--acl-file`); nothing ran, and `MACQUIRE` took no lease. Redis's texts: `User alice has no permissions to run the 'create' command`, `No permissions to access a key`, `No permissions to access a channel`. See [security.md](security.md)."},
	{CodeDenied, "Protected mode: the server has no password and the connection came from a non-loopback address; the reply says how to fix it (set a password, bind to loopback, or `--protected-mode no`) and the connection is closed. See [security.md](security.md)."},
	{CodeOOM, "The lock table holds `--max-locks` locks: a command that would make a new lock (`ACQUIRE` or `MACQUIRE` of a key not in the table, `CREATE`) is refused, `MACQUIRE` as a whole; commands on existing locks go on. Or the memory in use is over `--maxmemory` (`OOM command not allowed when used memory > 'maxmemory'.`, Redis's text): every `ACQUIRE`, `MACQUIRE` and `CREATE` is refused, while `VERIFY`, `RELEASE`, `EXTEND`, `DELETE` and reads go on. Redis's code for a write refused at `maxmemory`, so clients treat it alike; retry once locks are released or expire."},
	{CodeMisconf, "The data directory cannot be written (a full disk, an I/O error): commands that change the lock table are refused before they run, and a change that ran just before the failure was noticed gets this error instead of its reply, its outcome unknown (`STATUS` tells). `VERIFY`, `STATUS`, `LOCKS`, `INFO`, `PING` and subscriptions go on. The server retries the write in the background and accepts changes again by itself once it succeeds. Redis's code for writes refused after a failed save."},
	{CodeTryAgain, "Cluster mode: the cluster has no leader ready to take the command (an election is under way, or this node cannot reach the leader); nothing ran; the node has already waited 2 s for a leader. Retry after a moment, on another node if this one stays cut off: the leasehold clients do; go-redis retries it only briefly (its MaxRetries), redis-py's `RedisCluster` retries it and its plain `Redis` raises `TryAgainError`. Redis Cluster's code. See [cluster.md](cluster.md)."},
	{CodeUncertain, "Cluster mode: the command was sent to the leader, which was lost before its outcome was known: it may or may not have been applied (the next leader may still commit it, within about an election timeout). Never read it as a refusal: retry `ACQUIRE` with the same `OWNER` (which returns the lease if it was granted), check with `STATUS`, or `RELEASE` again. See [cluster.md](cluster.md)."},
	{CodeMoved, "Cluster mode with `--redirect`: this node is a follower; `MOVED <slot> <host:port>` names the key's slot and the leader's address, where the command must go. `redis-cli -c` and go-redis's `ClusterClient` follow it. Without `--redirect` a follower forwards the command itself. Redis Cluster's code. See [cluster.md](cluster.md)."},
	{CodeWrongType, "`GET`, `PTTL`, `TTL` or a lock library's script named a lock held in shared mode or as a semaphore, which has no one owner and ttl; `STATUS` and `HOLDERS` show its leases. Redis's code for an operation on a key of another type. See [redis-compat.md](redis-compat.md)."},
	{CodeNoScript, "`EVALSHA` of a script this node does not have: every node knows the lock libraries' own scripts by their SHA1 from the start, and learns another spelling of one from `EVAL` or `SCRIPT LOAD` (each node its own, as each Redis does). The libraries then send `EVAL` or `SCRIPT LOAD`, as they do to Redis. Redis's text: `NOSCRIPT No matching script. Please use EVAL.` See [redis-compat.md](redis-compat.md)."},
	{CodeShutdown, "The server is shutting down (SIGTERM or SIGINT): a parked `ACQUIRE` or `MACQUIRE` ... `WAIT` ends with this error and nothing was granted; retry against the server once it is back."},
}

var (
	// ErrSyntax is an unknown or repeated option, Redis's text.
	ErrSyntax = &Error{CodeErr, "syntax error"}
	// ErrNotInteger is a number that does not parse or is out of range, Redis's text.
	ErrNotInteger = &Error{CodeErr, "value is not an integer or out of range"}
	// ErrBadToken is a fencing token that is not an unsigned 64-bit integer.
	ErrBadToken = &Error{CodeErr, "invalid token: must be an unsigned 64-bit integer"}
	// ErrBadSlowlogCount is a SLOWLOG GET count that is not an integer of
	// at least -1, Redis's text.
	ErrBadSlowlogCount = &Error{CodeErr, "count should be greater than or equal to -1"}
	// ErrBadLockStatsTop is a LOCKSTATS TOP that is not an integer between
	// 1 and MaxLockStatsTop.
	ErrBadLockStatsTop = &Error{CodeErr, "TOP must be an integer between 1 and " + strconv.Itoa(MaxLockStatsTop)}
	// ErrBadLockStatsOrder is a LOCKSTATS BY naming no field of LockStatsOrders.
	ErrBadLockStatsOrder = &Error{CodeErr, "BY must be one of " + strings.Join(LockStatsOrders, ", ")}
	// ErrLockStatsOff is LOCKSTATS on a server started with --lockstats-top 0.
	ErrLockStatsOff = &Error{CodeErr, "lock statistics are off (--lockstats-top 0)"}
	// ErrBadCursor is a LOCKS or HOLDERS cursor that does not parse, Redis's
	// text.
	ErrBadCursor = &Error{CodeErr, "invalid cursor"}
	// ErrBadHoldersCount is a HOLDERS COUNT below 1 or above
	// MaxHoldersCount.
	ErrBadHoldersCount = &Error{CodeErr, "COUNT must be between 1 and " + strconv.Itoa(MaxHoldersCount)}
	// ErrBadLockDelay is a LOCKDELAY that is negative or overflows.
	ErrBadLockDelay = &Error{CodeErr, "LOCKDELAY must be a non-negative number of milliseconds"}
	// ErrBadWait is a WAIT that is negative or overflows.
	ErrBadWait = &Error{CodeErr, "WAIT must be a non-negative number of milliseconds"}
	// ErrBadPriority is a PRIORITY outside the 32-bit range.
	ErrBadPriority = &Error{CodeErr, "PRIORITY must be a 32-bit integer"}
	// ErrBadLimit is a semaphore LIMIT out of range.
	ErrBadLimit = &Error{CodeErr, "LIMIT must be between 1 and " + strconv.Itoa(locker.MaxLimit)}
	// ErrBadNumKeys is a MACQUIRE numkeys out of range.
	ErrBadNumKeys = &Error{CodeErr, "numkeys must be between 1 and " + strconv.Itoa(MaxMultiKeys)}
	// ErrPatternTooLong is a LOCKS MATCH or PSUBSCRIBE pattern longer than
	// MaxPatternLen.
	ErrPatternTooLong = &Error{CodeErr, "pattern is longer than " + strconv.Itoa(MaxPatternLen) + " bytes"}
	// ErrTooManyPairs is an MRELEASE of more than MaxMultiKeys pairs.
	ErrTooManyPairs = &Error{CodeErr, "MRELEASE takes at most " + strconv.Itoa(MaxMultiKeys) + " key/token pairs"}
	// ErrTooManySubscribeArgs is a SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE or
	// PUNSUBSCRIBE naming more than MaxSubscribeArgs channels or patterns.
	ErrTooManySubscribeArgs = &Error{CodeErr, "at most " + strconv.Itoa(MaxSubscribeArgs) + " channels or patterns in one call"}
	// ErrTooManyChannels is a SUBSCRIBE that would take a connection past
	// MaxChannelsPerConn channels.
	ErrTooManyChannels = &Error{CodeErr, "a connection may listen to at most " + strconv.Itoa(MaxChannelsPerConn) + " channels"}
	// ErrTooManyPatterns is a PSUBSCRIBE that would take a connection past
	// MaxPatternsPerConn patterns.
	ErrTooManyPatterns = &Error{CodeErr, "a connection may listen to at most " + strconv.Itoa(MaxPatternsPerConn) + " patterns"}
	// ErrPatternBacktrack is a PSUBSCRIBE pattern with a part after a '*'
	// longer than MaxPatternBacktrack.
	ErrPatternBacktrack = &Error{CodeErr, "a part of a pattern after a '*' may be at most " + strconv.Itoa(MaxPatternBacktrack) + " bytes long"}
	// ErrTooMuchBacktrack is a PSUBSCRIBE that would take the parts after a
	// '*' of a connection's patterns past MaxBacktrackPerConn bytes in all.
	ErrTooMuchBacktrack = &Error{CodeErr, "the parts after a '*' of a connection's patterns may be at most " + strconv.Itoa(MaxBacktrackPerConn) + " bytes in all"}
	// ErrEmptyOwner is OWNER with an empty id.
	ErrEmptyOwner = &Error{CodeErr, "OWNER must not be empty"}
	// ErrEmptyValue is a SET whose value, the lock's owner, is empty.
	ErrEmptyValue = &Error{CodeErr, "SET's value names the lock's owner and must not be empty"}
	// ErrSetNeedsNX is a SET without NX (or with XX): leasehold's keys are
	// locks, taken when free and never overwritten.
	ErrSetNeedsNX = &Error{CodeErr, "leasehold's SET takes a lock: it needs NX (SET key owner NX PX ms) and never overwrites a value; see docs/redis-compat.md"}
	// ErrSetGet is SET ... GET, which no lock library sends.
	ErrSetGet = &Error{CodeErr, "leasehold's SET does not take GET; read the owner with GET key"}
	// ErrExpireOptions is PEXPIRE or EXPIRE with NX, XX, GT or LT.
	ErrExpireOptions = &Error{CodeErr, "leasehold's PEXPIRE and EXPIRE take no NX, XX, GT or LT"}
	// ErrWrongType is GET, PTTL or TTL of a lock held in shared mode or as
	// a semaphore, which has no one owner: Redis's text, with why.
	ErrWrongType = &Error{CodeWrongType, "Operation against a key holding the wrong kind of value: the lock is held in shared mode or as a semaphore (STATUS and HOLDERS show its leases)"}
	// ErrNegativeNumKeys and ErrTooManyNumKeys are EVAL's numkeys out of
	// range, Redis's texts.
	ErrNegativeNumKeys = &Error{CodeErr, "Number of keys can't be negative"}
	ErrTooManyNumKeys  = &Error{CodeErr, "Number of keys can't be greater than number of args"}
	// ErrNoScript is EVALSHA of a script this node does not have, Redis's text.
	ErrNoScript = &Error{CodeNoScript, "No matching script. Please use EVAL."}
	// ErrUnblocked ends a WAIT that CLIENT UNBLOCK ... ERROR cut short, Redis's text.
	ErrUnblocked = &Error{CodeUnblocked, "client unblocked via CLIENT UNBLOCK"}
	// ErrShutdown ends a WAIT that the server's shutdown cut short.
	ErrShutdown = &Error{CodeShutdown, "server is shutting down"}
	// ErrNoProto is HELLO with a protocol version other than 2.
	ErrNoProto = &Error{CodeNoProto, "sorry, this protocol version is not supported"}
	// ErrInternal is what a client sees for an error nobody mapped; the
	// server logs the original.
	ErrInternal = &Error{CodeErr, "internal error"}
	// ErrMaxMemory is the reply to a command that would make a lock or a
	// lease while the memory in use is over --maxmemory, Redis's text.
	ErrMaxMemory = &Error{CodeOOM, "command not allowed when used memory > 'maxmemory'."}
	// ErrMaxClients is written to a connection beyond the server's
	// max-clients before it is closed, Redis's text.
	ErrMaxClients = &Error{CodeErr, "max number of clients reached"}
	// ErrDBIndex is SELECT of a database other than 0, Redis's text.
	ErrDBIndex = &Error{CodeErr, "DB index is out of range"}
	// ErrBadProtover is HELLO with a protocol version that is not a number,
	// Redis's text.
	ErrBadProtover = &Error{CodeErr, "Protocol version is not an integer or out of range"}
	// ErrAuthNoPassword is AUTH with a password alone on a server without
	// one, Redis's text: there is nothing to check it against.
	ErrAuthNoPassword = &Error{CodeErr, "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"}
	// ErrWrongPass is AUTH or HELLO ... AUTH for a user other than default
	// or with a wrong password, Redis's text, which never says which.
	ErrWrongPass = &Error{CodeWrongPass, "invalid username-password pair or user is disabled."}
	// ErrNoAuth is any command but AUTH, HELLO and QUIT before a connection
	// to a server with a password has authenticated, Redis's text.
	ErrNoAuth = &Error{CodeNoAuth, "Authentication required."}
	// ErrHelloNoAuth is HELLO without its AUTH option before a connection
	// to a server with a password has authenticated, Redis 7.2's text.
	ErrHelloNoAuth = &Error{CodeNoAuth, "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"}
	// ErrProtectedMode is written to a connection from a non-loopback peer
	// of a server with no password in protected mode, before it is closed:
	// Redis's text, adapted to leasehold's flags.
	ErrProtectedMode = &Error{CodeDenied, "leasehold is running in protected mode because protected mode is enabled and no password is set for the default user. " +
		"In this mode connections are only accepted from the loopback interface. " +
		"If you want to connect from external computers to leasehold you may adopt one of the following solutions: " +
		"1) Set a password for the default user: restart the server with --requirepass-file PATH or the LEASEHOLD_REQUIREPASS environment variable, and have clients AUTH. " +
		"2) Bind the server to the loopback interface only (--addr 127.0.0.1:PORT) and reach it from the same host. " +
		"3) If you started the server manually just for testing, restart it with the '--protected-mode no' option, however MAKE SURE leasehold is not publicly accessible from the internet if you do so. " +
		"NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside."}
	// ErrNoPermKey is a command naming a key outside its user's key
	// patterns, Redis 7's text.
	ErrNoPermKey = &Error{CodeNoPerm, "No permissions to access a key"}
	// ErrNoPermChannel is a SUBSCRIBE or PSUBSCRIBE outside its user's
	// channel patterns, Redis 7's text.
	ErrNoPermChannel = &Error{CodeNoPerm, "No permissions to access a channel"}
	// ErrNoACLFile is ACL LOAD on a server started without --acl-file,
	// after Redis's text.
	ErrNoACLFile = &Error{CodeErr, "This leasehold instance is not configured to use an ACL file. Start it with --acl-file PATH to load users from a file."}
	// ErrACLLogCount is ACL LOG with a negative count, Redis's text.
	ErrACLLogCount = &Error{CodeErr, "value is out of range, must be positive"}
	// ErrBadClientName is a CLIENT SETNAME, HELLO ... SETNAME or CLIENT
	// SETINFO value with a space or a byte outside printable ASCII, Redis's
	// text.
	ErrBadClientName = &Error{CodeErr, "Client names cannot contain spaces, newlines or special characters."}
	// ErrUnblockReason is CLIENT UNBLOCK with a reason other than TIMEOUT or
	// ERROR, Redis's text.
	ErrUnblockReason = &Error{CodeErr, "CLIENT UNBLOCK reason should be TIMEOUT or ERROR"}
	// ErrTryAgain is a command that could not run for want of a leader.
	ErrTryAgain = &Error{CodeTryAgain, "no cluster leader is ready (election in progress); nothing was done, try again"}
	// ErrUncertain is a change whose outcome the leader's loss left unknown.
	ErrUncertain = &Error{CodeUncertain, "the leader was lost before the outcome was known: the command may or may not have been applied; retry ACQUIRE with the same OWNER, or check STATUS"}
	// ErrNotCluster is a CLUSTER command on a server not in cluster mode,
	// Redis's text.
	ErrNotCluster = &Error{CodeErr, "This instance has cluster support disabled"}
)

// MovedError is Redis Cluster's redirection: the key's slot lives at addr.
func MovedError(slot uint16, addr string) *Error {
	return &Error{CodeMoved, strconv.Itoa(int(slot)) + " " + addr}
}

// SettingsMismatchError refuses the lock commands of a cluster node whose
// lock-table settings (own) differ from its leader's (leader): it would
// apply entries otherwise than the others do.
func SettingsMismatchError(own, leader string) *Error {
	return &Error{CodeErr, "cluster: this node's lock-table settings (" + quotePrintable([]byte(own), 256) +
		") differ from the leader's (" + quotePrintable([]byte(leader), 256) + "): restart it with the same flags as the others"}
}

// ClusterChangeError is the reply to a CLUSTER command that changes the
// group (ADDNODE, FORGET, SNAPSHOT) and failed with err.
func ClusterChangeError(err error) *Error {
	return &Error{CodeErr, "cluster: " + quotePrintable([]byte(strings.TrimPrefix(err.Error(), "cluster: ")), 512)}
}

// NoPermCommandError is Redis 7's reply to a command the user's rules do
// not allow; cmd is "create", or "acl|list" for a subcommand.
func NoPermCommandError(user, cmd string) *Error {
	return &Error{CodeNoPerm, "User " + quotePrintable([]byte(user), 128) + " has no permissions to run the '" + cmd + "' command"}
}

// ACLLoadError is the reply to an ACL LOAD whose file did not load, after
// Redis's text: the users in force are kept.
func ACLLoadError(reason string) *Error {
	return &Error{CodeErr, quotePrintable([]byte(reason), 512) + ". WARNING: ACL errors detected, no change to the previously active ACL rules was performed"}
}

// UnknownACLCategoryError is Redis's reply to ACL CAT of a category that
// does not exist.
func UnknownACLCategoryError(cat []byte) *Error {
	return &Error{CodeErr, "Unknown category '" + quotePrintable(cat, 64) + "'"}
}

// MisconfError is the reply to a command that would change the lock table
// while the data directory cannot be written; reason is the write's error,
// such as "no space left on device".
func MisconfError(reason string) *Error {
	return &Error{CodeMisconf, "data directory write failed (" + quotePrintable([]byte(reason), 128) +
		"); changes refused until it can be written; VERIFY, STATUS and reads still work"}
}

// MisconfUnknownError replaces the reply of a command that changed the lock
// table before the data directory's write failure was noticed: the change
// is in memory but not on disk, so it is not acknowledged.
func MisconfUnknownError(reason string) *Error {
	return &Error{CodeMisconf, "data directory write failed (" + quotePrintable([]byte(reason), 128) +
		") after this command ran: its outcome is unknown (STATUS tells); changes refused until it can be written"}
}

// ArityError is Redis's reply to a command given the wrong number of arguments.
func ArityError(cmd string) *Error {
	return &Error{CodeErr, "wrong number of arguments for '" + strings.ToLower(cmd) + "' command"}
}

// UnknownCommandError is Redis's reply to a command it does not know,
// quoting the first arguments as Redis does.
func UnknownCommandError(args [][]byte) *Error {
	var b strings.Builder
	b.WriteString("unknown command '")
	b.WriteString(quotePrintable(args[0], 128))
	b.WriteString("', with args beginning with: ")
	for _, a := range args[1:] {
		if b.Len() > 256 {
			break
		}
		b.WriteString("'")
		b.WriteString(quotePrintable(a, 64))
		b.WriteString("' ")
	}
	return &Error{CodeErr, b.String()}
}

// UnknownSubcommandError is Redis's reply to an unknown subcommand.
func UnknownSubcommandError(cmd string, sub []byte) *Error {
	return &Error{CodeErr, "unknown subcommand '" + quotePrintable(sub, 64) + "'. Try " + strings.ToUpper(cmd) + " HELP."}
}

// UnknownScriptError is the reply to EVAL or SCRIPT LOAD of a script that
// is none of the lock libraries' leasehold runs.
func UnknownScriptError() *Error {
	return &Error{CodeErr, "leasehold runs no Lua: it runs the lock scripts of " + KnownScriptLibraries +
		" as lock operations, and this script is none of them (see docs/redis-compat.md)"}
}

// UnsupportedScriptError is the reply to a known script of a library
// leasehold does not run.
func UnsupportedScriptError(library string) *Error {
	return &Error{CodeErr, "leasehold does not run " + library + ": it works on a Redis sorted set, not a lock; use redis-semaphore's Mutex, or leasehold's CREATE key LIMIT n semaphores (see docs/redis-compat.md)"}
}

// ScriptArgsError is the reply to a known script called with too few keys
// or arguments.
func ScriptArgsError(library string) *Error {
	return &Error{CodeErr, "too few keys or arguments for the script of " + library}
}

// ErrWriteInReadOnlyScript is EVAL_RO or EVALSHA_RO of a script that
// writes, Redis's text.
var ErrWriteInReadOnlyScript = &Error{CodeErr, "Write commands are not allowed from read-only scripts."}

// UnsupportedOptionError is Redis's reply to an option PEXPIRE and EXPIRE
// do not know.
func UnsupportedOptionError(opt []byte) *Error {
	return &Error{CodeErr, "Unsupported option " + quotePrintable(opt, 128)}
}

// InvalidExpireError is Redis's reply to a ttl that is zero or negative.
func InvalidExpireError(cmd string) *Error {
	return &Error{CodeErr, "invalid expire time in '" + strings.ToLower(cmd) + "' command"}
}

// UnknownHelpError is the reply to HELP for a command the table does not
// have, worded as Redis's reply to an unknown subcommand but not as its reply
// to an unknown command, which would read as if HELP itself were unknown.
func UnknownHelpError(name []byte) *Error {
	return &Error{CodeErr, "no such command '" + quotePrintable(name, 64) + "'. Try HELP."}
}

// HelloOptionError is Redis's reply to an unknown HELLO option.
func HelloOptionError(opt []byte) *Error {
	return &Error{CodeErr, "Syntax error in HELLO option '" + quotePrintable(opt, 64) + "'"}
}

// UnrecognizedOptionError is Redis's reply to CLIENT SETINFO with an
// attribute other than LIB-NAME or LIB-VER.
func UnrecognizedOptionError(opt []byte) *Error {
	return &Error{CodeErr, "Unrecognized option '" + quotePrintable(opt, 64) + "'"}
}

// ConfigUnsupportedError is the reply to a CONFIG subcommand that would
// change settings (SET, RESETSTAT, REWRITE): leasehold takes its settings
// from flags at start only.
func ConfigUnsupportedError(sub string) *Error {
	return &Error{CodeErr, "CONFIG " + strings.ToUpper(sub) + " is not supported: settings are flags, fixed at start"}
}

// SubscribedOnlyError is Redis's reply to a command that a RESP2 connection
// may not send while it listens after SUBSCRIBE or PSUBSCRIBE.
func SubscribedOnlyError(cmd string) *Error {
	return &Error{CodeErr, "Can't execute '" + strings.ToLower(cmd) +
		"': only (P)SUBSCRIBE / (P)UNSUBSCRIBE / PING / QUIT are allowed in this context"}
}

// WaitTooLongError is the reply to a WAIT longer than the server's max-ttl:
// a wait that outlives any lease it could be granted is a mistake.
func WaitTooLongError(maxTTL time.Duration) *Error {
	return &Error{CodeErr, "WAIT must be at most max-ttl (" + maxTTL.String() + ")"}
}

// TooManyEphemeralError is the reply to an EPHEMERAL grant that would tie
// more than limit leases to one connection.
func TooManyEphemeralError(limit int) *Error {
	return &Error{CodeErr, "too many EPHEMERAL leases on this connection (" + strconv.Itoa(limit) + "); release some first"}
}

// ProtocolErrorReply is the reply to malformed framing, after which the
// connection is closed.
func ProtocolErrorReply(err *ProtocolError) *Error {
	return &Error{CodeErr, err.Error()}
}

// quotePrintable shortens b and replaces bytes that would corrupt an error
// line or a terminal.
func quotePrintable(b []byte, limit int) string {
	if len(b) > limit {
		b = b[:limit]
	}
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			c = '?'
		}
		out = append(out, c)
	}
	return string(out)
}

// lockerCodes are the wire codes of the lock table's errors (locker.Errors)
// that are not CodeErr; every other one is CodeErr, and the message is the
// error's own text without its package prefix. codeInternal marks the errors
// of the table's start and restore, which no command meets: Reply leaves
// them unknown, so that the server logs one and the client sees ErrInternal.
var lockerCodes = map[error]string{
	locker.ErrNoSuchLock:          CodeNoLock,
	locker.ErrInUse:               CodeInUse,
	locker.ErrInLockDelay:         CodeInUse,
	locker.ErrTableFull:           CodeOOM,
	locker.ErrClosed:              codeInternal,
	locker.ErrClockBeforeEpoch:    codeInternal,
	locker.ErrClockPastTokenRange: codeInternal,
	locker.ErrTokenState:          codeInternal,
	locker.ErrQueueState:          codeInternal,
}

// codeInternal is lockerCodes' mark of an error no client should meet.
const codeInternal = ""

// Reply turns any error a handler met into the text of its RESP error reply.
// It is the one place where errors become wire codes. known is false for an
// error nobody mapped, which the caller should log: the client then sees
// ErrInternal.
func Reply(err error) (text string, known bool) {
	var we *Error
	if errors.As(err, &we) {
		return we.Error(), true
	}
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return ProtocolErrorReply(pe).Error(), true
	}
	for _, le := range locker.Errors {
		if !errors.Is(err, le) {
			continue
		}
		code, ok := lockerCodes[le]
		switch {
		case !ok:
			code = CodeErr
		case code == codeInternal:
			return ErrInternal.Error(), false
		}
		return code + " " + strings.TrimPrefix(err.Error(), "locker: "), true
	}
	return ErrInternal.Error(), false
}
