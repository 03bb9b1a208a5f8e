package server

import (
	"context"
	"testing"

	"github.com/leasehold/leasehold/internal/tlstest"
)

// TestTLSCertificateUser: under tls-auth-clients-user CN, a client whose
// certificate's CN names an enabled user is that user from its first
// command, with its permissions; a CN that names no user, or a disabled
// one, grants nothing (NOAUTH) and is counted. Without the setting a
// certificate grants nothing.
func TestTLSCertificateUser(t *testing.T) {
	const users = `
user default off
user admin on >admin-pw ~* &* +@all
user worker on ~jobs:* +@read +@lock
user retired off ~* +@all
`
	f := tlstest.New(t, t.TempDir())
	cnUser := func(c *Config) { c.TLS.AuthClientsUser = "CN" }
	ts := startServer(t, withTLS(f, "yes"), withACLFile(t, users), cnUser)
	ctx := context.Background()

	worker := ts.tlsClient(f.ClientConfig(t, "worker"))
	if got := do(t, worker, "ACL", "WHOAMI").Text(); got != "worker" {
		t.Fatalf("ACL WHOAMI with a worker certificate = %q, want worker", got)
	}
	do(t, worker, "ACQUIRE", "jobs:1", 1000).Token()
	do(t, worker, "ACQUIRE", "other", 1000).Err("NOPERM")

	for _, cn := range []string{"stranger", "retired"} {
		rdb := ts.tlsClient(f.ClientConfig(t, cn))
		if err := rdb.Do(ctx, "ACQUIRE", "jobs:2", 1000).Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
			t.Errorf("ACQUIRE with a %s certificate: %v, want NOAUTH", cn, err)
		}
	}
	admin := ts.userClient("admin", "admin-pw")
	if got := infoField(t, admin, "stats", "acl_access_denied_tls_cert"); got != "2" {
		t.Errorf("acl_access_denied_tls_cert = %s, want 2", got)
	}

	// The same certificate without the setting: no user.
	plain := startServer(t, withTLS(f, "yes"), withACLFile(t, users))
	rdb := plain.tlsClient(f.ClientConfig(t, "worker"))
	if err := rdb.Do(ctx, "ACQUIRE", "jobs:3", 1000).Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
		t.Errorf("ACQUIRE with a worker certificate, tls-auth-clients-user off: %v, want NOAUTH", err)
	}
}
