package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/acl"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/protocol"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// aclTestFile is the users of most tests here: one per category, each
// limited to jobs:* keys and their event channels, and an admin.
const aclTestFile = `# users for server/acl_test.go
user reader on >readerpw ~jobs:* &__lock__:jobs:* +@read
user locker on >lockerpw ~jobs:* +@lock
user manager on >managerpw ~jobs:* +@manage
user nothing on >nothingpw ~jobs:*
user admin on >adminpw ~* &* +@all
user disabled off >disabledpw ~* +@all
`

// withACLFile writes content to a file in the test's temporary directory
// and starts the server with it; the path is in cfg.ACLFile.
func withACLFile(t testing.TB, content string) option {
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.ACLFile = path }
}

// userClient is a go-redis client that authenticates with Username and
// Password (HELLO 3 AUTH, then AUTH after NOPROTO).
func (ts *testServer) userClient(user, pass string) *redis.Client {
	return ts.run.Client(func(o *redis.Options) { o.Username, o.Password, o.MaxRetries = user, pass, -1 })
}

// TestACLCategories runs a command of every category (and every command
// but the pub/sub and handshake ones, which have tests of their own) as
// each user, on a key inside and one outside its patterns: a command its
// categories do not allow gets Redis 7's NOPERM for the command whatever
// the key, an allowed one NOPERM for the key outside, and inside runs.
func TestACLCategories(t *testing.T) {
	ts := startServer(t, withACLFile(t, aclTestFile))
	admin := ts.userClient("admin", "adminpw")
	type command struct {
		category string
		keyed    bool // the command names the key
		args     func(key string) []any
	}
	withKey := func(cat string, f func(k string) []any) command { return command{cat, true, f} }
	noKey := func(cat string, args ...any) command { return command{cat, false, func(string) []any { return args }} }
	commands := []command{
		withKey("read", func(k string) []any { return []any{"VERIFY", k, 1} }),
		withKey("read", func(k string) []any { return []any{"STATUS", k} }),
		withKey("read", func(k string) []any { return []any{"HOLDERS", k, 0} }),
		noKey("read", "LOCKS", 0),
		noKey("read", "LOCKSTATS"),
		withKey("lock", func(k string) []any { return []any{"ACQUIRE", k, 1000} }),
		withKey("lock", func(k string) []any { return []any{"MACQUIRE", 1000, 1, k} }),
		withKey("lock", func(k string) []any { return []any{"EXTEND", k, 1, 1000} }),
		withKey("lock", func(k string) []any { return []any{"RELEASE", k, 1} }),
		withKey("lock", func(k string) []any { return []any{"MRELEASE", k, 1} }),
		withKey("manage", func(k string) []any { return []any{"CREATE", k} }),
		withKey("manage", func(k string) []any { return []any{"DELETE", k} }),
		withKey("admin", func(k string) []any { return []any{"FORCE-RELEASE", k} }),
		noKey("admin", "INFO", "stats"),
		noKey("admin", "CONFIG", "GET", "maxmemory"),
		noKey("admin", "ACL", "LIST"),
		noKey("admin", "ACL", "USERS"),
		noKey("admin", "ACL", "LOG"),
		noKey("admin", "SLOWLOG", "LEN"),
		noKey("connection", "PING"),
		noKey("connection", "ECHO", "x"),
		noKey("connection", "SELECT", 0),
		noKey("connection", "CLIENT", "ID"),
		noKey("connection", "CLIENT", "UNBLOCK", 999999),
		noKey("connection", "COMMAND", "COUNT"),
		noKey("connection", "HELP"),
		noKey("connection", "ACL", "WHOAMI"),
		noKey("connection", "ACL", "CAT"),
		noKey("connection", "READONLY"),
		noKey("connection", "READWRITE"),
		noKey("read", "CLUSTER", "INFO"),
		noKey("admin", "CLUSTER", "FORGET", "n9"),
		// The Redis lock libraries' commands, by their own category.
		withKey("lock", func(k string) []any { return []any{"SET", k, "v", "NX", "PX", 1000} }),
		withKey("read", func(k string) []any { return []any{"GET", k} }),
		withKey("lock", func(k string) []any { return []any{"DEL", k} }),
		withKey("lock", func(k string) []any { return []any{"UNLINK", k} }),
		withKey("read", func(k string) []any { return []any{"EXISTS", k} }),
		withKey("lock", func(k string) []any { return []any{"PEXPIRE", k, 1000} }),
		withKey("lock", func(k string) []any { return []any{"EXPIRE", k, 1} }),
		withKey("lock", func(k string) []any { return []any{"PEXPIREAT", k, 1} }),
		withKey("lock", func(k string) []any { return []any{"EXPIREAT", k, 1} }),
		withKey("read", func(k string) []any { return []any{"PTTL", k} }),
		withKey("read", func(k string) []any { return []any{"TTL", k} }),
		withKey("lock", func(k string) []any { return []any{"EVAL", script(t, "redis-py Lock.release").Text, 1, k, "v"} }),
		withKey("lock", func(k string) []any { return []any{"EVALSHA", script(t, "redis-py Lock.release").SHA1, 1, k, "v"} }),
		withKey("read", func(k string) []any { return []any{"EVAL_RO", script(t, "bsm/redislock Lock.TTL").Text, 1, k, "v"} }),
		withKey("read", func(k string) []any { return []any{"EVALSHA_RO", script(t, "bsm/redislock Lock.TTL").SHA1, 1, k, "v"} }),
		noKey("lock", "SCRIPT", "EXISTS", "x"),
	}
	covered := map[string]bool{"subscribe": true, "psubscribe": true, "unsubscribe": true, "punsubscribe": true, "auth": true, "hello": true, "quit": true}
	for _, cmd := range commands {
		covered[strings.ToLower(cmd.args("k")[0].(string))] = true
	}
	for _, cmd := range protocol.Commands {
		if !covered[cmd.Name] {
			t.Errorf("command %s is not in the table", cmd.Name)
		}
	}
	users := []struct {
		name       string
		categories []string
	}{
		{"reader", []string{"read"}},
		{"locker", []string{"lock"}},
		{"manager", []string{"manage"}},
		{"nothing", nil},
		{"admin", []string{"read", "lock", "manage", "admin"}},
	}
	for _, u := range users {
		rdb := ts.userClient(u.name, u.name+"pw")
		for _, cmd := range commands {
			allowed := cmd.category == "connection" || slices.Contains(u.categories, cmd.category)
			for _, key := range []string{"jobs:" + u.name, "other:" + u.name} {
				args := cmd.args(key)
				name := strings.ToLower(args[0].(string))
				if name == "acl" || name == "cluster" {
					name += "|" + strings.ToLower(args[1].(string))
				}
				err := rdb.Do(ctx(t), args...).Err()
				var want string
				switch {
				case !allowed:
					want = "NOPERM User " + u.name + " has no permissions to run the '" + name + "' command"
				case u.name != "admin" && strings.HasPrefix(key, "other:") && cmd.keyed:
					want = "NOPERM No permissions to access a key"
				}
				switch {
				case want == "" && err != nil && strings.HasPrefix(err.Error(), "NOPERM"):
					t.Errorf("%s: %v: %v, want it to run", u.name, args, err)
				case want != "" && (err == nil || err.Error() != want):
					t.Errorf("%s: %v: %v, want %q", u.name, args, err, want)
				}
			}
		}
	}
	// Nothing a refused command named was made.
	for _, u := range users[:len(users)-1] {
		if st := status(t, admin, "other:"+u.name); st != nil {
			t.Fatalf("other:%s after the refused commands: %v", u.name, st)
		}
	}
	if got := infoField(t, admin, "stats", "acl_access_denied_cmd"); got == "0" {
		t.Fatal("acl_access_denied_cmd not counted")
	}
	if got := infoField(t, admin, "stats", "acl_access_denied_key"); got == "0" {
		t.Fatal("acl_access_denied_key not counted")
	}
}

// TestACLMAcquireAllOrNothing: one key outside the user's patterns refuses
// MACQUIRE as a whole; the permitted keys are not taken.
func TestACLMAcquireAllOrNothing(t *testing.T) {
	ts := startServer(t, withACLFile(t, aclTestFile))
	locker := ts.userClient("locker", "lockerpw")
	admin := ts.userClient("admin", "adminpw")
	do(t, locker, "MACQUIRE", 1000, 3, "jobs:a", "other:b", "jobs:c").Err("NOPERM No permissions to access a key")
	for _, k := range []string{"jobs:a", "jobs:c"} {
		if st := status(t, admin, k); st != nil {
			t.Fatalf("%s after the refused MACQUIRE: %v", k, st)
		}
	}
	do(t, locker, "MACQUIRE", 1000, 2, "jobs:a", "jobs:c").Slice()
	// Options after the keys are not keys.
	do(t, locker, "MACQUIRE", 1000, 1, "jobs:d", "OWNER", "other:x").Slice()
}

// TestACLLocksFiltered: LOCKS shows a user only the keys it may access,
// and its cursor still ends, even when a whole COUNT's worth is hidden.
func TestACLLocksFiltered(t *testing.T) {
	ts := startServer(t, withACLFile(t, aclTestFile))
	admin := ts.userClient("admin", "adminpw")
	var want []string
	for i := range 40 {
		do(t, admin, "CREATE", "other:"+strconv.Itoa(i)).Int()
		if i%4 == 0 {
			k := "jobs:" + strconv.Itoa(i)
			do(t, admin, "CREATE", k).Int()
			want = append(want, k)
		}
	}
	reader := ts.userClient("reader", "readerpw")
	for _, match := range []string{"", "*", "jobs:1*"} {
		var got []string
		cursor := "0"
		for calls := 0; ; calls++ {
			if calls > 100 {
				t.Fatal("LOCKS cursor does not end")
			}
			args := []any{"LOCKS", cursor, "COUNT", 3}
			if match != "" {
				args = append(args, "MATCH", match)
			}
			page := do(t, reader, args...).Slice()
			cursor = page[0].(string)
			for _, k := range page[1].([]any) {
				got = append(got, k.(string))
			}
			if cursor == "0" {
				break
			}
		}
		slices.Sort(got)
		w := slices.Clone(want)
		if match == "jobs:1*" {
			w = slices.DeleteFunc(w, func(k string) bool { return !strings.HasPrefix(k, "jobs:1") })
		}
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Fatalf("MATCH %q: LOCKS = %v, want %v", match, got, w)
		}
	}
}

// TestACLChannels: SUBSCRIBE needs a channel matching one of the user's
// channel patterns, PSUBSCRIBE a pattern that is one of them (Redis 7),
// so PSUBSCRIBE * cannot watch every lock.
func TestACLChannels(t *testing.T) {
	ts := startServer(t, withACLFile(t, aclTestFile))
	rc := ts.dial()
	rc.send(resp("AUTH", "reader", "readerpw"))
	rc.expect("OK")
	for _, args := range [][]string{
		{"PSUBSCRIBE", "*"},
		{"PSUBSCRIBE", "__lock__:*"},
		{"PSUBSCRIBE", "__lock__:jobs:1*"},
		{"SUBSCRIBE", "__lock__:other:1"},
		{"SUBSCRIBE", "__lock__:jobs:1", "__lock__:other:1"}, // all or nothing
	} {
		rc.send(resp(args...))
		rc.expect(respError("NOPERM No permissions to access a channel"))
	}
	rc.send(resp("PSUBSCRIBE", "__lock__:jobs:*"))
	rc.expect([]any{"psubscribe", "__lock__:jobs:*", int64(1)})
	rc.send(resp("SUBSCRIBE", "__lock__:jobs:1"))
	rc.expect([]any{"subscribe", "__lock__:jobs:1", int64(2)})

	locker := ts.userClient("locker", "lockerpw")
	do(t, locker, "ACQUIRE", "jobs:1", 1000).Token()
	for range 2 { // the event, once for the channel and once for the pattern
		if msg, ok := rc.reply().([]any); !ok || !strings.Contains(fmtAny(msg[0]), "message") {
			t.Fatalf("got %#v, want a message", msg)
		}
	}
	admin := ts.userClient("admin", "adminpw")
	if got := infoField(t, admin, "stats", "acl_access_denied_channel"); got != "5" {
		t.Fatalf("acl_access_denied_channel = %s, want 5", got)
	}
}

// TestACLAuthReplies: a wrong password, an unknown user and a disabled
// user get the same reply, byte for byte, and are counted alike.
func TestACLAuthReplies(t *testing.T) {
	ts := startServer(t, withACLFile(t, aclTestFile))
	var replies []string
	for _, args := range [][]string{
		{"AUTH", "reader", "wrong"},
		{"AUTH", "nosuchuser", "wrong"},
		{"AUTH", "nosuchuser", "readerpw"},
		{"AUTH", "disabled", "disabledpw"},
		{"AUTH", "wrong"}, // the default user, off: no password works
		{"HELLO", "2", "AUTH", "nosuchuser", "readerpw"},
		{"HELLO", "2", "AUTH", "reader", "wrong"},
	} {
		rc := ts.dial()
		rc.send(resp(args...))
		replies = append(replies, rc.line())
		rc.send(resp("PING"))
		rc.expect(respError("NOAUTH Authentication required."))
	}
	for _, r := range replies {
		if r != "-WRONGPASS invalid username-password pair or user is disabled." {
			t.Fatalf("replies %q", replies)
		}
	}
	admin := ts.userClient("admin", "adminpw")
	if got := infoField(t, admin, "stats", "acl_access_denied_auth"); got != "7" {
		t.Fatalf("acl_access_denied_auth = %s, want 7", got)
	}
}

// TestACLDefaultUser covers how the default user is made: from the file,
// from requirepass, off, or open (on nopass: no AUTH needed).
func TestACLDefaultUser(t *testing.T) {
	t.Run("file without default, no password: default is off", func(t *testing.T) {
		ts := startServer(t, withACLFile(t, "user a on >apw +@all ~*\n"))
		rc := ts.dial()
		rc.send(resp("PING") + resp("AUTH", "x") + resp("AUTH", "default", "") + resp("AUTH", "a", "apw") + resp("ACL", "WHOAMI"))
		rc.expect(respError("NOAUTH Authentication required."))
		rc.expectErr("WRONGPASS")
		rc.expectErr("WRONGPASS")
		rc.expect("OK")
		rc.expect("a")
	})
	t.Run("file without default, requirepass", func(t *testing.T) {
		ts := startServer(t, withACLFile(t, "user a on >apw +@all ~*\n"), withRequirePass(testPassword))
		rc := ts.dial()
		rc.send(resp("AUTH", testPassword) + resp("ACL", "WHOAMI") + resp("ACQUIRE", "k", "1000"))
		rc.expect("OK")
		rc.expect("default")
		if _, ok := rc.reply().(int64); !ok {
			t.Fatal("ACQUIRE as the default user: no token")
		}
	})
	t.Run("default on nopass in the file: no AUTH needed", func(t *testing.T) {
		ts := startServer(t, withACLFile(t, "user default on nopass ~pub:* +@read\n"))
		rc := ts.dial()
		rc.send(resp("ACL", "WHOAMI") + resp("STATUS", "pub:1") + resp("STATUS", "x") + resp("ACQUIRE", "pub:1", "10"))
		rc.expect("default")
		rc.expect(nil)
		rc.expect(respError("NOPERM No permissions to access a key"))
		rc.expect(respError("NOPERM User default has no permissions to run the 'acquire' command"))
	})
	t.Run("default in the file and requirepass: refused", func(t *testing.T) {
		cfg := testConfig(t, withACLFile(t, "user default on >x +@all\n"), withRequirePass("y"))
		if _, err := New(cfg, zerolog.Nop()); !errors.Is(err, errDefaultTwice) {
			t.Fatalf("New: %v, want errDefaultTwice", err)
		}
	})
	t.Run("a file that does not parse: refused", func(t *testing.T) {
		cfg := testConfig(t, withACLFile(t, "user a on\nuser b bogus\n"))
		if _, err := New(cfg, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "users.acl:2:") {
			t.Fatalf("New: %v, want the file's line 2", err)
		}
	})
	t.Run("protected mode: a file's off default counts as a password", func(t *testing.T) {
		ts := startServer(t, withACLFile(t, "user a on >apw +@all ~*\n"), withPeersRemote())
		rc := ts.dial()
		rc.send(resp("AUTH", "a", "apw"))
		rc.expect("OK")
	})
}

// TestACLPreAuthLimits: with users from a file, a connection that has not
// authenticated is held to Redis's pre-auth limits; AUTH as a user lifts
// them.
func TestACLPreAuthLimits(t *testing.T) {
	ts := startServer(t, withACLFile(t, aclTestFile))
	big := strings.Repeat("x", int(protocol.PreAuthMaxBulkLen)+1)
	rc := ts.dial()
	rc.send(resp("AUTH", "reader", big))
	rc.expect(respError("ERR Protocol error: unauthenticated bulk length"))
	if !rc.closed() {
		t.Fatal("connection open after the protocol error")
	}
	rc = ts.dial()
	rc.send(resp("AUTH", "reader", "readerpw") + resp("ECHO", big))
	rc.expect("OK")
	rc.expect(big)
}

// TestACLCommands covers ACL WHOAMI, CAT, LIST, USERS and LOG.
func TestACLCommands(t *testing.T) {
	ts := startServer(t, withACLFile(t, aclTestFile))
	admin := ts.userClient("admin", "adminpw")
	reader := ts.userClient("reader", "readerpw")
	do(t, reader, "ACL", "WHOAMI").Str("reader")
	if got := do(t, reader, "ACL", "CAT").Slice(); len(got) != len(protocol.Categories) {
		t.Fatalf("ACL CAT = %v", got)
	}
	if got := do(t, reader, "ACL", "CAT", "lock").Slice(); !slices.Equal(got, []any{"acquire", "macquire", "release", "mrelease", "extend",
		"set", "del", "unlink", "pexpire", "expire", "pexpireat", "expireat", "eval", "evalsha", "script"}) {
		t.Fatalf("ACL CAT lock = %v", got)
	}
	do(t, reader, "ACL", "CAT", "nosuch").Err("ERR Unknown category 'nosuch'")
	if got := do(t, admin, "ACL", "USERS").Slice(); !slices.Equal(got, []any{"admin", "default", "disabled", "locker", "manager", "nothing", "reader"}) {
		t.Fatalf("ACL USERS = %v", got)
	}
	list := do(t, admin, "ACL", "LIST").Slice()
	wantReader := "user reader on #" + sha256Hex("readerpw") + " ~jobs:* resetchannels &__lock__:jobs:* -@all +@read"
	if !slices.Contains(list, any(wantReader)) || !slices.Contains(list, any("user default off resetchannels -@all")) {
		t.Fatalf("ACL LIST = %q, want %q among them", list, wantReader)
	}
	for _, l := range list {
		if strings.Contains(l.(string), "pw") {
			t.Fatalf("ACL LIST shows a password: %q", l)
		}
	}
	do(t, admin, "ACL", "WHOAMI", "x").Err("ERR wrong number of arguments for 'acl|whoami' command")
	do(t, admin, "ACL", "NOSUCH").Err("ERR unknown subcommand 'NOSUCH'")
	do(t, admin, "ACL", "LOAD").OK()

	// ACL LOG: newest first, a repeated refusal counted in its entry.
	do(t, admin, "ACL", "LOG", "RESET").OK()
	locker := ts.userClient("locker", "lockerpw")
	do(t, locker, "CREATE", "jobs:1").Err("NOPERM")
	do(t, locker, "CREATE", "jobs:1").Err("NOPERM")
	do(t, locker, "ACQUIRE", "other:1", 1000).Err("NOPERM")
	rc := ts.dial()
	rc.send(resp("AUTH", "nobody", "x"))
	rc.expectErr("WRONGPASS")
	entries := do(t, admin, "ACL", "LOG").Slice()
	if len(entries) != 3 {
		t.Fatalf("ACL LOG has %d entries, want 3: %v", len(entries), entries)
	}
	want := []map[string]string{
		{"reason": "auth", "object": "AUTH", "username": "nobody", "count": "1", "context": "toplevel"},
		{"reason": "key", "object": "other:1", "username": "locker", "count": "1"},
		{"reason": "command", "object": "create", "username": "locker", "count": "2"},
	}
	for i, e := range entries {
		fields := e.([]any)
		m := map[string]string{}
		for j := 0; j < len(fields); j += 2 {
			m[fields[j].(string)] = fmtAny(fields[j+1])
		}
		for _, k := range []string{"count", "reason", "context", "object", "username", "age-seconds", "client-info", "entry-id", "timestamp-created", "timestamp-last-updated"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("entry %d lacks %s: %v", i, k, m)
			}
		}
		for k, v := range want[i] {
			if m[k] != v {
				t.Fatalf("entry %d: %s = %q, want %q (%v)", i, k, m[k], v, m)
			}
		}
	}
	if got := do(t, admin, "ACL", "LOG", 1).Slice(); len(got) != 1 {
		t.Fatalf("ACL LOG 1 = %v", got)
	}
	do(t, admin, "ACL", "LOG", -1).Err("ERR value is out of range, must be positive")
}

func fmtAny(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

func sha256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// TestACLLogBounded: the log keeps the newest acl.LogMax entries.
func TestACLLogBounded(t *testing.T) {
	ts := startServer(t, withACLFile(t, aclTestFile))
	locker := ts.userClient("locker", "lockerpw")
	for i := range acl.LogMax + 5 {
		do(t, locker, "ACQUIRE", "k"+strconv.Itoa(i), 1000).Err("NOPERM No permissions to access a key")
	}
	admin := ts.userClient("admin", "adminpw")
	entries := do(t, admin, "ACL", "LOG", 1000).Slice()
	if len(entries) != acl.LogMax {
		t.Fatalf("ACL LOG has %d entries, want %d", len(entries), acl.LogMax)
	}
}

// TestACLReload: ACL LOAD puts a changed file in force for the next
// command of connections already open; a file that does not parse keeps
// the old users; a removed or disabled user's connections are closed,
// subscribers too, and so is a subscriber whose channel is no longer
// allowed.
func TestACLReload(t *testing.T) {
	opt := withACLFile(t, aclTestFile)
	var cfg Config
	opt(&cfg)
	ts := startServer(t, opt)
	admin := ts.userClient("admin", "adminpw")
	locker := ts.userClient("locker", "lockerpw")
	do(t, locker, "ACQUIRE", "jobs:1", 1000).Token()
	do(t, locker, "STATUS", "jobs:1").Err("NOPERM")

	removed := ts.dial()
	removed.send(resp("AUTH", "manager", "managerpw"))
	removed.expect("OK")
	disabledSub := ts.dial()
	disabledSub.send(resp("AUTH", "nothing", "nothingpw") + resp("PING"))
	disabledSub.expect("OK")
	disabledSub.expect("PONG")
	narrowed := ts.dial()
	narrowed.send(resp("AUTH", "reader", "readerpw") + resp("PSUBSCRIBE", "__lock__:jobs:*"))
	narrowed.expect("OK")
	narrowed.expect([]any{"psubscribe", "__lock__:jobs:*", int64(1)})
	kept := ts.dial()
	kept.send(resp("AUTH", "reader", "readerpw") + resp("SUBSCRIBE", "__lock__:jobs:1"))
	kept.expect("OK")
	kept.expect([]any{"subscribe", "__lock__:jobs:1", int64(1)})

	write := func(content string) {
		if err := os.WriteFile(cfg.ACLFile, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("user broken bogus\n")
	msg := do(t, admin, "ACL", "LOAD").Err("ERR " + cfg.ACLFile + ":1: syntax error in ACL rule (rule bogus)")
	if !strings.HasSuffix(msg, "WARNING: ACL errors detected, no change to the previously active ACL rules was performed") {
		t.Fatalf("ACL LOAD: %q", msg)
	}
	do(t, locker, "STATUS", "jobs:1").Err("NOPERM") // unchanged

	write(strings.NewReplacer(
		"+@lock", "+@lock +@read",
		"user manager on >managerpw ~jobs:* +@manage\n", "",
		"user nothing on", "user nothing off",
		"&__lock__:jobs:*", "&__lock__:jobs:1",
	).Replace(aclTestFile))
	do(t, admin, "ACL", "LOAD").OK()
	do(t, locker, "STATUS", "jobs:1").Fields() // the same connection, new rules

	for name, rc := range map[string]*rawConn{"removed user": removed, "disabled user": disabledSub, "pattern no longer allowed": narrowed} {
		if !rc.closed() {
			t.Fatalf("%s: connection still open", name)
		}
	}
	kept.send(resp("PING"))
	kept.expect([]any{"pong", ""})
	do(t, ts.userClient("reader", "readerpw"), "ACL", "WHOAMI").Str("reader")
	do(t, ts.userClient("manager", "managerpw"), "PING").Err("WRONGPASS")
	if err := ts.ReloadACL(); err != nil {
		t.Fatal(err)
	}
}

// TestACLReloadWithoutFile: ACL LOAD and ReloadACL need an ACL file.
func TestACLReloadWithoutFile(t *testing.T) {
	ts := startServer(t)
	do(t, ts.client(), "ACL", "LOAD").Err("ERR This leasehold instance is not configured to use an ACL file")
	if err := ts.ReloadACL(); !errors.Is(err, errNoACLFile) {
		t.Fatalf("ReloadACL: %v", err)
	}
	// The default user of a server without a file: everything, no password.
	if got := do(t, ts.client(), "ACL", "LIST").Slice(); !slices.Equal(got, []any{"user default on nopass ~* &* +@all"}) {
		t.Fatalf("ACL LIST = %q", got)
	}
}

// TestACLRedisCli logs in as a user with redis-cli --user --pass.
func TestACLRedisCli(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	ts := startServer(t, withACLFile(t, aclTestFile))
	host, port := ts.hostPort()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "reader", "--pass", "readerpw", "--no-auth-warning", "ACL", "WHOAMI"}, "reader\n"},
		{[]string{"--user", "reader", "--pass", "readerpw", "--no-auth-warning", "ACQUIRE", "jobs:1", "1000"}, "NOPERM User reader has no permissions to run the 'acquire' command\n\n"},
		{[]string{"--user", "locker", "--pass", "lockerpw", "--no-auth-warning", "ACQUIRE", "other", "1000"}, "NOPERM No permissions to access a key\n\n"},
		{[]string{"--user", "reader", "--pass", "wrong", "--no-auth-warning", "PING"}, "NOAUTH Authentication required.\n\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, cli, append([]string{"-h", host, "-p", port}, tc.args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v; stderr %q", err, stderr.String())
			}
			if stdout.String() != tc.want {
				t.Fatalf("stdout %q, want %q (stderr %q)", stdout.String(), tc.want, stderr.String())
			}
		})
	}
}

// TestACLCommandInfo: COMMAND INFO reports each command's ACL category,
// and CLIENT's and ACL's subcommands with theirs, as Redis does.
func TestACLCommandInfo(t *testing.T) {
	ts := startServer(t)
	info := do(t, ts.client(), "COMMAND", "INFO", "create", "acl").Slice()
	if cats := info[0].([]any)[6].([]any); !slices.Equal(cats, []any{"@manage"}) {
		t.Fatalf("create's categories %v", cats)
	}
	subs := info[1].([]any)[9].([]any)
	var got []string
	for _, s := range subs {
		s := s.([]any)
		got = append(got, s[0].(string)+" "+s[6].([]any)[0].(string))
	}
	if !slices.Contains(got, "acl|whoami @connection") || !slices.Contains(got, "acl|load @admin") {
		t.Fatalf("acl's subcommands %v", got)
	}
}

// TestACLReloadClosesWaiter: a connection parked in ACQUIRE ... WAIT whose
// user a reload removes is closed at once, and leaves the lock's queue.
func TestACLReloadClosesWaiter(t *testing.T) {
	opt := withACLFile(t, aclTestFile)
	var cfg Config
	opt(&cfg)
	ts := startServer(t, opt)
	admin := ts.userClient("admin", "adminpw")
	do(t, admin, "ACQUIRE", "jobs:held", 60000).Token()
	rc := ts.dial()
	rc.send(resp("AUTH", "locker", "lockerpw") + resp("ACQUIRE", "jobs:held", "1000", "WAIT", "60000"))
	rc.expect("OK")
	testutil.Eventually(t, 10*time.Second, "the waiter queued", func() bool {
		return status(t, admin, "jobs:held")["waiters"] == "1"
	})
	if err := os.WriteFile(cfg.ACLFile, []byte("user admin on >adminpw ~* &* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ts.ReloadACL(); err != nil {
		t.Fatal(err)
	}
	rc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if !rc.closed() {
		t.Fatal("the removed user's waiting connection is open")
	}
	testutil.Eventually(t, 10*time.Second, "the waiter gone from the queue", func() bool {
		return status(t, admin, "jobs:held")["waiters"] == "0"
	})
}
