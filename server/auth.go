package server

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/acl"
	"github.com/leasehold/leasehold/protocol"
	"github.com/rs/zerolog"
)

// Authentication, as Redis's: users from the ACL store (acl.go), the
// default user's password alone (requirepass), and Redis's protected mode.
// The store keeps only passwords' SHA-256 digests and compares them in
// constant time.

// authState is the server's side of authentication: counters, and the
// loopback test protected mode uses, set by New.
type authState struct {
	loopback func(addr net.Addr) bool // Config.PeerIsLoopback, or isLoopback

	failures   atomic.Uint64 // AUTH and HELLO ... AUTH refused: INFO's acl_access_denied_auth
	lastWarned atomic.Int64  // monotonic ns of the last failure logged, 0 for none
	unwarned   atomic.Uint64 // failures since then that were not logged
	refused    atomic.Uint64 // connections protected mode refused

	deniedCmd     atomic.Uint64 // commands refused by the user's rules: acl_access_denied_cmd
	deniedKey     atomic.Uint64 // keys refused: acl_access_denied_key
	deniedChannel atomic.Uint64 // channels and patterns refused: acl_access_denied_channel
	deniedCert    atomic.Uint64 // client certificates that named no user: acl_access_denied_tls_cert
}

// authFailureWarnEvery is how often at most a refused AUTH is logged, so
// that a brute-force loop cannot flood the log; INFO counts every one.
const authFailureWarnEvery = time.Second

func newAuthState(cfg Config) *authState {
	a := &authState{loopback: cfg.PeerIsLoopback}
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

// refuseProtected writes Redis's protected-mode error to a connection from
// a non-loopback peer of a server without a password and reports true; the
// caller then closes it. --protected-mode no or a password lets every peer
// in: as in Redis, "a password is set" when the default user is not both
// on and nopass.
func (s *Server) refuseProtected(nc net.Conn) bool {
	if !s.cfg.ProtectedMode || s.openDefault() == nil || s.auth.loopback(nc.RemoteAddr()) {
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

// refuseBeforeAuth is dispatch's check, for a connection that has not
// authenticated, that command i may run: it replies NOAUTH and reports
// true if not. While the default user is on and nopass every connection is
// that user, as in Redis, even one that started before a reload made it so.
func (c *conn) refuseBeforeAuth(i int) bool {
	st := c.srv.users.Load()
	if u := openDefault(st); u != nil {
		c.setUser(u, st)
		return false
	}
	if noAuthCommand[i] {
		return false
	}
	c.writeErr(protocol.ErrNoAuth)
	return true
}

// authenticated reports whether c may run more than the no_auth commands.
func (c *conn) authenticated() bool { return c.user != nil || c.srv.openDefault() != nil }

// authenticate checks AUTH's or HELLO ... AUTH's user and password against
// the users (a nopass user takes any password). Success makes c that user
// and lifts the pre-auth limits on its input; a failure, the same for an
// unknown user, a disabled one and a wrong password, is counted and logged
// (and in ACL LOG), and leaves c as it was, as in Redis.
func (c *conn) authenticate(user, password []byte) error {
	st := c.srv.users.Load()
	u, ok := st.Authenticate(user, password)
	if !ok {
		c.authFailed(user)
		return protocol.ErrWrongPass
	}
	c.setUser(u, st)
	return nil
}

// authFailed counts a refused AUTH and logs it with the peer and the user
// name, at most once every authFailureWarnEvery, with the number of
// failures not logged since the last line.
func (c *conn) authFailed(user []byte) {
	c.srv.aclLog.Add("auth", "AUTH", string(user), c.describe())
	c.srv.authFailed(c.log, user)
}

// authFailed counts a refused authentication, of a connection or of a
// request to the admin listener, and logs it on log at most once every
// authFailureWarnEvery.
func (s *Server) authFailed(log zerolog.Logger, user []byte) {
	a := s.auth
	a.failures.Add(1)
	now := s.monotonic()
	last := a.lastWarned.Load()
	if last != 0 && now-last < int64(authFailureWarnEvery) || !a.lastWarned.CompareAndSwap(last, now) {
		a.unwarned.Add(1)
		return
	}
	log.Warn().
		Str("user", string(user[:min(len(user), 64)])).
		Uint64("unlogged_failures", a.unwarned.Swap(0)).
		Uint64("acl_access_denied_auth", a.failures.Load()).
		Msg("authentication failed: wrong user name or password")
}

// handleAuth is AUTH [user] password. While the default user is nopass, a
// password alone gets Redis's error for that case: there is nothing to
// check it against.
func handleAuth(c *conn, args [][]byte) error {
	var err error
	switch len(args) {
	case 2:
		if d := c.srv.users.Load().User(acl.DefaultUser); d == nil || d.NoPass() {
			return protocol.ErrAuthNoPassword
		}
		err = c.authenticate([]byte(acl.DefaultUser), args[1])
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
