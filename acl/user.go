package acl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/internal/glob"
	"github.com/leasehold/leasehold/protocol"
)

// User is one user and what it may do. A User is built once, by NewUser or
// Parse, and never changed after: a reload builds new Users and a new
// Store, so connections may keep and read theirs without a lock.
//
// Its command permissions are a set of units: a command without
// subcommands of its own is one unit, a command with them (CLIENT, ACL)
// one per listed subcommand and one for every other subcommand. Rules are
// applied in order to the set, as Redis applies them; connection commands
// are added back after the last, since an authenticated user may always
// run them.
type User struct {
	Name string

	enabled   bool
	nopass    bool
	passwords [][sha256.Size]byte // distinct, in the order given

	allKeys     bool
	keys        [][]byte
	allChannels bool
	channels    [][]byte

	commands []bool   // by unit
	cmdRules []string // the command rules since the last +@all or -@all, for ACL LIST

	unrestricted bool // allcommands and allkeys: dispatch checks nothing more
	admin        bool // every @admin command allowed (Admin)
}

// unit numbers every command and listed subcommand, once.
type unitTable struct {
	n        int
	base     []int            // by command index: its unit, or for a command with subcommands its "other subcommands" unit
	subs     []map[string]int // by command index: listed subcommand -> unit
	category []string         // by unit
	also     [][]string       // by unit: Redis's categories of a Redis command (protocol.Command.RedisCategories)
	name     []string         // by unit: "cmd" or "cmd|sub"
}

// inCategory reports whether unit is in the ACL category cat.
func (t *unitTable) inCategory(unit int, cat string) bool {
	return t.category[unit] == cat || slices.Contains(t.also[unit], cat)
}

var units = func() unitTable {
	var t unitTable
	add := func(cat, name string, also ...string) int {
		t.category = append(t.category, cat)
		t.also = append(t.also, also)
		t.name = append(t.name, name)
		t.n++
		return t.n - 1
	}
	t.base = make([]int, len(protocol.Commands))
	t.subs = make([]map[string]int, len(protocol.Commands))
	for i, cmd := range protocol.Commands {
		if len(cmd.Subcommands) == 0 {
			t.base[i] = add(cmd.Category, cmd.Name, cmd.RedisCategories...)
			continue
		}
		t.subs[i] = map[string]int{}
		for _, s := range cmd.Subcommands {
			t.subs[i][s.Name] = add(s.Category, cmd.Name+"|"+s.Name)
		}
		t.base[i] = add(protocol.CategoryAdmin, cmd.Name+"|*")
	}
	return t
}()

// unitOf returns the unit of command i called with sub as its first
// argument (nil for none).
func unitOf(i int, sub []byte) int {
	subs := units.subs[i]
	if subs == nil || sub == nil {
		return units.base[i]
	}
	var lower [32]byte
	if len(sub) > len(lower) {
		return units.base[i]
	}
	for j, b := range sub {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		lower[j] = b
	}
	if u, ok := subs[string(lower[:len(sub)])]; ok {
		return u
	}
	return units.base[i]
}

// NewUser returns a user named name with rules applied in order to a new
// user, which is off, has no password, keys, channels or commands (Redis
// 7's defaults, with acl-pubsub-default resetchannels).
func NewUser(name string, rules ...string) (*User, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	u := &User{Name: name, commands: make([]bool, units.n), cmdRules: []string{"-@all"}}
	for _, r := range rules {
		if err := u.apply(r); err != nil {
			return nil, err
		}
	}
	u.finish()
	return u, nil
}

func checkName(name string) error {
	if name == "" {
		return ErrBadUserName
	}
	for i := 0; i < len(name); i++ {
		if b := name[i]; b <= ' ' || b == 0x7f {
			return ErrBadUserName
		}
	}
	return nil
}

// apply applies one rule.
func (u *User) apply(rule string) error {
	lower := strings.ToLower(rule)
	switch lower {
	case "on":
		u.enabled = true
		return nil
	case "off":
		u.enabled = false
		return nil
	case "nopass":
		u.nopass, u.passwords = true, nil
		return nil
	case "resetpass":
		u.nopass, u.passwords = false, nil
		return nil
	case "allkeys":
		u.allKeys, u.keys = true, nil
		return nil
	case "resetkeys":
		u.allKeys, u.keys = false, nil
		return nil
	case "allchannels":
		u.allChannels, u.channels = true, nil
		return nil
	case "resetchannels":
		u.allChannels, u.channels = false, nil
		return nil
	case "allcommands":
		return u.apply("+@all")
	case "nocommands":
		return u.apply("-@all")
	case "reset":
		for _, r := range []string{"resetpass", "resetkeys", "resetchannels", "off", "-@all"} {
			u.apply(r)
		}
		return nil
	}
	if rule == "" {
		return ErrUnknownRule
	}
	switch arg := rule[1:]; rule[0] {
	case '>':
		u.addPassword(sha256.Sum256([]byte(arg)))
	case '<':
		return u.removePassword(sha256.Sum256([]byte(arg)))
	case '#':
		d, err := parseHash(arg)
		if err != nil {
			return err
		}
		u.addPassword(d)
	case '!':
		d, err := parseHash(arg)
		if err != nil {
			return err
		}
		return u.removePassword(d)
	case '~':
		return addPattern(&u.allKeys, &u.keys, arg)
	case '&':
		return addPattern(&u.allChannels, &u.channels, arg)
	case '+', '-':
		return u.applyCommand(rule[0] == '+', strings.ToLower(arg))
	default:
		return ErrUnknownRule
	}
	return nil
}

func parseHash(h string) (d [sha256.Size]byte, err error) {
	if len(h) != 2*sha256.Size || strings.ToLower(h) != h {
		return d, ErrBadHash
	}
	if _, err := hex.Decode(d[:], []byte(h)); err != nil {
		return d, ErrBadHash
	}
	return d, nil
}

// addPassword adds a digest; a password makes the user no longer nopass,
// as in Redis.
func (u *User) addPassword(d [sha256.Size]byte) {
	u.nopass = false
	if !slices.Contains(u.passwords, d) {
		u.passwords = append(u.passwords, d)
	}
}

func (u *User) removePassword(d [sha256.Size]byte) error {
	i := slices.Index(u.passwords, d)
	if i < 0 {
		return ErrNoSuchPassword
	}
	u.passwords = slices.Delete(u.passwords, i, i+1)
	return nil
}

// addPattern adds a key or channel pattern; "*" is allkeys or allchannels.
func addPattern(all *bool, patterns *[][]byte, p string) error {
	if *all {
		return ErrPatternAfterAll
	}
	if p == "*" {
		*all, *patterns = true, nil
		return nil
	}
	if !slices.ContainsFunc(*patterns, func(q []byte) bool { return string(q) == p }) {
		*patterns = append(*patterns, []byte(p))
	}
	return nil
}

// applyCommand applies +name or -name, name one of @category, command or
// command|subcommand, in lower case.
func (u *User) applyCommand(allow bool, name string) error {
	var match func(unit int) bool
	switch {
	case name == "@all":
		match = func(int) bool { return true }
	case strings.HasPrefix(name, "@"):
		cat := name[1:]
		if !slices.Contains(protocol.Categories, cat) {
			return ErrUnknownCommand
		}
		if cat == protocol.CategoryConnection && !allow {
			return ErrConnectionCommand
		}
		match = func(unit int) bool { return units.inCategory(unit, cat) }
	default:
		cmdName, sub, hasSub := strings.Cut(name, "|")
		i := protocol.LookupIndex([]byte(cmdName))
		if i < 0 {
			return ErrUnknownCommand
		}
		if hasSub {
			unit, ok := units.subs[i][sub]
			if !ok {
				return ErrUnknownCommand
			}
			match = func(v int) bool { return v == unit }
		} else {
			match = func(v int) bool { return v == units.base[i] || unitInSubs(units.subs[i], v) }
		}
		if !allow && onlyConnection(match) {
			return ErrConnectionCommand
		}
	}
	for v := range u.commands {
		if match(v) {
			u.commands[v] = allow
		}
	}
	rule := "-" + name
	if allow {
		rule = "+" + name
	}
	if name == "@all" {
		u.cmdRules = []string{rule}
	} else {
		u.cmdRules = append(u.cmdRules, rule)
	}
	return nil
}

func unitInSubs(subs map[string]int, v int) bool {
	for _, s := range subs {
		if s == v {
			return true
		}
	}
	return false
}

// onlyConnection reports whether the units a -rule matches are all
// connection commands, which a user always keeps: the rule would do
// nothing. (-acl takes away ACL's admin subcommands and leaves ACL WHOAMI.)
func onlyConnection(match func(int) bool) bool {
	for v := range units.category {
		if match(v) && units.category[v] != protocol.CategoryConnection {
			return false
		}
	}
	return true
}

// finish adds back the connection commands and works out the flags the
// server reads on every command.
func (u *User) finish() {
	all, admin := true, true
	for v := range u.commands {
		if units.category[v] == protocol.CategoryConnection {
			u.commands[v] = true
		}
		all = all && u.commands[v]
		admin = admin && (u.commands[v] || units.category[v] != protocol.CategoryAdmin)
	}
	u.unrestricted = all && u.allKeys
	u.admin = admin
}

// Enabled reports whether the user is on: it may authenticate.
func (u *User) Enabled() bool { return u.enabled }

// NoPass reports whether any password authenticates the user (nopass).
func (u *User) NoPass() bool { return u.nopass }

// Unrestricted reports whether the user may run every command on every
// key (allcommands and allkeys): the server checks nothing more.
func (u *User) Unrestricted() bool { return u.unrestricted }

// AllKeys reports whether the user may touch every key (allkeys).
func (u *User) AllKeys() bool { return u.allKeys }

// AllChannels reports whether the user may listen on every channel and
// pattern (allchannels).
func (u *User) AllChannels() bool { return u.allChannels }

// Admin reports whether the user may run every @admin command.
func (u *User) Admin() bool { return u.admin }

// CommandAllowed reports whether the user may run command i (an index
// into protocol.Commands) with sub as its first argument, nil for none:
// for CLIENT and ACL the subcommand decides.
func (u *User) CommandAllowed(i int, sub []byte) bool {
	return u.commands[unitOf(i, sub)]
}

// CommandName names command i called with sub as Redis's NOPERM error and
// ACL LOG do: "create", or "client|kill" for a subcommand.
func CommandName(i int, sub []byte) string {
	name := protocol.Commands[i].Name
	if units.subs[i] == nil || sub == nil {
		return name
	}
	return name + "|" + strings.ToLower(string(sub))
}

// KeyAllowed reports whether key matches one of the user's key patterns.
func (u *User) KeyAllowed(key []byte) bool {
	if u.allKeys {
		return true
	}
	for _, p := range u.keys {
		if glob.Match(p, key) {
			return true
		}
	}
	return false
}

// ChannelAllowed reports whether the user may SUBSCRIBE to channel: it
// matches one of its channel patterns.
func (u *User) ChannelAllowed(channel []byte) bool {
	if u.allChannels {
		return true
	}
	for _, p := range u.channels {
		if glob.Match(p, channel) {
			return true
		}
	}
	return false
}

// PatternAllowed reports whether the user may PSUBSCRIBE to pattern: as
// in Redis 7, only a pattern that is literally one of its channel
// patterns, unless it has allchannels, since a wider pattern would match
// channels it may not read.
func (u *User) PatternAllowed(pattern []byte) bool {
	if u.allChannels {
		return true
	}
	for _, p := range u.channels {
		if bytes.Equal(p, pattern) {
			return true
		}
	}
	return false
}

// Rules returns the user in ACL LIST's form, which is also the ACL
// file's: "user alice on #<sha256> ~jobs:* resetchannels &__lock__:jobs:*
// -@all +@lock".
func (u *User) Rules() string {
	parts := []string{"user", u.Name, "off"}
	if u.enabled {
		parts[2] = "on"
	}
	if u.nopass {
		parts = append(parts, "nopass")
	}
	for _, d := range u.passwords {
		parts = append(parts, "#"+hex.EncodeToString(d[:]))
	}
	if u.allKeys {
		parts = append(parts, "~*")
	}
	for _, p := range u.keys {
		parts = append(parts, "~"+string(p))
	}
	if u.allChannels {
		parts = append(parts, "&*")
	} else {
		parts = append(parts, "resetchannels")
		for _, p := range u.channels {
			parts = append(parts, "&"+string(p))
		}
	}
	parts = append(parts, u.cmdRules...)
	return strings.Join(parts, " ")
}

// CategoryCommands returns the commands of an ACL category, as ACL CAT
// lists them ("client|id" for a subcommand), and false for an unknown
// category.
func CategoryCommands(cat string) ([]string, bool) {
	cat = strings.ToLower(cat)
	if !slices.Contains(protocol.Categories, cat) {
		return nil, false
	}
	var names []string
	for v, c := range units.category {
		if (c == cat || slices.Contains(units.also[v], cat)) && !strings.HasSuffix(units.name[v], "|*") {
			names = append(names, units.name[v])
		}
	}
	return names, true
}
