//go:build unix

package command

import (
	"strings"
	"syscall"
	"testing"
)

// TestClientCommandsAddrList: with a list in LEASEHOLD_ADDR (or --addr),
// the client commands use the first server that takes a connection; once it
// is stopped, the second; run passes the list on to COMMAND, whose own
// client commands use it too. With every address dead, the error names
// each.
func TestClientCommandsAddrList(t *testing.T) {
	t.Parallel()
	first, a1 := startServe(t)
	_, a2 := startServe(t)
	list := a1 + "," + a2
	env := []string{"LEASEHOLD_ADDR=" + list}

	out, errOut, exit := run(t, env, "acquire", "--ttl", "10s", "on-first")
	if exit != 0 {
		t.Fatalf("acquire: exit %d, stderr %q", exit, errOut)
	}
	if st := lockStatus(t, client(t, a1), "on-first"); st["token"] != strings.TrimSpace(out) {
		t.Fatalf("STATUS on the first server: %v, want token %s", st, out)
	}
	if st := lockStatus(t, client(t, a2), "on-first"); st != nil {
		t.Fatalf("STATUS on the second server: %v, want none", st)
	}

	first.stop(syscall.SIGTERM)
	out, errOut, exit = run(t, env, "acquire", "--ttl", "10s", "on-second")
	if exit != 0 {
		t.Fatalf("acquire with the first server stopped: exit %d, stderr %q", exit, errOut)
	}
	tok := strings.TrimSpace(out)
	if st := lockStatus(t, client(t, a2), "on-second"); st["token"] != tok {
		t.Fatalf("STATUS on the second server: %v, want token %s", st, tok)
	}
	// --addr takes the list as well, spaces after the commas allowed.
	if out, errOut, exit := run(t, nil, "release", "--addr", a1+", "+a2, "on-second", tok); exit != 0 || strings.TrimSpace(out) != "true" {
		t.Fatalf("release --addr LIST: exit %d, stdout %q, stderr %q", exit, out, errOut)
	}

	out, errOut, exit = run(t, append(env, "LEASEHOLD_BIN="+binary), "run", "--ttl", "10s", "job", "--",
		"sh", "-c", `echo "$LEASEHOLD_ADDR"; "$LEASEHOLD_BIN" verify job "$LEASEHOLD_TOKEN"`)
	if exit != 0 {
		t.Fatalf("run: exit %d, stdout %q, stderr %q", exit, out, errOut)
	}
	if lines := strings.Fields(out); len(lines) != 2 || lines[0] != list || lines[1] != "true" {
		t.Fatalf("run's COMMAND printed %q, want the list %s and a verified token", out, list)
	}

	dead := freeAddr(t) + "," + a1
	_, errOut, exit = run(t, nil, "status", "--addr", dead, "job")
	if exit != exitFailure {
		t.Fatalf("status with every address dead: exit %d, stderr %q", exit, errOut)
	}
	for _, a := range strings.Split(dead, ",") {
		if !strings.Contains(errOut, a) {
			t.Errorf("status with every address dead: stderr %q does not name %s", errOut, a)
		}
	}
}
