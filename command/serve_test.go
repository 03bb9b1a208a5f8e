package command

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// jsonLines parses stderr as zerolog's JSON lines, failing on any other.
func jsonLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// lineWith returns the first log line whose message is msg, or nil.
func lineWith(lines []map[string]any, msg string) map[string]any {
	for _, l := range lines {
		if l["message"] == msg {
			return l
		}
	}
	return nil
}

// serveOnce starts the server with args, takes the lease key for an hour if
// key is not "", stops it, and returns its log lines and the lease's token.
func serveOnce(t *testing.T, key string, args ...string) ([]map[string]any, uint64) {
	t.Helper()
	p, addr := serveBinary(t, serveArgs(args...))
	var tok uint64
	if key != "" {
		var err error
		if tok, err = client(t, addr).Do(testCtx(t), "ACQUIRE", key, 3600000).Uint64(); err != nil {
			t.Fatalf("ACQUIRE %s: %v", key, err)
		}
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d, want 0\nstderr: %s", exit, p.stderr)
	}
	lines := p.logLines()
	if l := lineWith(lines, "leasehold listening"); l == nil || l["addr"] != addr {
		t.Fatalf("no startup line with addr %s:\n%s", addr, p.stderr)
	}
	return lines, tok
}

// TestStartupLine checks that the startup line shows the settings that
// matter, and that with --data-dir a recovery summary comes before it.
func TestStartupLine(t *testing.T) {
	t.Parallel()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	version := versionOutput(t, binary)
	lines, _ := serveOnce(t, "", "--io-loops", "0", "--max-clients", "77", "--max-ttl", "90m", "--lock-delay", "2s",
		"--client-output-buffer-limit", "normal 1mb 512kb 10")
	want := map[string]any{
		"version": version, "transport": "goroutine-per-connection", "io_loops": 0.0,
		"data_dir": "", "max_clients": 77.0, "max_ttl": "1h30m0s", "lock_delay": "2s",
		"require_create": false, "max_key_len": 1024.0, "max_bulk_len": 1048576.0,
		"max_query_buffer": 67108864.0, "idle_timeout": "0s",
		"client_output_buffer_limit": "normal 1048576 524288 10 pubsub 33554432 8388608 60",
	}
	checkFields(t, lineWith(lines, "leasehold listening"), want)
	for _, absent := range []string{"fsync", "restart_grace", "repair"} {
		if v, ok := lineWith(lines, "leasehold listening")[absent]; ok {
			t.Errorf("startup line without --data-dir has %s=%v", absent, v)
		}
	}
	if l := lineWith(lines, "data directory recovered"); l != nil {
		t.Errorf("recovery line without --data-dir: %v", l)
	}

	dir := t.TempDir()
	durable := []string{"--data-dir", dir, "--fsync", "everysec", "--restart-grace", "5s", "--io-loops", "1"}
	lines, tok := serveOnce(t, "k", durable...)
	checkFields(t, lineWith(lines, "data directory recovered"), map[string]any{
		"data_dir": dir, "locks": 0.0, "leases": 0.0, "highest_token": 0.0, "snapshot": "", "logs": 0.0, "warnings": 0.0,
	})
	checkFields(t, lineWith(lines, "leasehold listening"), map[string]any{
		"transport": "epoll", "io_loops": 1.0, "data_dir": dir, "fsync": "everysec", "restart_grace": "5s", "repair": false,
	})

	// A cluster node is served by the event loop too, unless told otherwise.
	lines, _ = serveOnce(t, "", "--cluster", "--node-id", "n1", "--raft-addr", freeAddr(t), "--data-dir", t.TempDir(), "--bootstrap")
	checkFields(t, lineWith(lines, "leasehold listening"), map[string]any{"transport": "epoll", "io_loops": 1.0})

	lines, _ = serveOnce(t, "", durable...)
	rec := lineWith(lines, "data directory recovered")
	checkFields(t, rec, map[string]any{
		"data_dir": dir, "locks": 1.0, "leases": 1.0, "delayed": 0.0, "highest_token": float64(tok),
		"snapshot": "", "logs": 1.0, "warnings": 0.0,
	})
	if took, ok := rec["took"].(string); !ok || took == "" || took == "0s" {
		t.Errorf("recovery line took=%v, want the time taken", rec["took"])
	}
	if lines[0]["message"] != "data directory recovered" {
		t.Errorf("first line %v, want the recovery summary before the startup line", lines[0])
	}
}

func checkFields(t *testing.T, line map[string]any, want map[string]any) {
	t.Helper()
	if line == nil {
		t.Fatalf("no such log line; want one with %v", want)
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s: %s=%v (%T), want %v (%T)", line["message"], k, line[k], line[k], v, v)
		}
	}
}

// TestDataDirFlagsRefused: --fsync, --restart-grace and --repair without
// --data-dir are a mistake the user must hear of (a server they think
// durable would forget every lock at a restart): exit 2, logged in the
// chosen format.
func TestDataDirFlagsRefused(t *testing.T) {
	const anyPort = "--addr=127.0.0.1:0"
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"fsync", nil, []string{"--fsync", "no"}, "--fsync needs --data-dir"},
		{"fsync at its default", nil, []string{"serve", "--fsync", "always"}, "--fsync needs --data-dir"},
		{"restart grace", nil, []string{"serve", "--restart-grace", "10s"}, "--restart-grace needs --data-dir"},
		{"repair", nil, []string{"--repair", "serve"}, "--repair needs --data-dir"},
		{"from the environment", []string{"LEASEHOLD_FSYNC=no"}, nil, "--fsync needs --data-dir"},
		{"several", nil, []string{"--fsync", "no", "serve", "--repair"}, "--fsync and --repair need --data-dir"},
		{"empty data dir", []string{"LEASEHOLD_DATA_DIR="}, []string{"--restart-grace", "1s"}, "--restart-grace needs --data-dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, exit := run(t, tc.env, append(tc.args, anyPort, "--log-format", "json")...)
			if exit != 2 {
				t.Fatalf("exit %d, want 2\nstderr: %s", exit, stderr)
			}
			lines := jsonLines(t, stderr)
			if len(lines) != 1 || lines[0]["level"] != "error" || !strings.Contains(lines[0]["error"].(string), tc.want) {
				t.Fatalf("stderr %s: want one error line saying %q", stderr, tc.want)
			}
		})
	}
}

// TestServeArgument: serve takes no arguments; one is a usage error, found
// before the logger is made, so plain text.
func TestServeArgument(t *testing.T) {
	t.Parallel()
	_, stderr, exit := run(t, nil, "serve", "--addr=127.0.0.1:0", "--log-format", "json", "extra")
	if exit != 2 || !strings.HasPrefix(stderr, `leasehold: unexpected argument "extra"`) {
		t.Fatalf("exit %d, stderr %q; want 2 and the unexpected argument named", exit, stderr)
	}
}

// TestServeFailsToStart: a server that cannot start says why in the
// --log-format it was given, on stderr, and exits 1.
func TestServeFailsToStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() }) // after the parallel subtests
	inUse := "--addr=" + taken.Addr().String()
	const anyPort = "--addr=127.0.0.1:0"
	damaged := t.TempDir()
	if err := os.WriteFile(filepath.Join(damaged, "TOKENS"), []byte("not a reservation"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(emptyFile, []byte("\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	aclDefault, aclBroken := filepath.Join(t.TempDir(), "default.acl"), filepath.Join(t.TempDir(), "broken.acl")
	if err := os.WriteFile(aclDefault, []byte("user default on >pw +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(aclBroken, []byte("user a on\nuser b on +@nosuch\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		env    []string
		args   []string
		format string // what stderr must be: json or console
		want   string // in the error
	}{
		{"address in use", nil, []string{inUse, "--log-format", "json"}, "json", "address already in use"},
		{"address in use, console", nil, []string{"serve", inUse, "--log-format", "console"}, "console", "address already in use"},
		{"address in use, default format", nil, []string{inUse}, "json", "address already in use"}, // stderr is no terminal
		{"address in use, format from the environment", []string{"LEASEHOLD_LOG_FORMAT=console"}, []string{inUse}, "console", "address already in use"},
		{"damaged data dir", nil, []string{anyPort, "--data-dir", damaged}, "json", "TOKENS is corrupt"},
		{"shards not a power of two", nil, []string{anyPort, "--shards", "3"}, "json", "shards"},
		{"shards from the environment", []string{"LEASEHOLD_SHARDS=3"}, []string{anyPort}, "json", "shards"},
		{"serve with bad shards", nil, []string{"serve", anyPort, "--shards", "3", "--log-format", "console"}, "console", "shards"},
		{"bad addr", nil, []string{"--addr", "nonsense"}, "json", "addr"},
		{"zero max ttl", nil, []string{anyPort, "--max-ttl", "0s"}, "json", "max ttl"},
		{"zero max clients", nil, []string{anyPort, "--max-clients", "0"}, "json", "max clients"},
		{"bad fsync policy", nil, []string{anyPort, "--data-dir", t.TempDir(), "--fsync", "sometimes"}, "json", "fsync policy"},
		{"bad client output buffer limit", nil, []string{anyPort, "--client-output-buffer-limit", "replica 256mb 64mb 60"}, "json", "no replicas"},
		{"password two ways", []string{"LEASEHOLD_REQUIREPASS=pw"}, []string{anyPort, "--requirepass-file", emptyFile}, "json", "give the password one way"},
		{"empty password file", nil, []string{anyPort, "--requirepass-file", emptyFile}, "json", "the first line is empty"},
		{"ACL file and requirepass both set default", []string{"LEASEHOLD_REQUIREPASS=pw"}, []string{anyPort, "--acl-file", aclDefault}, "json", "defines the default user"},
		{"ACL file that does not parse", nil, []string{anyPort, "--acl-file", aclBroken}, "json", "broken.acl:2: unknown command or category name in ACL (rule +@nosuch)"},
		{"missing ACL file", []string{"LEASEHOLD_ACL_FILE=" + filepath.Join(damaged, "nope")}, []string{anyPort}, "json", "no such file"},
		{"missing password file", nil, []string{anyPort, "--requirepass-file", filepath.Join(damaged, "nope")}, "json", "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, exit := run(t, tc.env, tc.args...)
			if exit != 1 {
				t.Fatalf("leasehold %q: exit %d, want 1\nstderr: %s", tc.args, exit, stderr)
			}
			if tc.format == "console" {
				if strings.Contains(stderr, "{") || !strings.Contains(stderr, "ERR") || !strings.Contains(stderr, "cannot start") || !strings.Contains(stderr, tc.want) {
					t.Fatalf("stderr %q: want a console line at level ERR: cannot start, naming %q", stderr, tc.want)
				}
				return
			}
			l := lineWith(jsonLines(t, stderr), "cannot start")
			if l == nil || l["level"] != "error" || !strings.Contains(l["error"].(string), tc.want) {
				t.Fatalf("stderr %s: want a JSON error line, cannot start, with an error naming %q", stderr, tc.want)
			}
		})
	}
}

func TestVersionOf(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "b57c139b01a8cc149d93768d6adfad7b78921eb1"
	cases := []struct {
		name    string
		ldflags string
		info    *debug.BuildInfo
		want    string
	}{
		{"ldflags win", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}}, "v1.2.3"},
		{"no build info", "", nil, "dev"},
		{"go install pkg@version", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"go build in a checkout", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124042023-b57c139b01a8+dirty"}, Settings: vcs(rev, "true")}, "v0.0.0-20261124042023-b57c139b01a8+dirty"},
		{"devel with a revision", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "b57c139b01a8"},
		{"devel with a modified revision", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, "b57c139b01a8-dirty"},
		{"devel without vcs", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"empty", "", &debug.BuildInfo{}, "dev"},
	}
	for _, tc := range cases {
		if got := versionOf(tc.ldflags, tc.info); got != tc.want {
			t.Errorf("%s: versionOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestVersionFromBuild builds the binary as a user would and checks what
// --version says: -ldflags wins; a plain go build in a git checkout reports
// the commit Go embedded, not "dev".
func TestVersionFromBuild(t *testing.T) {
	t.Run("ldflags", func(t *testing.T) {
		t.Parallel()
		bin := goBuild(t, nil, "-ldflags", "-X main.version=v9.9.9-test")
		if got := versionOutput(t, bin); got != "v9.9.9-test" {
			t.Errorf("--version = %q, want v9.9.9-test", got)
		}
	})
	t.Run("go build", func(t *testing.T) {
		t.Parallel()
		// Go stamps the revision only where .git is a directory: not in a
		// git worktree (.git is a file there) nor outside a checkout.
		if fi, err := os.Stat(filepath.Join("..", ".git")); err != nil || !fi.IsDir() {
			t.Skip("the source tree is not a git checkout with a .git directory; go build embeds no revision")
		}
		head, err := exec.Command("git", "-C", "..", "rev-parse", "--short=12", "HEAD").Output()
		if err != nil {
			t.Skipf("git rev-parse: %v", err)
		}
		// The user's GOFLAGS may say -buildvcs=false; a plain go build
		// defaults to auto, which stamps in a checkout.
		bin := goBuild(t, []string{"GOFLAGS=-buildvcs=auto"})
		got := versionOutput(t, bin)
		if got == "dev" || !strings.Contains(got, strings.TrimSpace(string(head))) {
			t.Errorf("--version = %q, want the module version with the revision %s", got, head)
		}
	})
}

// goBuild builds the leasehold command with extra arguments and environment
// and returns the binary.
func goBuild(t *testing.T, env []string, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leasehold")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build", "-o", bin}, args...), ".")...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// versionOutput is the version bin --version prints.
func versionOutput(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	f := strings.Fields(string(out)) // leasehold version V
	if len(f) != 3 {
		t.Fatalf("%s --version printed %q", bin, out)
	}
	return f[2]
}

// TestInfoReportsVersion: INFO's leasehold_version is what --version says.
func TestInfoReportsVersion(t *testing.T) {
	t.Parallel()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	version := versionOutput(t, binary)
	_, addr := serveBinary(t, func(addr string) ([]string, []string) {
		return nil, []string{"--addr", addr, "--log-format", "json"}
	})
	info, err := client(t, addr).Info(testCtx(t), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "leasehold_version:"+version+"\r\n") {
		t.Errorf("INFO server does not report leasehold_version:%s:\n%s", version, info)
	}
}

// TestServeRequirePass starts the server with its password from each
// source: the startup line says a password is set (and never shows it), a
// client without it gets NOAUTH and one with it is served, and only the
// command line's copy draws a warning.
func TestServeRequirePass(t *testing.T) {
	const pw = "hunter2 with spaces"
	file := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(file, []byte(pw+"\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		env   []string
		args  []string
		warns bool
	}{
		{"file", nil, []string{"--requirepass-file", file}, false},
		{"file from the environment", []string{"LEASEHOLD_REQUIREPASS_FILE=" + file}, nil, false},
		{"environment", []string{"LEASEHOLD_REQUIREPASS=" + pw}, nil, false},
		{"command line", nil, []string{"--requirepass", pw}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, addr := serveBinary(t, func(addr string) ([]string, []string) {
				return tc.env, append([]string{"serve", "--addr", addr, "--log-format", "json"}, tc.args...)
			})
			if err := client(t, addr).Do(testCtx(t), "ACQUIRE", "k", 1000).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
				t.Errorf("without the password: err = %v, want NOAUTH", err)
			}
			authed := redis.NewClient(&redis.Options{Addr: addr, Password: pw, MaxRetries: -1})
			defer authed.Close()
			if err := authed.Do(testCtx(t), "ACQUIRE", "k", 1000).Err(); err != nil {
				t.Errorf("with the password: %v", err)
			}
			if exit := p.stop(syscall.SIGTERM); exit != 0 {
				t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
			}
			lines := p.logLines()
			checkFields(t, lineWith(lines, "leasehold listening"), map[string]any{"requirepass": true, "protected_mode": true})
			warned := false
			for _, l := range lines {
				warned = warned || l["level"] == "warn" && strings.Contains(l["message"].(string), "--requirepass on the command line")
			}
			if warned != tc.warns {
				t.Errorf("warned about the command line: %v, want %v\n%s", warned, tc.warns, p.stderr)
			}
			if strings.Contains(p.stderr.String(), "hunter2") {
				t.Errorf("the log shows the password:\n%s", p.stderr)
			}
		})
	}
}
