package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/protocol"
)

func hashOf(pw string) string {
	d := sha256.Sum256([]byte(pw))
	return hex.EncodeToString(d[:])
}

func mustUser(t *testing.T, name string, rules ...string) *User {
	t.Helper()
	u, err := NewUser(name, rules...)
	if err != nil {
		t.Fatalf("NewUser(%q, %q): %v", name, rules, err)
	}
	return u
}

func cmdIndex(t *testing.T, name string) int {
	t.Helper()
	i := protocol.LookupIndex([]byte(name))
	if i < 0 {
		t.Fatalf("no command %q", name)
	}
	return i
}

// TestRules applies each rule line to a new user and checks ACL LIST's
// rendering of the result, which is the canonical form of what it did.
func TestRules(t *testing.T) {
	h := hashOf("pw")
	for _, tc := range []struct {
		rules string
		want  string
	}{
		{"", "off resetchannels -@all"},
		{"on", "on resetchannels -@all"},
		{"on off", "off resetchannels -@all"},
		{">pw", "off #" + h + " resetchannels -@all"},
		{">pw >pw", "off #" + h + " resetchannels -@all"},
		{"#" + h, "off #" + h + " resetchannels -@all"},
		{">pw <pw", "off resetchannels -@all"},
		{">pw !" + h, "off resetchannels -@all"},
		{">pw nopass", "off nopass resetchannels -@all"},
		{"nopass >pw", "off #" + h + " resetchannels -@all"},
		{">pw resetpass", "off resetchannels -@all"},
		{"~a:* ~b", "off ~a:* ~b resetchannels -@all"},
		{"~a ~a", "off ~a resetchannels -@all"},
		{"allkeys", "off ~* resetchannels -@all"},
		{"~*", "off ~* resetchannels -@all"},
		{"allkeys resetkeys ~x", "off ~x resetchannels -@all"},
		{"&__lock__:a*", "off resetchannels &__lock__:a* -@all"},
		{"allchannels", "off &* -@all"},
		{"&* resetchannels", "off resetchannels -@all"},
		{"+@lock -release", "off resetchannels -@all +@lock -release"},
		{"+@READ", "off resetchannels -@all +@read"},
		{"allcommands", "off resetchannels +@all"},
		{"+@lock allcommands -@admin", "off resetchannels +@all -@admin"},
		{"+@all nocommands", "off resetchannels -@all"},
		{"+client|unblock +acl|list", "off resetchannels -@all +client|unblock +acl|list"},
		{"-acl", "off resetchannels -@all -acl"},
		{"on nopass ~* &* +@all reset", "off resetchannels -@all"},
		{"ON NoPass AllKeys", "on nopass ~* resetchannels -@all"},
	} {
		t.Run(tc.rules, func(t *testing.T) {
			u := mustUser(t, "alice", strings.Fields(tc.rules)...)
			if got := u.Rules(); got != "user alice "+tc.want {
				t.Fatalf("Rules() = %q, want %q", got, "user alice "+tc.want)
			}
			// The rendering is itself a valid rule line that gives the same user.
			again := mustUser(t, "alice", strings.Fields(tc.want)...)
			if again.Rules() != u.Rules() {
				t.Fatalf("re-parsed: %q, want %q", again.Rules(), u.Rules())
			}
		})
	}
}

func TestRuleErrors(t *testing.T) {
	for _, tc := range []struct {
		rules string
		want  error
	}{
		{"bogus", ErrUnknownRule},
		{"%R~x", ErrUnknownRule},
		{"<nope", ErrNoSuchPassword},
		{"!" + hashOf("x"), ErrNoSuchPassword},
		{"#abc", ErrBadHash},
		{"#" + strings.ToUpper(hashOf("x")), ErrBadHash},
		{"#" + strings.Repeat("g", 64), ErrBadHash},
		{"allkeys ~x", ErrPatternAfterAll},
		{"allchannels &x", ErrPatternAfterAll},
		{"+@nosuch", ErrUnknownCommand},
		{"+nosuch", ErrUnknownCommand},
		{"+client|nosuch", ErrUnknownCommand},
		{"+acquire|x", ErrUnknownCommand},
		{"-ping", ErrConnectionCommand},
		{"-@connection", ErrConnectionCommand},
		{"-acl|whoami", ErrConnectionCommand},
	} {
		t.Run(tc.rules, func(t *testing.T) {
			_, err := NewUser("alice", strings.Fields(tc.rules)...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	for _, name := range []string{"", "a b", "a\x00", "a\n", "a\x7f", "\tb"} {
		if _, err := NewUser(name); !errors.Is(err, ErrBadUserName) {
			t.Errorf("NewUser(%q): err = %v, want ErrBadUserName", name, err)
		}
	}
}

func TestParse(t *testing.T) {
	file := `
# jobs' workers
user alice on >alicepw ~jobs:* &__lock__:jobs:* +@lock +@read

   user bob off nopass
user default on nopass ~* &* +@all
`
	users, err := Parse(strings.NewReader(file), "users.acl")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range users {
		names = append(names, u.Name)
	}
	if want := []string{"alice", "bob", "default"}; !slices.Equal(names, want) {
		t.Fatalf("users %v, want %v", names, want)
	}

	for _, tc := range []struct {
		name, file string
		line       int
		want       error
		text       string
	}{
		{"unknown rule", "user a on\nuser b on bogus\n", 2, ErrUnknownRule, "acl: users.acl:2: syntax error in ACL rule (rule bogus)"},
		{"password hidden", "\n\nuser a <secret\n", 3, ErrNoSuchPassword, "(rule <<password>)"},
		{"not a user line", "# ok\nalice on\n", 2, ErrNotUserLine, "users.acl:2:"},
		{"no name", "user\n", 1, ErrNotUserLine, ""},
		{"duplicate", "user a\nuser a on\n", 2, ErrDuplicateUser, ""},
		{"bad name", "user a\x01b on\n", 1, ErrBadUserName, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.file), "users.acl")
			var fe *FileError
			if !errors.As(err, &fe) || fe.Line != tc.line || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v at line %d", err, tc.want, tc.line)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.text)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("err = %q shows the password", err)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	s, err := NewStore(
		mustUser(t, "alice", "on", ">a1", ">a2"),
		mustUser(t, "off", "off", ">pw"),
		mustUser(t, "open", "on", "nopass"),
		mustUser(t, "nopw", "on"),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, pass string
		ok         bool
	}{
		{"alice", "a1", true},
		{"alice", "a2", true},
		{"alice", "a3", false},
		{"Alice", "a1", false},
		{"off", "pw", false},
		{"open", "anything", true},
		{"nopw", "", false},
		{"nobody", "a1", false},
	} {
		u, ok := s.Authenticate([]byte(tc.user), []byte(tc.pass))
		if ok != tc.ok || ok && u.Name != tc.user {
			t.Errorf("Authenticate(%q, %q) = %v, %v; want ok %v", tc.user, tc.pass, u, ok, tc.ok)
		}
	}
	if _, err := NewStore(mustUser(t, "a"), mustUser(t, "a")); !errors.Is(err, ErrDuplicateUser) {
		t.Fatalf("duplicate users: err = %v", err)
	}
}

func TestCommandPermissions(t *testing.T) {
	create, acquire, status, client, aclCmd, ping, info := cmdIndex(t, "create"), cmdIndex(t, "acquire"), cmdIndex(t, "status"), cmdIndex(t, "client"), cmdIndex(t, "acl"), cmdIndex(t, "ping"), cmdIndex(t, "info")
	type call struct {
		cmd int
		sub string
	}
	for _, tc := range []struct {
		rules   string
		allowed []call
		denied  []call
		admin   bool
	}{
		{"", []call{{ping, ""}, {client, "id"}, {client, "unblock"}, {aclCmd, "whoami"}, {aclCmd, "cat"}}, []call{{acquire, ""}, {status, ""}, {aclCmd, "list"}, {client, "kill"}, {info, ""}}, false},
		{"+@lock", []call{{acquire, ""}}, []call{{create, ""}, {status, ""}}, false},
		{"+@read +@manage", []call{{status, ""}, {create, ""}}, []call{{acquire, ""}}, false},
		{"+@all -@admin", []call{{acquire, ""}, {create, ""}, {ping, ""}}, []call{{info, ""}, {aclCmd, "LIST"}, {client, "nosuch"}}, false},
		{"+@all", []call{{info, ""}, {aclCmd, "Load"}, {client, "nosuch"}}, nil, true},
		{"+@admin", []call{{info, ""}}, []call{{acquire, ""}}, true},
		{"+@all -acl|load", []call{{aclCmd, "list"}}, []call{{aclCmd, "load"}}, false},
		{"+acl|list", []call{{aclCmd, "list"}}, []call{{aclCmd, "log"}}, false},
		{"+@all -acl", []call{{aclCmd, "whoami"}}, []call{{aclCmd, "list"}}, false},
	} {
		t.Run(tc.rules, func(t *testing.T) {
			u := mustUser(t, "u", strings.Fields(tc.rules)...)
			arg := func(s string) []byte {
				if s == "" {
					return nil
				}
				return []byte(s)
			}
			for _, c := range tc.allowed {
				if !u.CommandAllowed(c.cmd, arg(c.sub)) {
					t.Errorf("%s denied", CommandName(c.cmd, arg(c.sub)))
				}
			}
			for _, c := range tc.denied {
				if u.CommandAllowed(c.cmd, arg(c.sub)) {
					t.Errorf("%s allowed", CommandName(c.cmd, arg(c.sub)))
				}
			}
			if u.Admin() != tc.admin {
				t.Errorf("Admin() = %v", u.Admin())
			}
		})
	}
	if got := CommandName(aclCmd, []byte("LOAD")); got != "acl|load" {
		t.Fatalf("CommandName = %q", got)
	}
}

func TestKeysAndChannels(t *testing.T) {
	u := mustUser(t, "u", "~jobs:*", "~exact", "&__lock__:jobs:*")
	for key, want := range map[string]bool{"jobs:1": true, "exact": true, "jobs": false, "other": false, "exactly": false} {
		if u.KeyAllowed([]byte(key)) != want {
			t.Errorf("KeyAllowed(%q) = %v", key, !want)
		}
	}
	for ch, want := range map[string]bool{"__lock__:jobs:1": true, "__lock__:other": false} {
		if u.ChannelAllowed([]byte(ch)) != want {
			t.Errorf("ChannelAllowed(%q) = %v", ch, !want)
		}
	}
	for p, want := range map[string]bool{"__lock__:jobs:*": true, "__lock__:jobs:1*": false, "*": false, "__lock__:*": false} {
		if u.PatternAllowed([]byte(p)) != want {
			t.Errorf("PatternAllowed(%q) = %v", p, !want)
		}
	}
	all := mustUser(t, "all", "allkeys", "allchannels", "+@all")
	if !all.KeyAllowed([]byte("x")) || !all.PatternAllowed([]byte("*")) || !all.Unrestricted() {
		t.Fatal("allkeys allchannels +@all user is restricted")
	}
	if mustUser(t, "k", "allkeys", "+@all", "-@admin").Unrestricted() {
		t.Fatal("a user without @admin is unrestricted")
	}
}

func TestCategoryCommands(t *testing.T) {
	got, ok := CategoryCommands("LOCK")
	if want := []string{"acquire", "macquire", "release", "mrelease", "extend",
		"set", "del", "unlink", "pexpire", "expire", "pexpireat", "expireat", "eval", "evalsha", "script"}; !ok || !slices.Equal(got, want) {
		t.Fatalf("lock: %v, want %v", got, want)
	}
	// Redis's categories name the Redis commands too.
	if got, _ := CategoryCommands("scripting"); !slices.Equal(got, []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "script"}) {
		t.Fatalf("scripting: %v", got)
	}
	if got, _ := CategoryCommands("write"); !slices.Contains(got, "set") || slices.Contains(got, "get") || slices.Contains(got, "acquire") {
		t.Fatalf("write: %v", got)
	}
	u := mustUser(t, "legacy", "on", "nopass", "~legacy:*", "+@write", "+@read", "+@scripting", "-del")
	for _, c := range []struct {
		cmd  string
		want bool
	}{{"set", true}, {"get", true}, {"evalsha", true}, {"pexpire", true}, {"del", false}, {"acquire", false}, {"status", true}} {
		if got := u.CommandAllowed(protocol.LookupIndex([]byte(c.cmd)), nil); got != c.want {
			t.Errorf("+@write +@read +@scripting -del: %s allowed %v, want %v", c.cmd, got, c.want)
		}
	}
	admin, _ := CategoryCommands("admin")
	for _, want := range []string{"force-release", "info", "config", "acl|list", "acl|load"} {
		if !slices.Contains(admin, want) {
			t.Errorf("admin lacks %s: %v", want, admin)
		}
	}
	if _, ok := CategoryCommands("nosuch"); ok {
		t.Fatal("unknown category listed")
	}
	// Every command is in exactly one category, one of Categories.
	for _, cmd := range protocol.Commands {
		if !slices.Contains(protocol.Categories, cmd.Category) {
			t.Errorf("%s: category %q", cmd.Name, cmd.Category)
		}
	}
}
