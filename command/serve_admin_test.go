package command

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
)

// TestServeAdminListener runs serve with --http-addr, with and without
// --pprof: the health endpoints and the metrics answer, the profiler only
// when asked for, and the listener closes with the server.
func TestServeAdminListener(t *testing.T) {
	t.Parallel()
	for _, pprof := range []bool{false, true} {
		var httpAddr string
		p, addr := serveBinary(t, func(addr string) ([]string, []string) {
			httpAddr = freeAddr(t)
			args := []string{"serve", "--addr", addr, "--log-format", "json", "--http-addr", httpAddr}
			if pprof {
				args = append(args, "--pprof")
			}
			return nil, args
		})
		// Answered: Serve runs, so the server is ready.
		if err := client(t, addr).Ping(testCtx(t)).Err(); err != nil {
			t.Fatal(err)
		}
		base := "http://" + httpAddr
		pprofStatus := http.StatusNotFound
		if pprof {
			pprofStatus = http.StatusOK
		}
		for _, c := range []struct {
			path   string
			status int
			want   string
		}{
			{"/healthz", http.StatusOK, "ok"},
			{"/readyz", http.StatusOK, "ok"},
			{"/metrics", http.StatusOK, "leasehold_commands_processed_total"},
			{"/debug/pprof/", pprofStatus, ""},
		} {
			code, body := testutil.HTTPGet(t, base+c.path)
			if code != c.status || !strings.Contains(body, c.want) {
				t.Errorf("--pprof=%v: GET %s: %d, want %d with %q", pprof, c.path, code, c.status, c.want)
			}
		}
		if exit := p.stop(syscall.SIGTERM); exit != 0 {
			t.Fatalf("exit status %d, want 0\nstderr: %s", exit, p.stderr)
		}
		if l := lineWith(p.logLines(), "admin listening"); l == nil || l["http_addr"] != httpAddr {
			t.Errorf("no log line of the admin listener on %s:\n%s", httpAddr, p.stderr)
		}
		if _, err := (&http.Client{Timeout: time.Second}).Get(base + "/healthz"); err == nil {
			t.Errorf("the admin listener still answers after the server exited")
		}
	}
}

// TestServeAdminFlagsRefused: the admin flags that cannot work are refused
// before anything starts, with what to do instead.
func TestServeAdminFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pprof"}, "--pprof needs --http-addr"},
		{[]string{"--http-allow-remote"}, "--http-allow-remote needs --http-addr"},
		{[]string{"--pprof", "--http-allow-remote"}, "--http-allow-remote and --pprof need --http-addr"},
		{[]string{"--http-addr", "0.0.0.0:1"}, "--http-allow-remote"},
		{[]string{"--http-addr", ":1"}, "--http-allow-remote"},
		{[]string{"--http-addr", "nonsense"}, "--http-addr"},
	} {
		args := append([]string{"serve", "--addr", freeAddr(t)}, c.args...)
		_, stderr, exit := run(t, nil, args...)
		if exit != exitFailure || !strings.Contains(stderr, c.want) {
			t.Errorf("leasehold %q: exit %d, want %d with %q in\n%s", args, exit, exitFailure, c.want, stderr)
		}
	}
}
