package tlsconf

import "testing"

func TestTLSCertificateUserNeedsCertificates(t *testing.T) {
	cfg := Default()
	cfg.Addr, cfg.CertFile, cfg.KeyFile = "127.0.0.1:0", "c", "k"
	cfg.AuthClients, cfg.AuthClientsUser = "no", "CN"
	if err := cfg.Validate(); err == nil {
		t.Error("tls-auth-clients-user CN with tls-auth-clients no: no error")
	}
	cfg.AuthClients, cfg.CACertFile, cfg.AuthClientsUser = "optional", "ca", "uid"
	if err := cfg.Validate(); err == nil {
		t.Error("tls-auth-clients-user uid: no error")
	}
}
