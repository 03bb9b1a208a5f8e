package server

import (
	"errors"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// logCapture keeps what a server logs, for tests that check a warning.
type logCapture struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logCapture) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCrossProtocolRequestClosesConnection sends what a browser or an HTTP
// client tricked into talking to the port would: the connection must be
// closed at the POST or Host: line, and nothing after it run, as Redis does
// (securityWarningCommand).
func TestCrossProtocolRequestClosesConnection(t *testing.T) {
	var logged logCapture
	log := zerolog.New(io.MultiWriter(zerolog.NewTestWriter(t), &logged)).Level(zerolog.InfoLevel)
	ts := startServerLogging(t, log)
	const body = "ACQUIRE victim 600000 OWNER evil\r\n"
	httpPost := "POST /locks HTTP/1.1\r\nHost: 127.0.0.1:7379\r\nContent-Type: text/plain\r\n" +
		"Content-Length: 34\r\n\r\n" + body

	var firstPeer string
	for i, tc := range []struct {
		name, in string
		replies  bool // replies to commands before the attack may have left
	}{
		{"HTTP POST with a command in its body", httpPost, false},
		{"RESP post, lower case, pipelined", resp("post", "/") + resp("ACQUIRE", "victim", "600000"), false},
		{"inline pOsT, mixed case", "pOsT / HTTP/1.0\r\n" + body, false},
		{"Host: header after a GET", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n" + body, true},
		{"RESP HOST:", resp("HOST:", "example.com") + resp("ACQUIRE", "victim", "600000"), false},
		{"after a command in the same pipeline", "PING\r\nPOST / HTTP/1.1\r\n" + body, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := ts.dial()
			if i == 0 {
				firstPeer = rc.LocalAddr().String()
			}
			rc.send(tc.in)
			rest, err := readEOF(rc)
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("connection not closed: %v after %q", err, rest)
			}
			if !tc.replies && rest != "" {
				t.Fatalf("got %q before the close, want nothing", rest)
			}
			if strings.Contains("\r\n"+rest, "\r\n:") {
				t.Fatalf("got %q: a command after the attack ran", rest)
			}
			if err := ts.client().Do(ctx(t), "STATUS", "victim").Err(); err != redis.Nil {
				t.Fatalf("STATUS victim = %v, want nil: the body's ACQUIRE ran", err)
			}
		})
	}

	if got := infoField(t, ts.client(), "stats", "security_attacks"); got != "6" {
		t.Fatalf("security_attacks = %s, want 6", got)
	}
	stillServes(t, ts)
	var warning string
	for _, line := range strings.Split(logged.String(), "\n") {
		if strings.Contains(line, "SECURITY ATTACK") {
			warning = line
			break
		}
	}
	if warning == "" || !strings.Contains(warning, `"level":"warn"`) || !strings.Contains(warning, firstPeer) {
		t.Fatalf("want a warning naming the peer %s, got %q", firstPeer, warning)
	}
}
