package acl

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"os"
	"slices"
	"strings"
)

// DefaultUser is the user a connection is when it authenticates with a
// password alone, or from the start when that user is on and nopass.
const DefaultUser = "default"

// Store is a set of users, built once and never changed: the server swaps
// the whole Store on reload, so readers need no lock.
type Store struct {
	users     map[string]*User
	names     []string // sorted
	nonAdmins bool     // some enabled user is not an admin
}

// NewStore returns a Store of users; a name given twice is an error.
func NewStore(users ...*User) (*Store, error) {
	s := &Store{users: make(map[string]*User, len(users))}
	for _, u := range users {
		if _, dup := s.users[u.Name]; dup {
			return nil, ErrDuplicateUser
		}
		s.users[u.Name] = u
		s.names = append(s.names, u.Name)
		s.nonAdmins = s.nonAdmins || u.Enabled() && !u.Admin()
	}
	slices.Sort(s.names)
	return s, nil
}

// HasNonAdmins reports whether some enabled user is not an admin (see
// User.Admin): a lock server then keeps such users' leases apart.
func (s *Store) HasNonAdmins() bool { return s.nonAdmins }

// User returns the user named name, or nil.
func (s *Store) User(name string) *User { return s.users[name] }

// Users returns every user, by name.
func (s *Store) Users() []*User {
	us := make([]*User, len(s.names))
	for i, n := range s.names {
		us[i] = s.users[n]
	}
	return us
}

// unknownUserDigest stands in for the password of a user that does not
// exist, so that refusing one costs what refusing a wrong password does.
var unknownUserDigest = sha256.Sum256([]byte("leasehold: no such user"))

// Authenticate returns the user named name if password is one of its
// passwords (any, if it is nopass) and it is enabled. The digests are
// compared in constant time, and an unknown user costs the same hashing
// and comparing as a wrong password: the caller's reply (WRONGPASS) is the
// same for both.
func (s *Store) Authenticate(name, password []byte) (*User, bool) {
	d := sha256.Sum256(password)
	u := s.users[string(name)]
	if u == nil {
		subtle.ConstantTimeCompare(d[:], unknownUserDigest[:])
		return nil, false
	}
	match := 0
	if len(u.passwords) == 0 {
		subtle.ConstantTimeCompare(d[:], unknownUserDigest[:])
	}
	for i := range u.passwords {
		match |= subtle.ConstantTimeCompare(d[:], u.passwords[i][:])
	}
	if match == 0 && !u.nopass || !u.enabled {
		return nil, false
	}
	return u, true
}

// Parse reads an ACL file from r: one "user <name> [rules...]" a line, as
// Redis's, and blank lines and lines starting with '#' (after spaces),
// which Redis's does not allow. file names r in errors. A line that does
// not parse refuses the whole file with a *FileError naming the line.
func Parse(r io.Reader, file string) ([]*User, error) {
	var users []*User
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		fields := strings.Fields(string(line))
		if fields[0] != "user" || len(fields) < 2 {
			return nil, &FileError{file, n, ErrNotUserLine}
		}
		u, err := NewUser(fields[1], fields[2:]...)
		if err != nil {
			return nil, &FileError{file, n, withRule(err, fields[2:])}
		}
		if seen[u.Name] {
			return nil, &FileError{file, n, ErrDuplicateUser}
		}
		seen[u.Name] = true
		users = append(users, u)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return users, nil
}

// LoadFile parses the ACL file at path.
func LoadFile(path string) ([]*User, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, path)
}

// ruleError names the rule a user's line failed at, without its value
// when that is a password.
type ruleError struct {
	rule string
	err  error
}

func (e *ruleError) Error() string { return e.err.Error() + " (rule " + e.rule + ")" }
func (e *ruleError) Unwrap() error { return e.err }

// withRule finds which of rules err came from, by applying them again to a
// fresh user, and wraps err with it.
func withRule(err error, rules []string) error {
	u := &User{Name: "x", commands: make([]bool, units.n)}
	for _, r := range rules {
		if u.apply(r) != nil {
			if r != "" && (r[0] == '>' || r[0] == '<') {
				r = r[:1] + "<password>"
			}
			return &ruleError{r, err}
		}
	}
	return err
}
