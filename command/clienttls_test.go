//go:build unix

package command

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/tlstest"
)

// TestClientCommandsTLS runs client commands with TLS, from flags and from
// the environment, against `leasehold serve --tls-addr --requirepass-file`
// wanting a client certificate, and checks that what
// is missing or wrong fails with exit status 2.
func TestClientCommandsTLS(t *testing.T) {
	t.Parallel()
	const pw = "open sesame"
	certs := tlstest.New(t, t.TempDir())
	pwFile := filepath.Join(certs.Dir, "password")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// TLS only (--addr ""), wanting a client certificate (--tls-auth-clients
	// yes, the default).
	_, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return nil, []string{"serve", "--addr", "", "--tls-addr", addr, "--log-format", "json", "--requirepass-file", pwFile,
			"--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey, "--tls-ca-cert-file", certs.CACert}
	})
	cert, key := certs.ClientCert(t, "ops")
	base := []string{"LEASEHOLD_ADDR=" + addr, "LEASEHOLD_PASSWORD=" + pw}
	tlsEnv := slices.Concat([]string{"LEASEHOLD_TLS=1", "LEASEHOLD_TLS_CACERT=" + certs.CACert, "LEASEHOLD_TLS_CERT=" + cert, "LEASEHOLD_TLS_KEY=" + key}, base)
	tlsFlags := []string{"--tls", "--cacert", certs.CACert, "--cert", cert, "--key", key}
	cases := []struct {
		name string
		env  []string
		args []string
		exit int
		want string // in stdout when exit is 0, else in stderr
	}{
		{"environment", tlsEnv, []string{"acquire", "--ttl", "10s", "a"}, 0, ""},
		{"flags", base, slices.Concat([]string{"acquire", "--ttl", "10s", "b"}, tlsFlags), 0, ""},
		{"flags after the arguments", base, slices.Concat([]string{"info", "server"}, tlsFlags), 0, "# Server"},
		{"sni", base, slices.Concat([]string{"acquire", "--sni", "localhost", "c"}, tlsFlags), 0, ""},
		{"insecure", base, []string{"acquire", "--tls", "--insecure", "--cert", cert, "--key", key, "d"}, 0, ""},
		{"force-release", tlsEnv, []string{"force-release", "z"}, exitNo, `no lease of "z" to end`},
		// run passes the TLS settings of its flags on to COMMAND, which has
		// none in its environment.
		{"run", slices.Concat([]string{"BIN=" + binary}, base), slices.Concat([]string{"run"}, tlsFlags,
			[]string{"e", "--", "sh", "-c", `"$BIN" verify "$LEASEHOLD_KEY" "$LEASEHOLD_TOKEN"`}), 0, "true"},

		// A list: each address verified against its own host (127.0.0.1,
		// which the certificate names), the dead first one passed over.
		{"list", slices.Concat(tlsEnv, []string{"LEASEHOLD_ADDR=" + freeAddr(t) + "," + addr}), []string{"acquire", "--ttl", "10s", "g"}, 0, ""},
		{"list, wrong name", slices.Concat(tlsEnv, []string{"LEASEHOLD_ADDR=" + freeAddr(t) + "," + addr}), []string{"acquire", "--sni", "locks.elsewhere", "g"}, exitFailure, "not locks.elsewhere"},

		{"no TLS", base, []string{"acquire", "f"}, exitFailure, "EOF (the server closed the connection: if it is a TLS port, add --tls)"},
		{"system CAs", base, []string{"acquire", "--tls", "--cert", cert, "--key", key, "f"}, exitFailure, "certificate signed by unknown authority"},
		{"wrong name", base, slices.Concat([]string{"acquire", "--sni", "locks.elsewhere", "f"}, tlsFlags), exitFailure, "not locks.elsewhere"},
		{"no client certificate", base, []string{"acquire", "--tls", "--cacert", certs.CACert, "f"}, exitFailure, ""},
		{"no CA file", base, []string{"acquire", "--tls", "--cacert", certs.Dir + "/missing.crt", "f"}, exitFailure, "--cacert: open " + certs.Dir + "/missing.crt: no such file"},
		{"not a CA file", base, []string{"acquire", "--tls", "--cacert", key, "f"}, exitFailure, "no PEM certificate in it"},
		{"key without cert", base, []string{"acquire", "--tls", "--key", key, "f"}, exitFailure, "--cert and --key go together"},
		{"wrong password", slices.Concat(tlsEnv, []string{"LEASEHOLD_PASSWORD=wrong"}), []string{"acquire", "f"}, exitFailure, "WRONGPASS"},
		{"not a boolean", slices.Concat(tlsEnv, []string{"LEASEHOLD_TLS=yes"}), []string{"acquire", "f"}, exitFailure, `could not parse "yes"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, exit := run(t, tc.env, tc.args...)
			got := out
			if tc.exit != 0 {
				got = errOut
			}
			if exit != tc.exit || !strings.Contains(got, tc.want) {
				t.Fatalf("leasehold %q: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, exit, out, errOut, tc.exit, tc.want)
			}
			if strings.Contains(out+errOut, "sesame") {
				t.Errorf("the password is echoed: stdout %q, stderr %q", out, errOut)
			}
		})
	}
}
