package command

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/testutil"
)

// TestUsageErrors: a usage error, of any command or of the top level, is
// two lines on stderr (what is wrong, and where help is), nothing on stdout,
// and exit status 2.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	const anyPort = "--addr=127.0.0.1:0" // should serve start after all
	cases := []struct {
		args       []string
		want, help string // the two lines of stderr, after "leasehold: " and "see "
	}{
		{[]string{"acquire", "--tll", "5s", "k"}, "flag provided but not defined: --tll; did you mean --ttl?", "'leasehold acquire --help'"},
		{[]string{"acquire", "k", "--tll", "5s"}, "flag provided but not defined: --tll; did you mean --ttl?", "'leasehold acquire --help'"},
		{[]string{"run", "k", "--bogus", "true"}, "flag provided but not defined: --bogus", "'leasehold run --help'"},
		{[]string{"acquire", "--ttl", "5x", "k"}, `invalid value "5x" for flag --ttl: want milliseconds (5000) or a duration with a unit (5s, 1m, 500ms)`, "'leasehold acquire --help'"},
		{[]string{"extend", "k", "1", "--ttl", "1.5"}, `invalid value "1.5" for flag --ttl: want milliseconds (5000)`, "'leasehold extend --help'"},
		{[]string{"run", "--kill-grace", "10x", "k", "true"}, `invalid value "10x" for flag --kill-grace: want milliseconds (5000)`, "'leasehold run --help'"},
		{[]string{"status"}, "status takes one KEY, got 0 arguments", "'leasehold status --help'"},
		{[]string{"status", "--addr", "junk", "k"}, `server address "junk" (--addr or LEASEHOLD_ADDR) is not HOST:PORT`, "'leasehold status --help'"},
		{[]string{"run", "--addr", "locks:", "k", "true"}, `server address "locks:" (--addr or LEASEHOLD_ADDR) is not HOST:PORT`, "'leasehold run --help'"},
		{[]string{"status", "--addr", "a:1,junk", "k"}, `server address "junk" in "a:1,junk" (--addr or LEASEHOLD_ADDR) is not HOST:PORT (an IPv6 host in brackets: [::1]:7379)`, "'leasehold status --help'"},
		{[]string{"status", "--addr", "a:1,", "k"}, `server address "" in "a:1," (--addr or LEASEHOLD_ADDR) is not HOST:PORT`, "'leasehold status --help'"},
		{[]string{"status", "--addr", "::1:7379", "k"}, `server address "::1:7379" (--addr or LEASEHOLD_ADDR) is not HOST:PORT (an IPv6 host in brackets`, "'leasehold status --help'"},
		{[]string{"acquire", "--addr", "a:1, b:1,a:1", "k"}, `server address "a:1" is twice in "a:1, b:1,a:1"`, "'leasehold acquire --help'"},
		{[]string{"verify", "k", "abc"}, `token "abc" is not a fencing token`, "'leasehold verify --help'"},
		{[]string{anyPort, "--bogus"}, "flag provided but not defined: --bogus", "'leasehold --help'"},
		{[]string{anyPort, "--shards", "many"}, `invalid value "many" for flag --shards: want an integer`, "'leasehold --help'"},
		{[]string{"serve", anyPort, "--max-ttl", "5000"}, `invalid value "5000" for flag --max-ttl: want a duration with a unit (5s, 1m, 500ms)`, "'leasehold serve --help'"},
		{[]string{"acquire", "k", "--priority", "abc"}, `invalid value "abc" for flag --priority: want an integer`, "'leasehold acquire --help'"},
		{[]string{"run", "k", "-E", "x", "true"}, `invalid value "x" for flag -E: want an integer`, "'leasehold run --help'"},
		{[]string{"serve", anyPort, "--bogus"}, "flag provided but not defined: --bogus", "'leasehold serve --help'"},
		{[]string{"serve", anyPort, "extra"}, `unexpected argument "extra": serve takes none`, "'leasehold serve --help'"},
		{[]string{"runn", "x"}, `unknown command "runn"; did you mean "run"?`, "'leasehold --help'"},
		{[]string{anyPort, "stauts", "k"}, `unknown command "stauts"; did you mean "status"?`, "'leasehold --help'"},
		{[]string{"xyzzy"}, `unknown command "xyzzy"`, "'leasehold --help'"},
		{[]string{"help", "runn"}, `unknown command "runn"; did you mean "run"?`, "'leasehold --help'"},
		{[]string{"force-release"}, "force-release takes KEY [TOKEN], got 0 arguments", "'leasehold force-release --help'"},
		{[]string{"force-release", "k", "x"}, `token "x" is not a fencing token`, "'leasehold force-release --help'"},
		// The TLS options without --tls: the connection would go out in plain text.
		{[]string{"status", "--cacert", "ca.pem", "k"}, "--cacert (or LEASEHOLD_TLS_CACERT) is an option of TLS: add --tls", "'leasehold status --help'"},
		{[]string{"run", "k", "--insecure", "true"}, "--insecure (or LEASEHOLD_TLS_INSECURE) is an option of TLS: add --tls", "'leasehold run --help'"},
		{[]string{"acquire", "--tls", "--cert", "c.pem", "k"}, "--cert and --key go together", "'leasehold acquire --help'"},
		{[]string{"completion"}, "completion takes one SHELL", "'leasehold completion --help'"},
		{[]string{"completion", "fish"}, `no completion for shell "fish"`, "'leasehold completion --help'"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			stdout, stderr, exit := run(t, nil, tc.args...)
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if exit != exitFailure || stdout != "" || len(lines) != 2 ||
				!strings.HasPrefix(lines[0], "leasehold: "+tc.want) || lines[1] != "see "+tc.help {
				t.Errorf("leasehold %q: exit %d, stdout %q, stderr %q;\nwant exit 2, no stdout, stderr \"leasehold: %s...\\nsee %s\\n\"",
					tc.args, exit, stdout, stderr, tc.want, tc.help)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	help := func(args ...string) string {
		t.Helper()
		stdout, stderr, exit := run(t, nil, args...)
		if exit != 0 || stderr != "" {
			t.Fatalf("leasehold %q: exit %d, stderr %q", args, exit, stderr)
		}
		return stdout
	}
	// The top level's help lists commands, not serve's flags.
	top := help("--help")
	for _, name := range serveFlagNames {
		if strings.Contains(top, "--"+name) {
			t.Errorf("leasehold --help lists serve's --%s:\n%s", name, top)
		}
	}
	for _, want := range []string{"completion", "no COMMAND: leasehold serve"} {
		if !strings.Contains(top, want) {
			t.Errorf("leasehold --help lacks %q:\n%s", want, top)
		}
	}
	// --addr says what it is for.
	if out := help("serve", "--help"); !strings.Contains(out, "address to listen on") {
		t.Errorf("serve --help: --addr is not the address to listen on:\n%s", out)
	}
	for _, cmd := range []string{"run", "acquire", "verify", "release", "extend", "status"} {
		out := help(cmd, "--help")
		for _, want := range []string{"--addr HOST:PORT  ", "server address, HOST:PORT", "Flags may come before or after KEY"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s --help lacks %q:\n%s", cmd, want, out)
			}
		}
		if strings.Contains(out, "listen") {
			t.Errorf("%s --help speaks of listening:\n%s", cmd, out)
		}
		// Help after the arguments too.
		if again := help(cmd, "k", "--help"); again != out {
			t.Errorf("%s k --help differs from %s --help:\n%s", cmd, cmd, again)
		}
	}
	for _, cmd := range []string{"run", "acquire", "extend"} {
		if out := help(cmd, "--help"); !strings.Contains(out, "--ttl DURATION  ") || !strings.Contains(out, "DURATION in milliseconds (5000) or with a unit (5s, 1m)") {
			t.Errorf("%s --help does not say a number is milliseconds:\n%s", cmd, out)
		}
	}
}

// TestHelpIsAKey: a KEY named help is a key, not a request for help.
func TestHelpIsAKey(t *testing.T) {
	t.Parallel()
	down := freeAddr(t)
	stdout, stderr, exit := run(t, nil, "status", "--addr", down, "help")
	if exit != exitFailure || stdout != "" || !strings.Contains(stderr, "connection refused") {
		t.Fatalf("status help: exit %d, stdout %q, stderr %q; want the status of lock help, which fails to connect", exit, stdout, stderr)
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	stdout, _, exit := run(t, nil, "--generate-bash-completion")
	for _, name := range []string{"serve", "run", "acquire", "verify", "release", "extend", "status", "create", "delete", "locks", "info", "force-release", "probe", "completion"} {
		if exit != 0 || !strings.Contains("\n"+stdout, "\n"+name+"\n") {
			t.Errorf("--generate-bash-completion: exit %d, lacks %s:\n%s", exit, name, stdout)
		}
	}
	stdout, _, exit = run(t, nil, "acquire", "--tt", "--generate-bash-completion")
	if exit != 0 || strings.TrimSpace(stdout) != "--ttl" {
		t.Errorf("acquire --tt --generate-bash-completion: exit %d, %q; want --ttl", exit, stdout)
	}

	script, stderr, exit := run(t, nil, "completion", "bash")
	if exit != 0 || !strings.Contains(script, "complete ") {
		t.Fatalf("completion bash: exit %d, stderr %q, script:\n%s", exit, stderr, script)
	}
	if out, err := exec.Command("bash", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n on the completion script: %v\n%s", err, out)
	}
	// The script completes with the binary on PATH, as a user has it.
	complete := func(words ...string) string {
		t.Helper()
		sh := `source <(leasehold completion bash)
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
_leasehold_complete
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", append([]string{"-c", sh, "bash"}, words...)...)
		// The last PATH in the environment wins.
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("completing %q: %v\n%s", words, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"leasehold", "ru"}, "run"},
		{[]string{"leasehold", "st"}, "status"},
		{[]string{"leasehold", "acquire", "--sh"}, "--shared"},
		{[]string{"leasehold", "completion", "z"}, "zsh"},
	} {
		if got := complete(tc.words...); got != tc.want {
			t.Errorf("completing %q: %q, want %q", tc.words, got, tc.want)
		}
	}

	script, _, exit = run(t, nil, "completion", "zsh")
	if exit != 0 || !strings.HasPrefix(script, "#compdef leasehold") {
		t.Fatalf("completion zsh: exit %d, script:\n%s", exit, script)
	}
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		testutil.MissingTool(t, "zsh not found (zsh), for its completion script")
	}
	if out, err := exec.Command(zsh, "-n", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n on the completion script: %v\n%s", err, out)
	}
	// Outside the completion system: compdef does nothing, _describe prints
	// the candidates, words holds the words typed.
	sh := `compdef() { :; }; source <(leasehold completion zsh); _describe() { print -l -- $opts }
words=("$@"); _leasehold`
	cmd := exec.Command(zsh, "-f", "-c", sh, "zsh", "leasehold", "acquire", "--sh")
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "--shared" {
		t.Errorf("zsh completing leasehold acquire --sh: %v, %q; want --shared", err, out)
	}
}

func TestNearest(t *testing.T) {
	names := []string{"serve", "run", "acquire", "verify", "release", "extend", "status", "help"}
	cases := map[string]string{
		"runn": "run", "rn": "run", "acqire": "acquire", "stat": "status", "relase": "release",
		"verfy": "verify", "xyzzy": "", "x": "", "deploy": "",
	}
	for in, want := range cases {
		if got := nearest(in, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCompletionRunsNothing checks that asking for completions never runs
// the command: cli does not complete a line that holds a --, and ran the
// command instead, so TAB after `run KEY -- ./deploy.sh` ran the deploy,
// and `acquire --<TAB>` took a lease on "--generate-bash-completion".
func TestCompletionRunsNothing(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	env := []string{"LEASEHOLD_ADDR=" + addr}
	marker := filepath.Join(t.TempDir(), "ran")
	for _, args := range [][]string{
		{"acquire", "--"},
		{"create", "--"},
		{"acquire", "k", "--"},
		{"run", "k", "--", "sh", "-c", "touch " + marker},
		{"run", "k", "--", "sh", "-c", "touch " + marker, "--"},
		{"run", "-c", "touch " + marker, "k", "--"},
	} {
		stdout, stderr, exit := run(t, env, append(args, completionFlag)...)
		if exit != 0 {
			t.Errorf("leasehold %q %s: exit %d, stderr %q", args, completionFlag, exit, stderr)
		}
		if args[len(args)-1] == "--" && args[0] != "run" && !strings.Contains(stdout, "--ttl") {
			t.Errorf("leasehold %q %s: %q; want the flags, --ttl among them", args, completionFlag, stdout)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("completing a run line ran its command")
	}
	rdb := client(t, addr)
	if keys, err := rdb.Do(testCtx(t), "LOCKS", "0").Slice(); err != nil || len(keys) != 2 || len(keys[1].([]any)) != 0 {
		t.Errorf("LOCKS after completions: %v, %v; want none", keys, err)
	}
}
