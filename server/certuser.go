package server

import "strings"

// A client certificate as a user, as Redis 8.6's tls-auth-clients-user CN:
// the handshake has verified the certificate against tls-ca-cert-file, so
// its subject's common name is as good a credential as a password, and a
// client whose CN names an enabled user starts as that user, with no AUTH
// (AUTH may still change it). A CN that names no user, or a disabled one,
// grants nothing: the connection starts as any other does (NOAUTH, or the
// default user if it is on and nopass), the refusal is counted in INFO
// (acl_access_denied_tls_cert, Redis's name) and kept in ACL LOG.

// authenticateByCertificate runs once the handshake is done, before c
// serves a command.
func (c *conn) authenticateByCertificate() {
	if c.tlsCN == "" || !strings.EqualFold(c.srv.cfg.TLS.AuthClientsUser, "cn") {
		return
	}
	st := c.srv.users.Load()
	if u := st.User(c.tlsCN); u != nil && u.Enabled() {
		c.setUser(u, st)
		return
	}
	c.srv.auth.deniedCert.Add(1)
	c.srv.aclLog.Add("tls-cert", c.tlsCN, c.tlsCN, c.describe())
	c.log.Debug().Str("cn", c.tlsCN[:min(len(c.tlsCN), 64)]).Msg("client certificate: its CN names no enabled user")
}
