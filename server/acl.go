package server

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/acl"
	"github.com/leasehold/leasehold/protocol"
)

// Users and permissions, as Redis's ACL: the server's users are an
// acl.Store behind an atomic pointer (Server.users), replaced whole by
// ReloadACL; a connection keeps the *acl.User it authenticated as and
// picks up its new version before its next command. Dispatch checks a
// command and its keys against the user only when the user is not
// unrestricted (allcommands and allkeys), so the default user of a server
// without an ACL file costs one pointer comparison a command.

// errDefaultTwice is New's error when both the ACL file and RequirePass
// set the default user.
var errDefaultTwice = errors.New("server: the ACL file defines the default user and a requirepass password is set too: give the default user's password in the file (user default on >password ...) or drop requirepass")

// loadUsers builds the users from cfg: those of cfg.ACLFile, and the
// default user if the file does not define it, with cfg.RequirePass, or
// off without one (Redis would leave it on and nopass: a file of users
// means the operator wants authentication). Without a file the default
// user is the only one, with every permission, and nopass if there is no
// RequirePass, as Redis's.
func loadUsers(cfg Config) (*acl.Store, error) {
	var users []*acl.User
	if cfg.ACLFile != "" {
		var err error
		if users, err = acl.LoadFile(cfg.ACLFile); err != nil {
			return nil, fmt.Errorf("server: ACL file: %w", err)
		}
	}
	hasDefault := slices.ContainsFunc(users, func(u *acl.User) bool { return u.Name == acl.DefaultUser })
	if hasDefault && cfg.RequirePass != "" {
		return nil, errDefaultTwice
	}
	if !hasDefault {
		rules := []string{"on", "nopass", "~*", "&*", "+@all"}
		switch {
		case cfg.RequirePass != "":
			rules = []string{"on", ">" + cfg.RequirePass, "~*", "&*", "+@all"}
		case cfg.ACLFile != "":
			rules = []string{"off"}
		}
		d, err := acl.NewUser(acl.DefaultUser, rules...)
		if err != nil {
			return nil, err
		}
		users = append(users, d)
	}
	return acl.NewStore(users...)
}

// openDefault returns the default user of st if it is on and nopass: a
// connection is that user without AUTH, as in Redis. Otherwise nil, and
// "a password is set" for protected mode.
func openDefault(st *acl.Store) *acl.User {
	if d := st.User(acl.DefaultUser); d != nil && d.Enabled() && d.NoPass() {
		return d
	}
	return nil
}

func (s *Server) openDefault() *acl.User { return openDefault(s.users.Load()) }

// ReloadACL reads Config.ACLFile again and puts its users in force, as
// ACL LOAD and SIGHUP do. Connections run their next command with their
// user's new rules; those of a user the file removes or disables, and
// those listening on a channel or pattern their user may no longer, are
// closed, as Redis closes them. A file that does not load changes nothing.
func (s *Server) ReloadACL() error {
	if s.cfg.ACLFile == "" {
		return errNoACLFile
	}
	if err := s.reloadACL(); err != nil {
		return fmt.Errorf("server: ACL file not reloaded: %w", err)
	}
	return nil
}

var errNoACLFile = errors.New("server: no ACL file to reload: the server was started without one")

func (s *Server) reloadACL() error {
	s.aclMu.Lock()
	defer s.aclMu.Unlock()
	st, err := loadUsers(s.cfg)
	if err != nil {
		return err
	}
	s.users.Store(st)
	s.mu.Lock()
	var revoked []*conn
	for _, c := range s.conns {
		if u := c.userShared.Load(); u != nil && !stillAllowed(c, st.User(u.Name)) {
			revoked = append(revoked, c)
		}
	}
	s.mu.Unlock()
	for _, c := range revoked {
		c.log.Info().Str("user", c.userShared.Load().Name).Msg("ACL reload: user removed or disabled, or a channel it listens on no longer allowed; closing the connection")
		c.closeFromOutside()
	}
	s.log.Info().Int("users", len(st.Users())).Int("connections_closed", len(revoked)).Str("file", s.cfg.ACLFile).Msg("ACL file loaded")
	return nil
}

// stillAllowed reports whether c may stay open as u, its user's new
// version: u exists, is on, and allows every channel and pattern c listens
// on. c.sub is read under subMu, since c runs on its own goroutine.
func stillAllowed(c *conn, u *acl.User) bool {
	if u == nil || !u.Enabled() {
		return false
	}
	if u.AllChannels() {
		return true
	}
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.sub == nil {
		return true
	}
	for ch := range c.sub.channels {
		if !u.ChannelAllowed([]byte(ch)) {
			return false
		}
	}
	for p := range c.sub.patterns {
		if !u.PatternAllowed([]byte(p)) {
			return false
		}
	}
	return true
}

// errUserRevoked ends a connection whose user a reload removed or disabled.
var errUserRevoked = errors.New("server: connection closed: its user was removed or disabled by an ACL reload")

// closeFromOutside closes c from another goroutine than its own: on the
// event loop through the loop, on the goroutine transport by closing its
// socket, which its goroutine then finds, in a read or in a WAIT (through
// its hang-up watch), and leaves the wait's queue.
func (c *conn) closeFromOutside() {
	if l := c.loop; l != nil {
		l.post(func() { l.closeConn(c) })
		return
	}
	c.failOutput(errUserRevoked)
}

// readerLimits are the input limits of a new connection: Redis's pre-auth
// limits until it authenticates (setUser lifts them).
func (c *conn) readerLimits() protocol.ReaderLimits {
	limits := c.srv.cfg.Limits
	limits.PreAuth = c.user == nil
	return limits
}

// setUser makes u, of the store st, c's user.
func (c *conn) setUser(u *acl.User, st *acl.Store) {
	if c.user == nil && c.rd != nil {
		c.rd.Authenticated()
	}
	c.user, c.usersSeen = u, st
	c.userShared.Store(u)
}

// reloadUser gives c its user's version in the store a reload put in
// force, before c's next command, and reports true; or, if the user is
// gone or disabled, ends c (as QUIT does, after the replies already made)
// without running the command, and reports false.
func (c *conn) reloadUser() bool {
	st := c.srv.users.Load()
	u := st.User(c.user.Name)
	if u == nil || !u.Enabled() {
		c.log.Info().Str("user", c.user.Name).Msg("user removed or disabled by an ACL reload; closing the connection")
		c.quit = true
		return false
	}
	c.setUser(u, st)
	return true
}

// checkACL is dispatch's check that c's user may run command i with args:
// the command (or CLIENT's and ACL's subcommand), then every key the
// command names, MACQUIRE's all of them before any lease is taken. It
// counts and logs (ACL LOG) a refusal, and returns Redis 7's NOPERM error.
func (c *conn) checkACL(i int, cmd *protocol.Command, args [][]byte) error {
	u := c.user
	var sub []byte
	if len(cmd.Subcommands) > 0 && len(args) > 1 {
		sub = args[1]
	}
	if !u.CommandAllowed(i, sub) {
		name := acl.CommandName(i, sub)
		c.srv.auth.deniedCmd.Add(1)
		c.srv.aclLog.Add("command", name, u.Name, c.describe())
		return protocol.NoPermCommandError(u.Name, name)
	}
	if u.AllKeys() {
		return nil
	}
	for _, key := range cmd.Keys(args) {
		if !u.KeyAllowed(key) {
			c.srv.auth.deniedKey.Add(1)
			c.srv.aclLog.Add("key", string(key), u.Name, c.describe())
			return protocol.ErrNoPermKey
		}
	}
	return nil
}

// checkChannels is SUBSCRIBE's and PSUBSCRIBE's check of c's user's
// channel patterns, before any is added: a channel must match one of
// them, a pattern must be one of them (Redis 7's rule).
func (c *conn) checkChannels(names [][]byte, pattern bool) error {
	u := c.user
	if u == nil || u.AllChannels() {
		return nil
	}
	for _, n := range names {
		ok := u.ChannelAllowed(n)
		if pattern {
			ok = u.PatternAllowed(n)
		}
		if !ok {
			c.srv.auth.deniedChannel.Add(1)
			c.srv.aclLog.Add("channel", string(n), u.Name, c.describe())
			return protocol.ErrNoPermChannel
		}
	}
	return nil
}

// keyFilter narrows LOCKS' match to the keys c's user may access, inside
// the scan, so that COUNT and the cursor still bound the work and the
// iteration ends.
func (c *conn) keyFilter(match func([]byte) (keep, more bool)) func([]byte) (keep, more bool) {
	u := c.user
	if u == nil || u.AllKeys() {
		return match
	}
	return func(key []byte) (bool, bool) {
		if !u.KeyAllowed(key) {
			return false, true
		}
		if match == nil {
			return true, true
		}
		return match(key)
	}
}

// aclLoadReason is a reload's error as ACL LOAD's reply shows it: the
// file and line, without a Go package's prefix.
func aclLoadReason(err error) string {
	var fe *acl.FileError
	if errors.As(err, &fe) {
		return fe.Detail()
	}
	return strings.TrimPrefix(strings.TrimPrefix(err.Error(), "server: "), "acl: ")
}

// writeACLLog writes ACL LOG's reply: the newest count entries of l, each
// as Redis's map flattened for RESP2.
func writeACLLog(c *conn, l *acl.Log, count int) {
	entries := l.Newest(count)
	now := time.Now()
	c.wr.WriteArray(len(entries))
	for _, e := range entries {
		c.wr.WriteArray(20)
		c.wr.WriteBulkString("count")
		c.wr.WriteInt(e.Count)
		c.wr.WriteBulkString("reason")
		c.wr.WriteBulkString(e.Reason)
		c.wr.WriteBulkString("context")
		c.wr.WriteBulkString("toplevel")
		c.wr.WriteBulkString("object")
		c.wr.WriteBulkString(e.Object)
		c.wr.WriteBulkString("username")
		c.wr.WriteBulkString(e.Username)
		c.wr.WriteBulkString("age-seconds")
		c.wr.WriteBulkString(strconv.FormatFloat(now.Sub(e.Updated).Seconds(), 'f', 3, 64)) // since the last, as Redis
		c.wr.WriteBulkString("client-info")
		c.wr.WriteBulkString(e.ClientInfo)
		c.wr.WriteBulkString("entry-id")
		c.wr.WriteUint64(e.ID)
		c.wr.WriteBulkString("timestamp-created")
		c.wr.WriteInt64(e.Created.UnixMilli())
		c.wr.WriteBulkString("timestamp-last-updated")
		c.wr.WriteInt64(e.Updated.UnixMilli())
	}
}

// handleACL serves ACL WHOAMI, CAT, LIST, USERS, LOG and LOAD; dispatch
// has checked the subcommand against the user's rules.
func handleACL(c *conn, args [][]byte) error {
	sub := strings.ToLower(string(args[1]))
	if sub == "help" {
		return writeHelpSubcommand(c, args)
	}
	if n := len(args); !(n == 2 || n == 3 && (sub == "cat" || sub == "log")) {
		if slices.ContainsFunc(protocol.Lookup(args[0]).Subcommands, func(s protocol.Subcommand) bool { return s.Name == sub }) {
			return protocol.ArityError("acl|" + sub)
		}
		return protocol.UnknownSubcommandError("acl", args[1])
	}
	switch sub {
	case "whoami":
		c.wr.WriteBulkString(c.user.Name)
	case "cat":
		if len(args) == 2 {
			c.wr.WriteArray(len(protocol.Categories))
			for _, cat := range protocol.Categories {
				c.wr.WriteBulkString(cat)
			}
			return nil
		}
		names, ok := acl.CategoryCommands(string(args[2]))
		if !ok {
			return protocol.UnknownACLCategoryError(args[2])
		}
		c.wr.WriteArray(len(names))
		for _, n := range names {
			c.wr.WriteBulkString(n)
		}
	case "list", "users":
		users := c.srv.users.Load().Users()
		c.wr.WriteArray(len(users))
		for _, u := range users {
			if sub == "list" {
				c.wr.WriteBulkString(u.Rules())
			} else {
				c.wr.WriteBulkString(u.Name)
			}
		}
	case "log":
		count := 10
		if len(args) == 3 {
			if strings.EqualFold(string(args[2]), "reset") {
				c.srv.aclLog.Reset()
				c.wr.WriteString("OK")
				return nil
			}
			n, ok := protocol.ParseInt(args[2])
			if !ok {
				return protocol.ErrNotInteger
			}
			if n < 0 {
				return protocol.ErrACLLogCount
			}
			count = int(min(n, acl.LogMax))
		}
		writeACLLog(c, &c.srv.aclLog, count)
	case "load":
		if c.srv.cfg.ACLFile == "" {
			return protocol.ErrNoACLFile
		}
		if err := c.srv.reloadACL(); err != nil {
			return protocol.ACLLoadError(aclLoadReason(err))
		}
		c.wr.WriteString("OK")
	default:
		return protocol.UnknownSubcommandError("acl", args[1])
	}
	return nil
}
