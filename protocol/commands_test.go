package protocol

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" for not found
	}{
		{"lower case", "acquire", "acquire"},
		{"upper case", "ACQUIRE", "acquire"},
		{"mixed case", "AcQuIrE", "acquire"},
		{"connection command", "PiNg", "ping"},
		{"server command", "Command", "command"},
		{"unknown", "nope", ""},
		{"empty", "", ""},
		{"prefix of a name", "acq", ""},
		{"name with a suffix", "acquirex", ""},
		{"name with NUL", "acquire\x00", ""},
		{"16 bytes", "abcdefghijklmnop", ""},
		{"17 bytes", "abcdefghijklmnopq", ""},
		{"a name padded past 16 bytes", "acquire" + strings.Repeat(" ", 10), ""},
		{"very long", strings.Repeat("A", 4096), ""},
		{"non-ASCII", "ACQUİRE", ""},

		// macquire and mrelease share length and first letter (and last
		// letter): the lookup keys on length and the first two letters.
		{"macquire", "macquire", "macquire"},
		{"MACQUIRE", "MACQUIRE", "macquire"},
		{"MaCqUiRe", "MaCqUiRe", "macquire"},
		{"mrelease", "mrelease", "mrelease"},
		{"MRELEASE", "MRELEASE", "mrelease"},
		{"mReLeAsE", "mReLeAsE", "mrelease"},
		{"macquire's slot, other name", "maxquire", ""},
		{"mrelease's slot, other name", "MRELAXED", ""},
		{"acquire's slot, other name", "acquirz", ""},
		{"one letter", "m", ""},
		{"one letter upper case", "A", ""},
		{"two letters, no command", "ma", ""},
		{"digit as second letter", "m1cquire", ""},
		{"NUL as second letter", "a\x00quire", ""},
		{"high byte as first letter", "\xc1cquire", ""},
		{"'@' folds to '`', not a letter", "@cquire", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := LookupIndex([]byte(tt.in))
			c := Lookup([]byte(tt.in))
			if tt.want == "" {
				if i != -1 || c != nil {
					t.Fatalf("LookupIndex = %d, Lookup = %v, want -1, nil", i, c)
				}
				return
			}
			if i < 0 || Commands[i].Name != tt.want {
				t.Fatalf("LookupIndex(%q) = %d, want the index of %q", tt.in, i, tt.want)
			}
			if c != &Commands[i] {
				t.Fatalf("Lookup(%q) = %p, want &Commands[%d]", tt.in, c, i)
			}
		})
	}
}

func TestIsCrossProtocol(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"POST", true}, {"post", true}, {"pOsT", true},
		{"Host:", true}, {"HOST:", true}, {"host:", true},
		{"host", false}, {"posts", false}, {"pos", false}, {"GET", false},
		{"Content-Type:", false}, {"Host: ", false}, {"", false},
	} {
		if got := IsCrossProtocol([]byte(tt.in)); got != tt.want {
			t.Errorf("IsCrossProtocol(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if tt.want && LookupIndex([]byte(tt.in)) >= 0 {
			t.Errorf("%q is in the command table: dispatch would run it", tt.in)
		}
	}
}

func TestLookupEveryCommand(t *testing.T) {
	for i := range Commands {
		name := Commands[i].Name
		t.Run(name, func(t *testing.T) {
			for _, in := range []string{name, strings.ToUpper(name)} {
				if got := LookupIndex([]byte(in)); got != i {
					t.Errorf("LookupIndex(%q) = %d, want %d", in, got, i)
				}
				if got := Lookup([]byte(in)); got != &Commands[i] {
					t.Errorf("Lookup(%q) = %p, want &Commands[%d]", in, got, i)
				}
			}
		})
	}
}

func TestLookupIndexDoesNotAllocate(t *testing.T) {
	for _, in := range []string{"AcQuIrE", "status", "MRELEASE", "maxquire", "m", "nope", "abcdefghijklmnop", strings.Repeat("x", 100)} {
		t.Run(in, func(t *testing.T) {
			name := []byte(in)
			if n := testing.AllocsPerRun(100, func() { LookupIndex(name) }); n != 0 {
				t.Fatalf("LookupIndex(%q) allocates %v times per call", in, n)
			}
		})
	}
}

func TestCommandTable(t *testing.T) {
	groups := map[string]bool{GroupLock: true, GroupConnection: true, GroupServer: true, GroupPubSub: true, GroupRedis: true}
	seen := map[string]bool{}
	for i := range Commands {
		c := &Commands[i]
		t.Run(c.Name, func(t *testing.T) {
			if c.Name == "" || c.Name != strings.ToLower(c.Name) {
				t.Errorf("Name %q is not lower case", c.Name)
			}
			if len(c.Name) > maxNameLen {
				t.Errorf("Name %q is longer than maxNameLen %d: LookupIndex cannot find it", c.Name, maxNameLen)
			}
			if seen[c.Name] {
				t.Errorf("Name %q appears twice", c.Name)
			}
			seen[c.Name] = true
			if c.Arity == 0 {
				t.Error("Arity is 0")
			}
			if c.Summary == "" || !strings.HasSuffix(c.Summary, ".") {
				t.Errorf("Summary %q is empty or does not end in '.'", c.Summary)
			}
			if !groups[c.Group] {
				t.Errorf("Group %q is not one of the Group constants", c.Group)
			}
			if c.Flags == nil {
				t.Error("Flags is nil; COMMAND needs an array")
			}
			if !slices.Contains(Categories, c.Category) {
				t.Errorf("Category %q is not one of Categories", c.Category)
			}
			if slices.Contains(c.Flags, "no_auth") && c.Category != CategoryConnection {
				t.Errorf("a no_auth command in category %q: it runs before AUTH, so it is a connection command", c.Category)
			}
			for _, sub := range c.Subcommands {
				if sub.Name != strings.ToLower(sub.Name) || sub.Arity == 0 || !slices.Contains(Categories, sub.Category) {
					t.Errorf("subcommand %+v: want a lower-case name, an arity and one of Categories", sub)
				}
			}
			if (c.FirstKey == 0) != (c.Step == 0) {
				t.Errorf("FirstKey %d and Step %d disagree about keys", c.FirstKey, c.Step)
			}
			movable := false
			for _, f := range c.Flags {
				movable = movable || f == "movablekeys"
			}
			if movable && c.FirstKey != 0 {
				// Redis reports 0,0,0 for a command whose keys only its
				// arguments locate, as EVAL's numkeys does.
				t.Errorf("movablekeys command with FirstKey %d, want 0", c.FirstKey)
			}
			if c.Group == GroupLock {
				type keySpec struct {
					first, last, step int
					movable           bool
				}
				want := keySpec{1, 1, 1, false}
				switch c.Name {
				case "locks":
					want = keySpec{0, 0, 0, false} // a cursor, no key
				case "macquire":
					want = keySpec{0, 0, 0, true} // numkeys says where the keys are
				case "mrelease":
					want = keySpec{1, -1, 2, false} // key token [key token ...]
				}
				if got := (keySpec{c.FirstKey, c.LastKey, c.Step, movable}); got != want {
					t.Errorf("lock command keys = %d,%d,%d movablekeys=%v, want %d,%d,%d movablekeys=%v",
						got.first, got.last, got.step, got.movable, want.first, want.last, want.step, want.movable)
				}
			}
		})
	}
	for name := range seen {
		if i := LookupIndex([]byte(name)); i < 0 || Commands[i].Name != name {
			t.Fatalf("LookupIndex(%q) = %d", name, i)
		}
	}
}

func TestCheckArity(t *testing.T) {
	tests := []struct {
		cmd  string
		n    int
		want string // "" for nil
	}{
		{"verify", 3, ""},
		{"verify", 2, "ERR wrong number of arguments for 'verify' command"},
		{"verify", 4, "ERR wrong number of arguments for 'verify' command"},
		{"extend", 4, ""},
		{"extend", 3, "ERR wrong number of arguments for 'extend' command"},
		{"extend", 5, "ERR wrong number of arguments for 'extend' command"},
		{"status", 2, ""},
		{"status", 1, "ERR wrong number of arguments for 'status' command"},
		{"acquire", 1, "ERR wrong number of arguments for 'acquire' command"},
		{"acquire", 2, ""},
		{"acquire", 5, ""},
		{"acquire", 100, ""},
		{"create", 1, "ERR wrong number of arguments for 'create' command"},
		{"create", 4, ""},
		{"locks", 1, ""}, // no cursor: the first page
		{"locks", 2, ""},
		{"ping", 0, "ERR wrong number of arguments for 'ping' command"},
		{"ping", 1, ""},
		{"ping", 2, ""},
		{"echo", 1, "ERR wrong number of arguments for 'echo' command"},
		{"macquire", 3, "ERR wrong number of arguments for 'macquire' command"},
		{"macquire", 4, ""},
		{"macquire", 1000, ""},
		{"mrelease", 2, "ERR wrong number of arguments for 'mrelease' command"},
		{"mrelease", 3, ""},
		{"mrelease", 4, ""}, // odd pairing is ParseMRelease's to reject
		{"mrelease", 5, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.cmd, tt.n), func(t *testing.T) {
			c := Lookup([]byte(tt.cmd))
			if c == nil {
				t.Fatalf("no command %q", tt.cmd)
			}
			err := c.CheckArity(tt.n)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckArity(%d) = %v, want nil", tt.n, err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Fatalf("CheckArity(%d) = %v, want %q", tt.n, err, tt.want)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	tests := []struct{ cmd, want string }{
		{"acquire", "ACQUIRE key [ttl-ms] [OWNER id] [WAIT ms] [PRIORITY n] [SHARED] [EPHEMERAL]"},
		{"create", "CREATE key [TTL ms] [LOCKDELAY ms] [LIMIT n]"},
		{"macquire", "MACQUIRE ttl-ms numkeys key [key ...] [OWNER id] [WAIT ms] [PRIORITY n] [SHARED] [EPHEMERAL]"},
		{"mrelease", "MRELEASE key token [key token ...]"},
		{"extend", "EXTEND key token ttl-ms"},
		{"quit", "QUIT"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			if got := Lookup([]byte(tt.cmd)).Usage(); got != tt.want {
				t.Fatalf("Usage() = %q, want %q", got, tt.want)
			}
		})
	}
}
