package server

import (
	"github.com/leasehold/leasehold/acl"
	"github.com/leasehold/leasehold/protocol"
)

// AdminAccess is what the credentials of a request to the admin listener
// (package admin) allow. Each part is allowed as the RESP command it
// stands for is allowed to the same user, so that the listener shows no
// more than redis-cli would.
type AdminAccess struct {
	Stats     bool // INFO: the metrics and the server's figures
	LockStats bool // LOCKSTATS
	Locks     bool // LOCKS, with every key allowed: every lock's holders and queue
	Events    bool // SUBSCRIBE, with every channel allowed: every lock's events
	Profile   bool // an unrestricted user: the profiler, which shows the command line
}

// AdminAuth checks the credentials of a request to the admin listener as
// AUTH checks a connection's: a user name and password (an empty name is
// "default"), the same users, the same counter of failures. Without
// credentials (given false) the request is the default user if that needs
// no password, as a connection that never sends AUTH is; otherwise it is
// refused. ok is false when the credentials are refused.
func (s *Server) AdminAuth(user, password string, given bool) (access AdminAccess, ok bool) {
	var u *acl.User
	if given {
		if user == "" {
			user = acl.DefaultUser
		}
		u, ok = s.users.Load().Authenticate([]byte(user), []byte(password))
		if !ok {
			s.authFailed(s.log.With().Str("listener", "admin").Logger(), []byte(user))
			return AdminAccess{}, false
		}
	} else if u = s.openDefault(); u == nil {
		return AdminAccess{}, false
	}
	allowed := func(name string) bool {
		i := protocol.LookupIndex([]byte(name))
		return i >= 0 && (u.Unrestricted() || u.CommandAllowed(i, nil))
	}
	return AdminAccess{
		Stats:     allowed("INFO"),
		LockStats: allowed("LOCKSTATS"),
		Locks:     allowed("LOCKS") && u.AllKeys(),
		Events:    allowed("SUBSCRIBE") && u.AllChannels(),
		Profile:   u.Unrestricted(),
	}, true
}
