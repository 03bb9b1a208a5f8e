package testutil

import (
	"strings"
	"sync"
	"testing"
)

// TestLog is an io.Writer for a logger that writes to t's log until the
// test ends and drops what comes after: goroutines a test cannot wait for
// (hashicorp/raft's network transport handles a connection on after its
// Close) may log once the test is over, which t.Log turns into a panic.
type TestLog struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

// NewTestLog returns a TestLog on t.
func NewTestLog(t testing.TB) *TestLog {
	l := &TestLog{t: t}
	t.Cleanup(func() {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
	})
	return l
}

func (l *TestLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
