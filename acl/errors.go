package acl

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrUnknownRule is returned when a rule is none of those Rules lists.
	ErrUnknownRule = errors.New("acl: syntax error in ACL rule")
	// ErrUnknownCommand is returned when a +cmd, -cmd, +@cat or -@cat rule
	// names a command, subcommand or category that does not exist.
	ErrUnknownCommand = errors.New("acl: unknown command or category name in ACL")
	// ErrConnectionCommand is returned when a rule takes away a connection
	// command, which every authenticated user may run.
	ErrConnectionCommand = errors.New("acl: connection commands are always allowed and cannot be removed")
	// ErrBadUserName is returned when a user name is empty or has a NUL,
	// a space or another control character.
	ErrBadUserName = errors.New("acl: user names may not contain spaces, NUL or control characters")
	// ErrBadHash is returned when a #<hash> or !<hash> rule does not give
	// 64 lower-case hexadecimal digits, Redis's rule.
	ErrBadHash = errors.New("acl: the password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")
	// ErrNoSuchPassword is returned when <password or !<hash> removes a
	// password the user does not have, as Redis refuses it.
	ErrNoSuchPassword = errors.New("acl: the password you are trying to remove from the user does not exist")
	// ErrPatternAfterAll is returned when a key or channel pattern follows
	// allkeys (~*) or allchannels (&*), which already allow everything.
	ErrPatternAfterAll = errors.New("acl: adding a pattern after the * pattern (or the 'allkeys'/'allchannels' flag) is not valid and does not have any effect; try 'resetkeys' or 'resetchannels' to start with an empty list of patterns")
	// ErrNotUserLine is returned for a file line that is not blank, a
	// comment, or "user <name> [rules...]".
	ErrNotUserLine = errors.New("acl: line should start with user keyword")
	// ErrDuplicateUser is returned when a file or a Store names a user twice.
	ErrDuplicateUser = errors.New("acl: duplicate user")
)

// FileError is an error at a line of an ACL file: the file is refused as
// a whole.
type FileError struct {
	File string
	Line int
	Err  error
}

func (e *FileError) Error() string { return "acl: " + e.Detail() }

// Detail is the error without the package's prefix, "users.acl:3: syntax
// error in ACL rule (rule bogus)", for a reply to a client.
func (e *FileError) Detail() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, strings.TrimPrefix(e.Err.Error(), "acl: "))
}

func (e *FileError) Unwrap() error { return e.Err }
