package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/protocol"
)

// Password authentication of the default user, as Redis's requirepass, and
// Redis's protected mode. The server keeps only the password's SHA-256
// digest, as Redis stores its users' passwords, and compares digests in
// constant time.

// authState is the server's side of authentication. Its fields are set by
// New and read-only after, but for the counters.
type authState struct {
	required bool                     // Config.RequirePass is set
	digest   [sha256.Size]byte        // SHA-256 of Config.RequirePass
	loopback func(addr net.Addr) bool // Config.PeerIsLoopback, or isLoopback

	failures   atomic.Uint64 // AUTH and HELLO ... AUTH refused: INFO's acl_access_denied_auth
	lastWarned atomic.Int64  // monotonic ns of the last failure logged, 0 for none
	unwarned   atomic.Uint64 // failures since then that were not logged
	refused    atomic.Uint64 // connections protected mode refused
}

// authFailureWarnEvery is how often at most a refused AUTH is logged, so
// that a brute-force loop cannot flood the log; INFO counts every one.
const authFailureWarnEvery = time.Second

func newAuthState(cfg Config) *authState {
	a := &authState{required: cfg.RequirePass != "", loopback: cfg.PeerIsLoopback}
	if a.required {
		a.digest = sha256.Sum256([]byte(cfg.RequirePass))
	}
	if a.loopback == nil {
		a.loopback = isLoopback
	}
	return a
}

// isLoopback reports whether a peer is on this machine: 127.0.0.0/8, ::1
// (IPv4-mapped too), or a unix socket.
func isLoopback(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// check reports whether user and password are the default user's. Both
// compare in constant time and the result does not say which was wrong.
func (a *authState) check(user, password []byte) bool {
	d := sha256.Sum256(password)
	passOK := subtle.ConstantTimeCompare(d[:], a.digest[:])
	userOK := subtle.ConstantTimeCompare(user, []byte("default"))
	return passOK&userOK == 1
}

// refuseProtected writes Redis's protected-mode error to a connection from
// a non-loopback peer of a server without a password and reports true; the
// caller then closes it. --protected-mode no or a password lets every peer in.
func (s *Server) refuseProtected(nc net.Conn) bool {
	if !s.cfg.ProtectedMode || s.auth.required || s.auth.loopback(nc.RemoteAddr()) {
		return false
	}
	s.auth.refused.Add(1)
	s.stats.connectionsRejected.Add(1)
	s.log.Debug().Stringer("remote", nc.RemoteAddr()).Msg("protected mode: refused a connection from a non-loopback address")
	// Written best-effort to a socket we are about to close.
	nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	nc.Write(protocol.ErrProtectedMode.Frame())
	return true
}

// noAuthCommand marks the commands a connection may send before it has
// authenticated: those the command table flags "no_auth", as Redis flags
// AUTH, HELLO and QUIT (and not PING: Redis answers it NOAUTH too).
var noAuthCommand = commandsFlagged("no_auth")

// refuseBeforeAuth is dispatch's check, for a connection not yet known to
// be authenticated, that command i may run: it replies NOAUTH and reports
// true if not. On a server without a password every connection counts as
// authenticated from its first command on.
func (c *conn) refuseBeforeAuth(i int) bool {
	if !c.srv.auth.required {
		c.authed = true
		return false
	}
	if noAuthCommand[i] {
		return false
	}
	c.writeErr(protocol.ErrNoAuth)
	return true
}

// authenticated reports whether c may run every command.
func (c *conn) authenticated() bool { return c.authed || !c.srv.auth.required }

// authenticate checks AUTH's or HELLO ... AUTH's user and password. On a
// server without a password it accepts the default user with any password,
// as Redis's password-less default user does. Success lifts the pre-auth
// limits on c's input; a failure is counted and logged, and leaves c as it
// was (authenticated or not), as in Redis.
func (c *conn) authenticate(user, password []byte) error {
	var ok bool
	if c.srv.auth.required {
		ok = c.srv.auth.check(user, password)
	} else {
		ok = bytes.Equal(user, []byte("default"))
	}
	if !ok {
		c.authFailed(user)
		return protocol.ErrWrongPass
	}
	if !c.authed {
		c.authed = true
		c.rd.Authenticated()
	}
	return nil
}

// authFailed counts a refused AUTH and logs it with the peer and the user
// name, at most once every authFailureWarnEvery, with the number of
// failures not logged since the last line.
func (c *conn) authFailed(user []byte) {
	a := c.srv.auth
	a.failures.Add(1)
	now := c.srv.monotonic()
	last := a.lastWarned.Load()
	if last != 0 && now-last < int64(authFailureWarnEvery) || !a.lastWarned.CompareAndSwap(last, now) {
		a.unwarned.Add(1)
		return
	}
	c.log.Warn().
		Str("user", string(user[:min(len(user), 64)])).
		Uint64("unlogged_failures", a.unwarned.Swap(0)).
		Uint64("acl_access_denied_auth", a.failures.Load()).
		Msg("authentication failed: wrong user name or password")
}

// handleAuth is AUTH [user] password. Without a password on the server, a
// password alone gets Redis's error for that case: there is nothing to
// check it against.
func handleAuth(c *conn, args [][]byte) error {
	var err error
	switch len(args) {
	case 2:
		if !c.srv.auth.required {
			return protocol.ErrAuthNoPassword
		}
		err = c.authenticate([]byte("default"), args[1])
	case 3:
		err = c.authenticate(args[1], args[2])
	default:
		return protocol.ErrSyntax // Redis's reply to AUTH a b c
	}
	if err != nil {
		return err
	}
	c.wr.WriteString("OK")
	return nil
}
