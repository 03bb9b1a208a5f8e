package admin_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/admin"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/server"
)

// getAs fetches url with HTTP Basic credentials (none when user is "-")
// and returns the status.
func getAs(t *testing.T, url, user, password string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "-" {
		req.SetBasicAuth(user, password)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("GET %s: 401 without a WWW-Authenticate challenge", url)
	}
	return resp.StatusCode
}

// TestAdminAuth: with users that need a password, every endpoint but the
// probes asks for one (HTTP Basic, the RESP users'), and shows a user only
// what the commands it stands for would show it through redis-cli.
func TestAdminAuth(t *testing.T) {
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(aclFile, []byte(`user default on >adminpw ~* &* +@all
user watcher on >wpw +info +lockstats
user viewer on >vpw ~* &* +info +locks +subscribe
user partial on >ppw ~app:* &* +info +locks +subscribe
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ls := lockserver.Start(t, func(c *server.Config) { c.ACLFile, c.LockStatsTop = aclFile, 10 })
	base := startAdmin(t, ls.Server, func(c *admin.Config) { c.Pprof = true })
	const (
		ok        = http.StatusOK
		challenge = http.StatusUnauthorized
		forbidden = http.StatusForbidden
	)
	for _, tc := range []struct {
		path, user, password string
		want                 int
	}{
		{"/healthz", "-", "", ok},
		{"/readyz", "-", "", ok},
		{"/metrics", "-", "", challenge},
		{"/metrics", "default", "wrong", challenge},
		{"/metrics", "nobody", "adminpw", challenge},
		{"/metrics", "", "adminpw", ok}, // no name: the default user, as AUTH password
		{"/metrics", "watcher", "wpw", ok},
		{"/", "-", "", challenge},
		{"/", "watcher", "wpw", ok},
		{"/api/stats", "watcher", "wpw", ok},
		{"/api/lockstats", "watcher", "wpw", ok},
		{"/api/locks", "watcher", "wpw", forbidden},
		{"/api/locks", "viewer", "vpw", ok},
		{"/api/locks", "partial", "ppw", forbidden}, // not every key
		{"/api/lockstats", "viewer", "vpw", forbidden},
		{"/api/history", "viewer", "vpw", ok},
		{"/api/history", "watcher", "wpw", forbidden}, // its events are every lock's
		{"/api/history", "partial", "ppw", ok},        // every channel: the events, as /api/events
		{"/debug/pprof/", "viewer", "vpw", forbidden},
		{"/debug/pprof/cmdline", "watcher", "wpw", forbidden},
		{"/debug/pprof/", "default", "adminpw", ok},
	} {
		if got := getAs(t, base+tc.path, tc.user, tc.password); got != tc.want {
			t.Errorf("GET %s as %q/%q: %d, want %d", tc.path, tc.user, tc.password, got, tc.want)
		}
	}
	if st := ls.Server.StatsSnapshot(); st.Traffic.ACLDeniedAuth != 2 {
		t.Errorf("acl_access_denied_auth = %d after two refused credentials, want 2", st.Traffic.ACLDeniedAuth)
	}

	// Without a password, nothing is asked, as on the RESP listener.
	open := lockserver.Start(t)
	openBase := startAdmin(t, open.Server)
	for _, path := range []string{"/metrics", "/", "/api/locks"} {
		if got := getAs(t, openBase+path, "-", ""); got != ok {
			t.Errorf("GET %s of a server without a password: %d, want 200", path, got)
		}
	}
}
