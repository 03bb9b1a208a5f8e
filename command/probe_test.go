package command

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestProbe runs leasehold probe against a real server's admin listener:
// 0 and the body when /readyz answers 200; 1, with the reason on stderr,
// when it answers 503 (a cluster member no leader has taken in), when
// nothing listens, and when the listener does not answer in --timeout.
func TestProbe(t *testing.T) {
	t.Parallel()
	var ready, unready string
	_, addr := serveBinary(t, func(addr string) ([]string, []string) {
		ready = freeAddr(t)
		return nil, []string{"serve", "--addr", addr, "--log-format", "json", "--http-addr", ready}
	})
	// Answered: Serve runs, so /readyz says ready.
	if err := client(t, addr).Ping(testCtx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	serveBinary(t, func(addr string) ([]string, []string) {
		unready = freeAddr(t)
		return nil, []string{"serve", "--addr", addr, "--log-format", "json", "--http-addr", unready,
			"--cluster", "--node-id", "n2", "--raft-addr", freeAddr(t), "--data-dir", t.TempDir()}
	})
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	for _, tc := range []struct {
		name   string
		args   []string
		exit   int
		stdout string
		stderr []string
		within time.Duration
	}{
		{"ready", []string{"--url", "http://" + ready + "/readyz"}, 0, "ok\n", nil, commandTimeout},
		{"healthz", []string{"--url", "http://" + ready + "/healthz"}, 0, "ok\n", nil, commandTimeout},
		{"503", []string{"--url", "http://" + unready + "/readyz"}, 1, "", []string{"503 Service Unavailable", "cluster: no leader known"}, commandTimeout},
		{"not listening", []string{"--url", "http://" + freeAddr(t) + "/readyz"}, 1, "", []string{"connection refused"}, commandTimeout},
		{"silent", []string{"--url", "http://" + silent.Addr().String() + "/readyz", "--timeout", "300ms"}, 1, "", []string{"300ms"}, 5 * time.Second},
		{"not a URL", []string{"--url", "127.0.0.1:9379"}, 2, "", []string{"http://"}, commandTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			stdout, stderr, exit := run(t, nil, append([]string{"probe"}, tc.args...)...)
			if took := time.Since(began); took > tc.within {
				t.Errorf("took %v, want at most %v", took, tc.within)
			}
			if exit != tc.exit || stdout != tc.stdout {
				t.Fatalf("exit %d, stdout %q; want %d, %q\nstderr: %s", exit, stdout, tc.exit, tc.stdout, stderr)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}
