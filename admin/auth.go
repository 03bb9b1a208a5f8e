package admin

import (
	"net/http"

	"github.com/leasehold/leasehold/server"
)

// Authenticator checks the credentials of an admin request as the RESP
// listener's AUTH does; *server.Server is one. A Source that is one has
// every endpoint but /healthz and /readyz (which load balancers and
// Kubernetes probe without credentials) behind HTTP Basic authentication
// with the server's users, whenever a connection would need AUTH, and each
// endpoint allowed only to users that may run the commands it stands for
// (server.AdminAccess).
type Authenticator interface {
	AdminAuth(user, password string, given bool) (server.AdminAccess, bool)
}

// need names what an endpoint needs of the request's access.
type need func(server.AdminAccess) bool

var (
	anyUser      need = func(server.AdminAccess) bool { return true }
	needStats    need = func(a server.AdminAccess) bool { return a.Stats }
	needLockStat need = func(a server.AdminAccess) bool { return a.LockStats }
	needLocks    need = func(a server.AdminAccess) bool { return a.Locks }
	needEvents   need = func(a server.AdminAccess) bool { return a.Events }
	needProfile  need = func(a server.AdminAccess) bool { return a.Profile }
)

// needAll is what an endpoint showing what several others show needs.
func needAll(ns ...need) need {
	return func(a server.AdminAccess) bool {
		for _, n := range ns {
			if !n(a) {
				return false
			}
		}
		return true
	}
}

// guard serves h to requests whose credentials auth accepts and whose
// access has what n asks; 401 with a Basic challenge when the credentials
// are missing or refused (a browser then asks for them), 403 when the user
// may not. A nil auth lets every request through.
func guard(auth Authenticator, n need, h http.Handler) http.Handler {
	if auth == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, password, given := r.BasicAuth()
		access, ok := auth.AdminAuth(user, password, given)
		switch {
		case !ok:
			w.Header().Set("WWW-Authenticate", `Basic realm="leasehold", charset="UTF-8"`)
			http.Error(w, "authentication required: a leasehold user and password (HTTP Basic), as for AUTH", http.StatusUnauthorized)
		case !n(access):
			http.Error(w, "forbidden: this user may not run the commands this page shows (INFO, LOCKSTATS, LOCKS on every key, SUBSCRIBE to every channel; the profiler needs an unrestricted user)", http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	})
}
