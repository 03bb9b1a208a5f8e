package command

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/internal/tlstest"
)

// TestServeTLSReloadOnSIGHUP serves TLS alone (--addr ""), and checks a
// SIGHUP has new connections shown the certificate written since.
func TestServeTLSReloadOnSIGHUP(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	p, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return []string{"LEASEHOLD_TLS_AUTH_CLIENTS=no"}, []string{"serve", "--addr", "", "--tls-addr", addr, "--log-format", "json",
			"--tls-cert-file", f.ServerCert, "--tls-key-file", f.ServerKey}
	})
	serial := func() int64 {
		nc, err := tls.Dial("tcp", addr, f.ClientConfig(t, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		return nc.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	before := serial()
	rotated := f.Rotate(t).Int64()
	if before == rotated {
		t.Fatal("Rotate kept the serial number")
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the rotated certificate served after SIGHUP", func() bool { return serial() == rotated })
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Errorf("exit %d after SIGTERM, want 0\nstderr: %s", exit, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "TLS certificates reloaded") {
		t.Errorf("no reload logged:\n%s", p.stderr)
	}
}

// TestServeTLSFailsToStart checks wrong or missing TLS settings stop serve
// with an error that names them.
func TestServeTLSFailsToStart(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	files := []string{"--tls-cert-file", f.ServerCert, "--tls-key-file", f.ServerKey, "--tls-ca-cert-file", f.CACert}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing cert", []string{"--tls-port", "1", "--tls-cert-file", filepath.Join(f.Dir, "none.crt"), "--tls-key-file", f.ServerKey, "--tls-ca-cert-file", f.CACert}, "none.crt"},
		{"no key", []string{"--tls-port", "1", "--tls-cert-file", f.ServerCert}, "tls-key-file"},
		{"auth without ca", []string{"--tls-port", "1", "--tls-cert-file", f.ServerCert, "--tls-key-file", f.ServerKey}, "tls-ca-cert-file"},
		{"file without listener", files, "needs a TLS listener"},
		{"port and addr", append([]string{"--tls-port", "1", "--tls-addr", "127.0.0.1:0"}, files...), "not both"},
		{"old protocol", append([]string{"--tls-port", "1", "--tls-protocols", "TLSv1.1"}, files...), "not allowed"},
		{"no listener at all", []string{"--addr", ""}, "no address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}, tc.args...)
			_, stderr, exit := run(t, nil, args...)
			if exit != 1 {
				t.Fatalf("leasehold %q: exit %d, want 1\nstderr: %s", args, exit, stderr)
			}
			l := lineWith(jsonLines(t, stderr), "cannot start")
			if l == nil || !strings.Contains(l["error"].(string), tc.want) {
				t.Fatalf("stderr %s: want a cannot-start error naming %q", stderr, tc.want)
			}
		})
	}
}
