// Package testutil holds the small helpers that tests in several packages
// of this module share: a buffer a test can read while a process or a
// logger writes to it, an environment free of leasehold's settings, a
// damaged byte in a data file, a missing tool, an HTTP GET, the package's
// own sources parsed. Only tests import it.
// Starting a server is servertest's.
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer that is safe to write from one goroutine (a
// child process's output copier, a logger) while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Environ returns the test process's environment without any LEASEHOLD_
// variable, plus extra, so that a developer's own settings cannot leak into
// a server or client a test starts.
func Environ(extra ...string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "LEASEHOLD_") })
	return append(env, extra...)
}

// FlipByte inverts the bits of the byte at off in the file at path, as a
// disk or a stray write might damage it.
func FlipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// MissingTool ends a test that needs a program this machine lacks: a skip
// on a developer's machine, a failure under CI=true, where `make test`
// installs every tool through `make deps` and no test may pass by skipping.
func MissingTool(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: `make test` installs it through `make deps`)", msg)
	}
	t.Skipf("%s: run `make deps` to install it", msg)
}

// Eventually polls cond every 5 ms until it holds, and fails the test if it
// does not within timeout: for a state that another goroutine or process
// reaches on its own (a server's background retry, a queued waiter), where
// there is no event to wait on.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// HTTPGet fetches url, within 10 seconds, and returns its status and body;
// it fails t if the request does.
func HTTPGet(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

var (
	pythonMu    sync.Mutex
	pythonFound = map[string]string{} // by the names tried, in order; "" for none
)

// PythonWithRedis finds a python3 that imports redis (redis-py), trying
// names (paths, or names looked up on PATH) in order, once per test binary
// for each order. Without one it ends the test as MissingTool does. Debian's
// python3-redis is for /usr/bin/python3; the python3 first on PATH may be
// another (pyenv, a venv).
func PythonWithRedis(t testing.TB, names ...string) string {
	t.Helper()
	key := strings.Join(names, "\x00")
	pythonMu.Lock()
	p, ok := pythonFound[key]
	if !ok {
		p = findPythonWithRedis(names)
		pythonFound[key] = p
	}
	pythonMu.Unlock()
	if p == "" {
		MissingTool(t, "no python3 that imports redis (python3-redis; tried %q)", names)
	}
	return p
}

func findPythonWithRedis(names []string) string {
	for _, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = exec.CommandContext(ctx, p, "-c", "import redis").Run()
		cancel()
		if err == nil {
			return p
		}
	}
	return ""
}
