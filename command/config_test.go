package command

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// configFormats write the same settings as TOML and as YAML; %s is the
// address.
var configFormats = []struct{ ext, body string }{
	{".toml", `addr = "%s"
log-format = "json"
max-clients = 77
max-ttl = "90m"
shutdown-timeout = "3s"
require-create = true
maxmemory = 1000000
max-bulk-len = 4096
`},
	{".yaml", `addr: "%s"
log-format: json
max-clients: 77
max-ttl: 90m
shutdown-timeout: 3s
require-create: true
maxmemory: 1000000
max-bulk-len: 4096
`},
}

// writeConfig writes body to a file named by ext in a fresh directory.
func writeConfig(t *testing.T, ext, body string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "leasehold"+ext)
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// serveConfig is a serveBinary setup: a config file of ext made from body
// with the address in it, given by --config, then args; env as given.
func serveConfig(t *testing.T, ext, body string, env []string, args ...string) func(addr string) ([]string, []string) {
	return func(addr string) ([]string, []string) {
		file := writeConfig(t, ext, fmt.Sprintf(body, addr))
		return env, append([]string{"serve", "--config", file}, args...)
	}
}

// startupLine serves with setup, stops the server and returns its startup
// line.
func startupLine(t *testing.T, setup func(addr string) ([]string, []string)) map[string]any {
	t.Helper()
	p, _ := serveBinary(t, setup)
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d, want 0\nstderr: %s", exit, p.stderr)
	}
	return lineWith(p.logLines(), "leasehold listening")
}

// TestConfigFile: a TOML or a YAML file sets serve's flags (strings,
// integers, durations, bools, an integer for a string flag); a flag on the
// command line, before or after serve, and a LEASEHOLD_ variable win over
// it.
func TestConfigFile(t *testing.T) {
	t.Parallel()
	for _, f := range configFormats {
		t.Run(f.ext, func(t *testing.T) {
			t.Parallel()
			fromFile := map[string]any{
				"max_clients": 77.0, "max_ttl": "1h30m0s", "shutdown_timeout": "3s",
				"require_create": true, "maxmemory": 1000000.0, "max_bulk_len": 4096.0,
			}
			checkFields(t, startupLine(t, serveConfig(t, f.ext, f.body, nil)), fromFile)
			checkFields(t, startupLine(t, func(addr string) ([]string, []string) { // no serve: serve is the default
				return nil, []string{"--config", writeConfig(t, f.ext, fmt.Sprintf(f.body, addr))}
			}), fromFile)

			checkFields(t, startupLine(t, serveConfig(t, f.ext, f.body, nil, "--max-clients", "55", "--require-create=false")),
				map[string]any{"max_clients": 55.0, "require_create": false, "max_ttl": "1h30m0s"})

			// Both before serve.
			checkFields(t, startupLine(t, func(addr string) ([]string, []string) {
				file := writeConfig(t, f.ext, fmt.Sprintf(f.body, addr))
				return nil, []string{"--max-ttl", "1m", "--config", file, "serve"}
			}), map[string]any{"max_ttl": "1m0s", "max_clients": 77.0})

			checkFields(t, startupLine(t, serveConfig(t, f.ext, f.body,
				[]string{"LEASEHOLD_MAX_CLIENTS=66", "LEASEHOLD_SHUTDOWN_TIMEOUT=4s", "LEASEHOLD_REQUIRE_CREATE=false"})),
				map[string]any{"max_clients": 66.0, "shutdown_timeout": "4s", "require_create": false, "max_ttl": "1h30m0s"})

			// The file named by LEASEHOLD_CONFIG, and a flag over both.
			checkFields(t, startupLine(t, func(addr string) ([]string, []string) {
				file := writeConfig(t, f.ext, fmt.Sprintf(f.body, addr))
				return []string{"LEASEHOLD_CONFIG=" + file}, []string{"serve", "--max-bulk-len", "8192"}
			}), map[string]any{"max_clients": 77.0, "max_bulk_len": 8192.0})
		})
	}
}

// TestConfigFileErrors: a file serve cannot use is a usage error that
// names the file and what is wrong, and the server does not start.
func TestConfigFileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ext, body string
		want            string
	}{
		{"unknown key", ".toml", "max-clients = 5\nmax-clinets = 6\nbogus = 1\n", "unknown setting bogus, max-clinets: not a flag of leasehold serve"},
		{"unknown key yaml", ".yml", "adr: 127.0.0.1:1\n", "unknown setting adr"},
		{"config in the file", ".toml", "config = \"other.toml\"\n", "unknown setting config"},
		{"a table", ".toml", "[cluster]\nnode-id = \"n1\"\n", "cluster is a table"},
		{"malformed toml", ".toml", "max-clients = [\n", "toml: line 1"},
		{"malformed yaml", ".yaml", "max-clients: [\n", "yaml: line"},
		{"yaml not a mapping", ".yaml", "- addr\n", "cannot unmarshal"},
		{"wrong type", ".toml", "max-clients = \"many\"\n", "Mismatched type for flag 'max-clients'. Expected 'int' but actual is 'string'"},
		{"duration without a unit", ".yaml", "max-ttl: 30\n", "Mismatched type for flag 'max-ttl'. Expected 'duration'"},
		{"bad duration", ".toml", "max-ttl = \"soon\"\n", "Expected 'duration'"},
		{"bool as a string", ".toml", "repair = \"yes\"\n", "Expected 'bool'"},
		{"extension", ".conf", "addr = \"x\"\n", "want a .toml, .yaml or .yml file"},
		// What the file sets is checked as a flag would be.
		{"fsync without data-dir", ".toml", "fsync = \"always\"\n", "--fsync needs --data-dir"},
		{"cluster option without cluster", ".yaml", "redirect: true\n", "--redirect only mean something with --cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := writeConfig(t, tc.ext, tc.body)
			_, stderr, exit := run(t, []string{"LEASEHOLD_LOG_FORMAT=json"}, "serve", "--addr", "127.0.0.1:0", "--config", file)
			if exit != exitFailure || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", exit, stderr, exitFailure, tc.want)
			}
			if strings.Contains(stderr, "leasehold listening") {
				t.Errorf("the server started: %s", stderr)
			}
		})
	}
	_, stderr, exit := run(t, nil, "serve", "--config", filepath.Join(t.TempDir(), "absent.toml"))
	if exit != exitFailure || !strings.Contains(stderr, "absent.toml: no such file") {
		t.Errorf("absent file: exit %d, stderr %q", exit, stderr)
	}
}

// TestConfigFileCluster: a file that sets cluster mode's options starts a
// member that bootstraps, leads and grants.
func TestConfigFileCluster(t *testing.T) {
	t.Parallel()
	raftAddr, dir := freeAddr(t), t.TempDir()
	body := `addr = "%s"
log-format = "json"
cluster = true
node-id = "n1"
raft-addr = "` + raftAddr + `"
bootstrap = true
data-dir = "` + dir + `"
raft-heartbeat-timeout = "500ms"
redirect = true
`
	p, addr := serveBinary(t, serveConfig(t, ".toml", body, nil))
	node := &clusterProc{process: p, id: "n1", addr: addr, raftAddr: raftAddr, rdb: client(t, addr)}
	waitClusterLeader(t, node)
	if tok, err := node.rdb.Do(testCtx(t), "ACQUIRE", "k", 60000).Uint64(); err != nil || tok == 0 {
		t.Fatalf("ACQUIRE on the cluster: %d, %v", tok, err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
		t.Errorf("the data directory the file names holds nothing: %v", err)
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
	}
}

// TestConfigSamples: the sample files in docs/operations.md (its section
// "Running as a service") have only serve's keys, each of its flag's type.
func TestConfigSamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The samples of its section "Running as a service", not the other
	// sections' YAML (a Kubernetes probe, a Prometheus scrape config).
	section := string(doc)
	if i := strings.Index(section, "\n## Running as a service"); i >= 0 {
		section = section[i+1:]
		if j := strings.Index(section[1:], "\n## "); j >= 0 {
			section = section[:j+1]
		}
	} else {
		t.Fatal(`no section "Running as a service"`)
	}
	samples := regexp.MustCompile("(?s)```(toml|yaml)\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(samples) < 2 {
		t.Fatalf("%d sample files, want a TOML and a YAML one", len(samples))
	}
	flags := configurable(serveFlags())
	for _, s := range samples {
		file := writeConfig(t, "."+s[1], s[2])
		values, err := readConfigFile(file, flags)
		if err != nil {
			t.Errorf("the %s sample: %v", s[1], err)
			continue
		}
		src := altsrc.NewMapInputSource(file, values)
		for _, f := range flags {
			name := f.Names()[0]
			var err error
			switch unwrapFlag(f).(type) {
			case *cli.StringFlag:
				_, err = src.String(name)
			case *cli.IntFlag:
				_, err = src.Int(name)
			case *cli.Int64Flag:
				_, err = src.Int64(name)
			case *cli.DurationFlag:
				_, err = src.Duration(name)
			case *cli.BoolFlag:
				_, err = src.Bool(name)
			}
			if err != nil {
				t.Errorf("the %s sample: %v", s[1], err)
			}
		}
	}
}

// TestConfigFileRequirePass: a password in the config file is in force, and
// is not warned about as one on the command line (visible in ps) is.
func TestConfigFileRequirePass(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-from-file"
	p, addr := serveBinary(t, serveConfig(t, ".toml", "addr = \"%s\"\nlog-format = \"json\"\nrequirepass = \""+pw+"\"\n", nil))
	if err := client(t, addr).Do(testCtx(t), "ACQUIRE", "k", 1000).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("without the password: err = %v, want NOAUTH", err)
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
	}
	for _, l := range p.logLines() {
		if l["level"] == "warn" {
			t.Errorf("warning: %v", l)
		}
	}
	if strings.Contains(p.stderr.String(), pw) {
		t.Errorf("the log shows the password:\n%s", p.stderr)
	}
}
