//go:build unix

package doctest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/server"
)

// A redis-session block shows a redis-cli session: "> COMMAND" lines, each
// followed by the reply as redis-cli prints it at a terminal.
type redisSession struct {
	file, line string
	steps      []sessionStep
}

type sessionStep struct {
	command string
	want    []string
}

var sessionFenceRE = regexp.MustCompile("^```redis-session\\s*$")

// redisSessions returns the redis-session blocks of file.
func redisSessions(t *testing.T, root, file string) []redisSession {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []redisSession
	lines := strings.Split(string(doc), "\n")
	for i := 0; i < len(lines); i++ {
		if !sessionFenceRE.MatchString(lines[i]) {
			continue
		}
		s := redisSession{file: file, line: strconv.Itoa(i + 1)}
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			if cmd, ok := strings.CutPrefix(lines[i], "> "); ok {
				s.steps = append(s.steps, sessionStep{command: cmd})
			} else if len(s.steps) > 0 {
				last := &s.steps[len(s.steps)-1]
				last.want = append(last.want, lines[i])
			} else {
				t.Fatalf("%s:%d: a reply before the first command", file, i+1)
			}
		}
		out = append(out, s)
	}
	return out
}

// numberRE finds the numbers of four digits or more in a reply: times and
// tokens, which vary from run to run.
var numberRE = regexp.MustCompile(`\d{4,}`)

// TestRedisCompatSession runs docs/redis-compat.md's redis-cli sessions with
// redis-cli against a fresh server each, and checks every reply: exactly,
// but for numbers of four digits or more, which must be numbers of four
// digits or more.
func TestRedisCompatSession(t *testing.T) {
	need(t, "redis-cli", "redis-tools")
	root := repoRoot(t)
	sessions := redisSessions(t, root, "docs/redis-compat.md")
	if len(sessions) == 0 {
		t.Fatal("docs/redis-compat.md has no redis-session block")
	}
	for _, s := range sessions {
		t.Run(s.file+":"+s.line, func(t *testing.T) {
			addr := startServer(t, func(*server.Config) {})
			host, port, _ := strings.Cut(addr, ":")
			for _, st := range s.steps {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				cmd := exec.CommandContext(ctx, "redis-cli", "--no-raw", "-h", host, "-p", port)
				cmd.Stdin = strings.NewReader(st.command + "\n")
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("%s: redis-cli: %v\n%s", st.command, err, out)
				}
				got := strings.Split(strings.TrimRight(string(bytes.TrimRight(out, "\n")), "\n"), "\n")
				want := st.want
				if len(got) != len(want) || numberRE.ReplaceAllString(strings.Join(got, "\n"), "N") != numberRE.ReplaceAllString(strings.Join(want, "\n"), "N") {
					t.Errorf("> %s\ngot:\n%s\nwant:\n%s", st.command, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
		})
	}
}
