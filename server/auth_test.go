package server

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/protocol"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

const testPassword = "s3cret pass"

func withRequirePass(pw string) option { return func(c *Config) { c.RequirePass = pw } }

// withPeersRemote makes protected mode see every peer as non-loopback, as a
// client on another machine would be: the tests can only dial 127.0.0.1.
func withPeersRemote() option {
	return func(c *Config) { c.PeerIsLoopback = func(net.Addr) bool { return false } }
}

// TestAuthNoAuthEveryCommand sends every command of the table, with as
// many arguments as its arity asks, before AUTH: all but AUTH, HELLO and
// QUIT get NOAUTH, as from Redis; PING too, as Redis answers it.
func TestAuthNoAuthEveryCommand(t *testing.T) {
	ts := startServer(t, withRequirePass(testPassword))
	rc := ts.dial()
	for _, cmd := range protocol.Commands {
		if slices.Contains(cmd.Flags, "no_auth") {
			continue
		}
		args := []string{strings.ToUpper(cmd.Name)}
		for len(args) < max(cmd.Arity, -cmd.Arity) {
			args = append(args, "x")
		}
		rc.send(resp(args...))
		rc.expect(respError("NOAUTH Authentication required."))
	}
	got := []string{}
	for _, cmd := range protocol.Commands {
		if slices.Contains(cmd.Flags, "no_auth") {
			got = append(got, cmd.Name)
		}
	}
	if want := []string{"quit", "hello", "auth"}; !slices.Equal(got, want) {
		t.Fatalf("commands allowed before AUTH = %v, want %v (Redis's)", got, want)
	}
	// Unknown commands and wrong arities are answered as such first, as
	// Redis does.
	rc.send(resp("NOSUCH"))
	rc.expectErr("ERR unknown command 'NOSUCH'")
	rc.send(resp("ECHO"))
	rc.expect(respError("ERR wrong number of arguments for 'echo' command"))
	// Nothing ran: the lock a pre-auth ACQUIRE named is not there.
	rc.send(resp("AUTH", testPassword))
	rc.expect("OK")
	rc.send(resp("STATUS", "x"))
	rc.expect(nil)
}

func TestAuthRequirePass(t *testing.T) {
	const (
		wrongPass = "WRONGPASS invalid username-password pair or user is disabled."
		helloAuth = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	)
	ts := startServer(t, withRequirePass(testPassword))
	rc := ts.dial()
	steps := []struct {
		args []string
		want any
	}{
		{[]string{"PING"}, respError("NOAUTH Authentication required.")},
		{[]string{"AUTH", "wrong"}, respError(wrongPass)},
		{[]string{"AUTH", "default", "wrong"}, respError(wrongPass)},
		// No such user and a wrong password get the same reply.
		{[]string{"AUTH", "bob", testPassword}, respError(wrongPass)},
		{[]string{"AUTH", "bob", "wrong"}, respError(wrongPass)},
		{[]string{"AUTH", "a", "b", "c"}, respError("ERR syntax error")},
		{[]string{"HELLO"}, respError(helloAuth)},
		{[]string{"HELLO", "2"}, respError(helloAuth)},
		{[]string{"HELLO", "2", "SETNAME", "x"}, respError(helloAuth)},
		{[]string{"HELLO", "3", "AUTH", "default", testPassword}, respError("NOPROTO sorry, this protocol version is not supported")},
		{[]string{"HELLO", "2", "AUTH", "default", "wrong"}, respError(wrongPass)},
		{[]string{"HELLO", "2", "AUTH", "bob", testPassword}, respError(wrongPass)},
		{[]string{"PING"}, respError("NOAUTH Authentication required.")},
		{[]string{"AUTH", testPassword}, "OK"},
		{[]string{"PING"}, "PONG"},
		// A failed AUTH leaves the connection authenticated, as in Redis.
		{[]string{"AUTH", "wrong"}, respError(wrongPass)},
		{[]string{"PING"}, "PONG"},
		{[]string{"AUTH", "default", testPassword}, "OK"},
	}
	for _, s := range steps {
		rc.send(resp(s.args...))
		got := rc.reply()
		if got != s.want {
			t.Fatalf("%q: got %#v, want %#v", s.args, got, s.want)
		}
	}
	// Seven failures above (AUTH a b c is a syntax error), counted in INFO.
	authed := ts.run.Client(func(o *redis.Options) { o.Password = testPassword })
	if got := infoField(t, authed, "stats", "acl_access_denied_auth"); got != "7" {
		t.Fatalf("acl_access_denied_auth = %s, want 7", got)
	}

	// HELLO ... AUTH authenticates, and SETNAME applies once it has.
	rc = ts.dial()
	rc.send(resp("HELLO", "2", "AUTH", "default", testPassword, "SETNAME", "via-hello"))
	if m, ok := rc.reply().([]any); !ok || len(m) != 14 || m[1] != "leasehold" {
		t.Fatalf("HELLO AUTH = %#v", m)
	}
	rc.send(resp("CLIENT", "GETNAME"))
	rc.expect("via-hello")
}

// TestAuthPreAuthLimits checks Redis's limits on a client that has not
// authenticated: more than 10 arguments, or a bulk longer than 16384
// bytes, gets a protocol error and the connection is closed; once AUTH
// succeeded, even in the same write, they no longer apply.
func TestAuthPreAuthLimits(t *testing.T) {
	ts := startServer(t, withRequirePass(testPassword))
	big := strings.Repeat("x", int(protocol.PreAuthMaxBulkLen)+1)
	eleven := make([]string, protocol.PreAuthMaxMultibulk+1)
	for i := range eleven {
		eleven[i] = "ECHO"
	}
	for _, tc := range []struct{ name, in, want string }{
		{"multibulk", resp(eleven...), "ERR Protocol error: unauthenticated multibulk length"},
		{"multibulk header alone", "*11\r\n", "ERR Protocol error: unauthenticated multibulk length"},
		{"bulk", resp("AUTH", big), "ERR Protocol error: unauthenticated bulk length"},
		{"bulk header alone", "*2\r\n$4\r\nAUTH\r\n$16385\r\n", "ERR Protocol error: unauthenticated bulk length"},
		{"after a failed AUTH", resp("AUTH", "wrong") + "*11\r\n", "ERR Protocol error: unauthenticated multibulk length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := ts.dial()
			rc.send(tc.in)
			if strings.HasPrefix(tc.name, "after") {
				rc.expectErr("WRONGPASS")
			}
			rc.expect(respError(tc.want))
			if !rc.closed() {
				t.Fatal("connection still open after the protocol error")
			}
		})
	}
	t.Run("lifted by AUTH", func(t *testing.T) {
		rc := ts.dial()
		// One write: the commands behind AUTH are parsed once it ran.
		rc.send(resp("AUTH", testPassword) + resp("ECHO", big) + resp(eleven...) + resp("PING"))
		rc.expect("OK")
		rc.expect(big)
		rc.expect(respError("ERR wrong number of arguments for 'echo' command"))
		rc.expect("PONG")
	})
	t.Run("not without a password", func(t *testing.T) {
		ts := startServer(t)
		rc := ts.dial()
		rc.send(resp("ECHO", big) + resp(eleven...))
		rc.expect(big)
		rc.expect(respError("ERR wrong number of arguments for 'echo' command"))
	})
}

// TestAuthGoRedis connects go-redis with a password, and with a user name
// and a password: it sends HELLO 3 AUTH, gets NOPROTO, and falls back to
// AUTH, as against a Redis before 6.
func TestAuthGoRedis(t *testing.T) {
	ts := startServer(t, withRequirePass(testPassword))
	for _, tc := range []struct {
		name, user, pass string
		wantErr          string
	}{
		{"password", "", testPassword, ""},
		{"user and password", "default", testPassword, ""},
		{"wrong password", "", "wrong", "WRONGPASS"},
		{"wrong user", "bob", testPassword, "WRONGPASS"},
		{"no password", "", "", "NOAUTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := ts.run.Client(func(o *redis.Options) {
				o.Username, o.Password, o.MaxRetries = tc.user, tc.pass, -1
			})
			err := rdb.Do(ctx(t), "ACQUIRE", "k-"+tc.name, 1000).Err()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %s", err, tc.wantErr)
			}
		})
	}
}

// TestAuthRedisCli runs redis-cli with -a, with --user and --pass, and with
// REDISCLI_AUTH in its environment.
func TestAuthRedisCli(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	ts := startServer(t, withRequirePass(testPassword))
	host, port := ts.hostPort()
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"-a", []string{"-a", testPassword, "--no-auth-warning", "PING"}, nil, "PONG\n"},
		{"--user --pass", []string{"--user", "default", "--pass", testPassword, "--no-auth-warning", "PING"}, nil, "PONG\n"},
		{"REDISCLI_AUTH", []string{"PING"}, []string{"REDISCLI_AUTH=" + testPassword}, "PONG\n"},
		{"no password", []string{"PING"}, nil, "NOAUTH Authentication required.\n\n"},
		{"wrong password", []string{"-a", "wrong", "--no-auth-warning", "PING"}, nil, "NOAUTH Authentication required.\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, cli, append([]string{"-h", host, "-p", port}, tc.args...)...)
			cmd.Env = append(os.Environ(), tc.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v; stderr %q", err, stderr.String())
			}
			if stdout.String() != tc.want {
				t.Fatalf("stdout %q, want %q (stderr %q)", stdout.String(), tc.want, stderr.String())
			}
		})
	}
}

// TestProtectedMode checks that a server without a password refuses a
// peer that is not loopback, saying why, unless protected mode is off or a
// password is set.
func TestProtectedMode(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ts := startServer(t, withPeersRemote())
		rc := ts.dial()
		rc.expect(respError(protocol.ErrProtectedMode.Error()))
		if !rc.closed() {
			t.Fatal("connection still open")
		}
		testutil.Eventually(t, 5*time.Second, "the refusal counted", func() bool { return ts.auth.refused.Load() == 1 })
	})
	t.Run("protected mode off", func(t *testing.T) {
		ts := startServer(t, withPeersRemote(), func(c *Config) { c.ProtectedMode = false })
		do(t, ts.client(), "PING").Str("PONG")
	})
	t.Run("password", func(t *testing.T) {
		ts := startServer(t, withPeersRemote(), withRequirePass(testPassword))
		rc := ts.dial()
		rc.send(resp("PING"))
		rc.expect(respError("NOAUTH Authentication required."))
		rc.send(resp("AUTH", testPassword) + resp("PING"))
		rc.expect("OK")
		rc.expect("PONG")
	})
	t.Run("loopback", func(t *testing.T) {
		ts := startServer(t) // the real check: the test dials 127.0.0.1
		do(t, ts.client(), "PING").Str("PONG")
	})
}

func TestIsLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, true},
		{&net.TCPAddr{IP: net.ParseIP("127.3.2.1")}, true},
		{&net.TCPAddr{IP: net.ParseIP("::1")}, true},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1")}, true},
		{&net.UnixAddr{Name: "/tmp/x.sock", Net: "unix"}, true},
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.1")}, false},
		{&net.TCPAddr{IP: net.ParseIP("128.0.0.1")}, false},
		{&net.TCPAddr{IP: net.ParseIP("::2")}, false},
		{&net.TCPAddr{IP: net.ParseIP("0.0.0.0")}, false},
	} {
		if got := isLoopback(tc.addr); got != tc.want {
			t.Errorf("isLoopback(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// lockedBuffer collects a server's log lines across goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAuthFailuresLogged checks that a failed AUTH is logged with the peer
// and the user name, and that a burst of them makes one line, not one each.
func TestAuthFailuresLogged(t *testing.T) {
	var logs lockedBuffer
	ts := startServerLogging(t, zerolog.New(&logs), withRequirePass(testPassword))
	rc := ts.dial()
	const n = 50
	var burst strings.Builder
	for range n {
		burst.WriteString(resp("AUTH", "mallory", "guess"))
	}
	start := time.Now()
	rc.send(burst.String())
	for range n {
		rc.expectErr("WRONGPASS")
	}
	// One line a second at most: on a loaded machine the burst may span
	// more than one.
	maxLines := 1 + int(time.Since(start)/authFailureWarnEvery)
	lines := 0
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "authentication failed") {
			lines++
			if !strings.Contains(l, `"user":"mallory"`) || !strings.Contains(l, `"remote":"`+rc.LocalAddr().String()+`"`) || strings.Contains(l, "guess") {
				t.Errorf("log line %s: want the user and the peer, and never the password", l)
			}
		}
	}
	if lines < 1 || lines > maxLines {
		t.Fatalf("%d log lines for a burst of %d failures, want 1 to %d:\n%s", lines, n, maxLines, logs.String())
	}
	if got := ts.auth.failures.Load(); got != n {
		t.Fatalf("failures counted = %d, want %d", got, n)
	}
}
