//go:build linux || darwin

package command

import (
	"bufio"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// underFileLimit is a wrapper that runs the binary with its open-file limit
// (soft and hard, as ulimit -n sets both) lowered to n.
func underFileLimit(n int) []string {
	return []string{"sh", "-c", "ulimit -n " + strconv.Itoa(n) + ` && exec "$@"`, "sh"}
}

// TestMaxClientsFitsOpenFilesLimit: as Redis's adjustOpenFilesLimit does, a
// --max-clients the open-file limit cannot serve is lowered to the limit
// less the descriptors the server keeps for itself, with a warning, and the
// effective value is what the startup line, INFO and CONFIG GET report.
func TestMaxClientsFitsOpenFilesLimit(t *testing.T) {
	t.Parallel()
	p, addr := serveBinaryUnder(t, underFileLimit(64), serveArgs("--io-loops", "0", "--max-clients", "100"))
	rdb := client(t, addr)
	info, err := rdb.Info(testCtx(t), "clients").Result()
	if err != nil || !strings.Contains(info, "\r\nmaxclients:32\r\n") {
		t.Errorf("INFO clients = %q, %v; want maxclients:32 (64 files less 32 kept)", info, err)
	}
	if got, err := rdb.ConfigGet(testCtx(t), "maxclients").Result(); err != nil || got["maxclients"] != "32" {
		t.Errorf("CONFIG GET maxclients = %v, %v; want 32", got, err)
	}
	// The lowered bound is the one enforced, and the descriptors kept
	// suffice: rdb's connection and 31 more are served, the next refused.
	served := 1
	for ; served <= 40; served++ {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(nc).ReadString('\n')
		if line == "-ERR max number of clients reached\r\n" {
			break
		}
		if line != "+PONG\r\n" {
			t.Fatalf("connection %d: %q, %v; want PONG or the max clients error", served+1, line, err)
		}
	}
	if served != 32 {
		t.Errorf("%d connections served, want 32", served)
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d, want 0\nstderr: %s", exit, p.stderr)
	}
	lines := p.logLines()
	checkFields(t, lineWith(lines, "max clients lowered to fit the open-file limit (ulimit -n)"), map[string]any{
		"level": "warn", "max_clients": 32.0, "max_clients_requested": 100.0, "open_files_limit": 64.0, "open_files_needed": 132.0,
	})
	checkFields(t, lineWith(lines, "leasehold listening"), map[string]any{"max_clients": 32.0})
}

// TestOpenFilesLimitTooLowRefused: a limit that leaves no descriptor for a
// client is a reason not to start, as in Redis.
func TestOpenFilesLimitTooLowRefused(t *testing.T) {
	t.Parallel()
	p := startUnder(t, underFileLimit(32), nil, "serve", "--addr", "127.0.0.1:0", "--io-loops", "0", "--log-format", "json")
	select {
	case <-p.done:
	case <-time.After(commandTimeout):
		t.Fatalf("leasehold still runs with an open-file limit of 32\nstderr: %s", p.stderr)
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1\nstderr: %s", p.err, p.stderr)
	}
	l := lineWith(p.logLines(), "cannot start")
	if l == nil || !strings.Contains(l["error"].(string), "open-file limit") {
		t.Fatalf("no cannot start line naming the open-file limit:\n%s", p.stderr)
	}
}
