package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/servertest"
	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/internal/tlsconf"
	"github.com/leasehold/leasehold/internal/tlstest"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// withTLS adds a TLS listener on a free loopback port with f's files,
// verifying client certificates as authClients says.
func withTLS(f *tlstest.Files, authClients string) option {
	return func(c *Config) {
		c.TLS.Addr = servertest.Addr
		c.TLS.CertFile, c.TLS.KeyFile, c.TLS.CACertFile = f.ServerCert, f.ServerKey, f.CACert
		c.TLS.AuthClients = authClients
	}
}

// tlsClient is a go-redis client of ts's TLS listener with cfg.
func (ts *testServer) tlsClient(cfg *tls.Config, adjust ...func(*redis.Options)) *redis.Client {
	ts.t.Helper()
	return ts.run.Client(append([]func(*redis.Options){func(o *redis.Options) {
		o.Addr = ts.TLSAddr().String()
		o.TLSConfig = cfg
		o.MaxRetries = -1
	}}, adjust...)...)
}

// tlsCNs are the client-certificate common names of ts's open
// connections.
func (ts *testServer) tlsCNs() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var cns []string
	for _, c := range ts.conns {
		cns = append(cns, c.tlsCN)
	}
	return cns
}

func TestTLSCommands(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	ts := startServer(t, withTLS(f, "yes"))
	rdb := ts.tlsClient(f.ClientConfig(t, "alice"))
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	token, err := rdb.Do(ctx, "ACQUIRE", "jobs", "30000").Int64()
	if err != nil {
		t.Fatalf("ACQUIRE over TLS: %v", err)
	}
	if n, err := rdb.Do(ctx, "RELEASE", "jobs", token).Int(); err != nil || n != 1 {
		t.Fatalf("RELEASE over TLS: %d, %v", n, err)
	}
	if cns := ts.tlsCNs(); len(cns) != 1 || cns[0] != "alice" {
		t.Errorf("connections' client certificate CNs %q, want [alice]", cns)
	}
	// The plain listener serves on, beside the TLS one.
	if err := ts.run.Client().Ping(ctx).Err(); err != nil {
		t.Errorf("plain PING beside TLS: %v", err)
	}
	info, err := rdb.Info(ctx, "stats").Result()
	if err != nil || !strings.Contains(info, "tls_handshake_failures:0") {
		t.Errorf("INFO stats: %v\n%s", err, info)
	}
}

// TestTLSAuthClients checks Redis's tls-auth-clients: yes refuses a
// client without a certificate from the CA in the handshake (counted in
// INFO), optional verifies one if given, no asks for none.
func TestTLSAuthClients(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	stranger := tlstest.New(t, t.TempDir()) // another CA
	strangerCfg := f.ClientConfig(t, "")
	strangerCfg.Certificates = stranger.ClientConfig(t, "mallory").Certificates
	cases := []struct {
		auth        string
		cn          string // "" for no client certificate
		foreign     bool   // the certificate is from another CA
		wantOK      bool
		wantRecords string // the CN the server records
	}{
		{auth: "yes", cn: "alice", wantOK: true, wantRecords: "alice"},
		{auth: "yes", wantOK: false},
		{auth: "yes", foreign: true, wantOK: false},
		{auth: "optional", wantOK: true},
		{auth: "optional", cn: "bob", wantOK: true, wantRecords: "bob"},
		{auth: "optional", foreign: true, wantOK: false},
		{auth: "no", wantOK: true},
	}
	for _, tc := range cases {
		name := tc.auth + "/" + map[bool]string{true: "foreign", false: "cn=" + tc.cn}[tc.foreign]
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, withTLS(f, tc.auth))
			cfg := f.ClientConfig(t, tc.cn)
			if tc.foreign {
				cfg = strangerCfg
			}
			err := ts.tlsClient(cfg).Ping(context.Background()).Err()
			if tc.wantOK != (err == nil) {
				t.Fatalf("PING: %v, want success %v", err, tc.wantOK)
			}
			if !tc.wantOK {
				testutil.Eventually(t, 5*time.Second, "a handshake failure counted", func() bool {
					return ts.tls.failures.Load() >= 1
				})
				return
			}
			if cns := ts.tlsCNs(); len(cns) != 1 || cns[0] != tc.wantRecords {
				t.Errorf("recorded CNs %q, want [%q]", cns, tc.wantRecords)
			}
		})
	}
}

// TestTLSVersions checks TLS 1.1 is refused, and tls-protocols narrows
// what is allowed.
func TestTLSVersions(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	cases := []struct {
		protocols   string
		clientMax   uint16
		wantRefused bool
	}{
		{"", tls.VersionTLS11, true},
		{"", tls.VersionTLS12, false},
		{"", tls.VersionTLS13, false},
		{"TLSv1.3", tls.VersionTLS12, true},
		{"TLSv1.2", tls.VersionTLS12, false},
	}
	for _, tc := range cases {
		t.Run(tc.protocols+"/"+tls.VersionName(tc.clientMax), func(t *testing.T) {
			ts := startServer(t, withTLS(f, "no"), func(c *Config) { c.TLS.Protocols = tc.protocols })
			cfg := f.ClientConfig(t, "")
			cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS10, tc.clientMax
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ts.TLSAddr().String(), cfg)
			if err == nil {
				conn.Close()
			}
			if refused := err != nil; refused != tc.wantRefused {
				t.Fatalf("handshake: %v, want refused %v", err, tc.wantRefused)
			}
		})
	}
}

// TestTLSConfigErrors checks bad TLS settings stop New with an error that
// names the setting.
func TestTLSConfigErrors(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	cases := []struct {
		name   string
		change func(*tlsconf.Config)
		want   string
	}{
		{"no cert", func(c *tlsconf.Config) { c.CertFile = "" }, "tls-cert-file"},
		{"missing cert", func(c *tlsconf.Config) { c.CertFile = f.Dir + "/nothing.crt" }, "nothing.crt"},
		{"key of another cert", func(c *tlsconf.Config) { _, c.KeyFile = f.ClientCert(t, "x") }, "tls-key-file"},
		{"missing ca", func(c *tlsconf.Config) { c.CACertFile = f.Dir + "/nothing-ca.crt" }, "nothing-ca.crt"},
		{"ca not pem", func(c *tlsconf.Config) { c.CACertFile = f.ServerKey }, "no PEM certificate"},
		{"auth without ca", func(c *tlsconf.Config) { c.CACertFile = "" }, "tls-ca-cert-file"},
		{"bad auth", func(c *tlsconf.Config) { c.AuthClients = "maybe" }, "tls-auth-clients"},
		{"tls 1.1", func(c *tlsconf.Config) { c.Protocols = "TLSv1.1 TLSv1.2" }, "not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, withTLS(f, "yes"))
			tc.change(&cfg.TLS)
			_, err := New(cfg, zerolog.Nop())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error naming %q", err, tc.want)
			}
		})
	}
	t.Run("no listener at all", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.Addr = ""
		if _, err := New(cfg, zerolog.Nop()); err == nil {
			t.Fatal("New with neither a plain nor a TLS address succeeded")
		}
	})
}

// TestTLSOnly checks Addr "" serves TLS alone.
func TestTLSOnly(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	cfg := testConfig(t, withTLS(f, "yes"))
	cfg.Addr = ""
	srv, err := New(cfg, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	if srv.Addr() != nil {
		t.Errorf("a plain listener at %s", srv.Addr())
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.TLSAddr().String(), TLSConfig: f.ClientConfig(t, "alice"), MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Errorf("PING: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Error(err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve: %v, want ErrServerClosed", err)
	}
}

// TestTLSSilentClient checks a client that connects and never starts a
// handshake is closed at the handshake timeout, and holds up nobody
// meanwhile.
func TestTLSSilentClient(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	const timeout = 300 * time.Millisecond
	ts := startServer(t, withTLS(f, "yes"), func(c *Config) { c.TLS.HandshakeTimeout = timeout })
	silent, err := net.Dial("tcp", ts.TLSAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	rdb := ts.tlsClient(f.ClientConfig(t, "alice"))
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING beside a silent client: %v", err)
	}
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := silent.Read(make([]byte, 1))
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("silent client's read: %d, %v; want the server to close it", n, err)
	}
	if took := time.Since(start); took < timeout/2 || took > 5*time.Second {
		t.Errorf("silent client closed after %s, want about %s", took, timeout)
	}
	testutil.Eventually(t, 5*time.Second, "the timeout counted as a failure", func() bool {
		return ts.tls.failures.Load() == 1
	})
}

// TestTLSBigPipeline checks the read-ahead works through TLS: a client that
// writes 8 MB of commands before it reads a reply is served, not
// deadlocked, on both transports.
func TestTLSBigPipeline(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	ts := startServer(t, withTLS(f, "yes"))
	nc, err := tls.Dial("tcp", ts.TLSAddr().String(), f.ClientConfig(t, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	ping := []byte("*1\r\n$4\r\nPING\r\n")
	n := 8 << 20 / len(ping)
	if _, err := nc.Write(bytes.Repeat(ping, n)); err != nil {
		t.Fatalf("writing %d PINGs before reading: %v", n, err)
	}
	want := bytes.Repeat([]byte("+PONG\r\n"), n)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(nc, got); err != nil {
		t.Fatalf("reading %d PONGs: %v", n, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the replies are not the PONGs, in order")
	}
}

// TestTLSRotationUnderLoad rotates the server certificate while clients
// pipeline over TLS: no established connection sees an error, and new
// connections get the new certificate.
func TestTLSRotationUnderLoad(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	ts := startServer(t, withTLS(f, "yes"))
	oldSerial := serialOf(t, ts, f)
	const clients, rounds = 8, 200
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var done atomic.Int64
	rotated := make(chan struct{})
	errs := make(chan error, clients)
	for i := range clients {
		// One connection each, established before the rotation.
		rdb := ts.tlsClient(f.ClientConfig(t, "worker"), func(o *redis.Options) { o.PoolSize = 1; o.MinIdleConns = 1 })
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "rot" + string(rune('a'+i))
			for r := 0; r < rounds && ctx.Err() == nil; r++ {
				if r == rounds/2 {
					select { // half before the rotation, half after
					case <-rotated:
					case <-ctx.Done():
					}
				}
				cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for range 10 {
						p.Do(ctx, "ACQUIRE", key, "30000")
						p.Do(ctx, "RELEASE", key, "0") // a wrong token: 0, harmless
					}
					return nil
				})
				if err != nil && !isRedisReply(err) {
					errs <- err
					return
				}
				for _, c := range cmds {
					if err := c.Err(); err != nil && !isRedisReply(err) {
						errs <- err
						return
					}
				}
				done.Add(1)
			}
		}()
	}
	testutil.Eventually(t, 10*time.Second, "load before the rotation", func() bool { return done.Load() >= clients })
	newSerial := f.Rotate(t)
	if err := ts.ReloadTLS(); err != nil {
		t.Fatalf("ReloadTLS: %v", err)
	}
	close(rotated)
	if got := serialOf(t, ts, f); got != newSerial.Int64() {
		t.Errorf("a new connection got certificate serial %d, want the rotated %d (old %d)", got, newSerial, oldSerial)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("an established connection failed across the rotation: %v", err)
	}
	if done.Load() != clients*rounds {
		t.Errorf("%d pipelines done, want %d", done.Load(), clients*rounds)
	}
	// A bad certificate keeps the one loaded.
	if err := writeFile(f.ServerCert, "not a certificate"); err != nil {
		t.Fatal(err)
	}
	if err := ts.ReloadTLS(); err == nil {
		t.Error("ReloadTLS of a broken certificate succeeded")
	}
	if got := serialOf(t, ts, f); got != newSerial.Int64() {
		t.Errorf("after a failed reload a new connection got serial %d, want %d", got, newSerial)
	}
}

// isRedisReply reports whether err is an error reply, not a failure of the
// connection.
func isRedisReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// serialOf is the serial number of the certificate a new connection to
// ts's TLS listener is shown.
func serialOf(t *testing.T, ts *testServer, f *tlstest.Files) int64 {
	t.Helper()
	nc, err := tls.Dial("tcp", ts.TLSAddr().String(), f.ClientConfig(t, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	return nc.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestRedisCliTLS runs redis-cli --tls with a client certificate, and
// without one against tls-auth-clients yes.
func TestRedisCliTLS(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	if help, _ := exec.Command(cli, "--help").CombinedOutput(); !strings.Contains(string(help), "--tls") {
		testutil.MissingTool(t, "redis-cli built without TLS (its --help has no --tls)")
	}
	f := tlstest.New(t, t.TempDir())
	ts := startServer(t, withTLS(f, "yes"))
	host, port, _ := net.SplitHostPort(ts.TLSAddr().String())
	cert, key := f.ClientCert(t, "cli")
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	base := []string{"-h", host, "-p", port, "--tls", "--cacert", f.CACert}
	out, err := exec.CommandContext(ctx, cli, append(base, "--cert", cert, "--key", key, "ACQUIRE", "clilock", "30000")...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.Contains(string(out), "ERR") {
		t.Fatalf("redis-cli --tls ACQUIRE: %v\n%s", err, out)
	}
	out, _ = exec.CommandContext(ctx, cli, append(base, "PING")...).CombinedOutput()
	if strings.Contains(string(out), "PONG") || !strings.Contains(string(out), "Error") {
		t.Fatalf("redis-cli --tls without a client certificate: %s; want an error, not an answer", out)
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// TestTLSWaitAndEvents checks the replies that leave outside a command's
// own turn go through TLS too: a WAIT granted when another client
// releases, and a lock event to a subscriber.
func TestTLSWaitAndEvents(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	ts := startServer(t, withTLS(f, "yes"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	holder := ts.tlsClient(f.ClientConfig(t, "holder"))
	waiter := ts.tlsClient(f.ClientConfig(t, "waiter"), func(o *redis.Options) { o.ReadTimeout = 15 * time.Second })
	listener := ts.tlsClient(f.ClientConfig(t, "listener"))

	sub := listener.Subscribe(ctx, "__lock__:q")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	tok, err := holder.Do(ctx, "ACQUIRE", "q", "30000").Int64()
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan int64, 1)
	go func() {
		n, err := waiter.Do(ctx, "ACQUIRE", "q", "30000", "WAIT", "10000").Int64()
		if err != nil {
			t.Errorf("ACQUIRE ... WAIT over TLS: %v", err)
		}
		granted <- n
	}()
	testutil.Eventually(t, 5*time.Second, "the waiter parked", func() bool { return ts.stats.blocked.Load() == 1 })
	if err := holder.Do(ctx, "RELEASE", "q", tok).Err(); err != nil {
		t.Fatal(err)
	}
	if next := <-granted; next <= tok {
		t.Errorf("the waiter got token %d after %d", next, tok)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || !strings.HasPrefix(msg.Payload, "acquired ") {
		t.Fatalf("first event over TLS: %v, %v; want acquired", msg, err)
	}
}

// TestTLSCloseDuringHandshake checks Close does not wait for a handshake
// in progress to time out.
func TestTLSCloseDuringHandshake(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	ts := startServer(t, withTLS(f, "yes"), func(c *Config) { c.TLS.HandshakeTimeout = time.Minute })
	silent, err := net.Dial("tcp", ts.TLSAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	testutil.Eventually(t, 5*time.Second, "the handshake started", func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.tls.handshaking == 1
	})
	start := time.Now()
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %s with a handshake in progress", took)
	}
}

// TestTLSRefusalsAndAuth checks what the server says before a command runs
// reaches a TLS client through TLS: max clients, protected mode, and a
// password to AUTH with.
func TestTLSRefusalsAndAuth(t *testing.T) {
	f := tlstest.New(t, t.TempDir())
	ctx := context.Background()
	// firstLine is what a client that sends a command at once reads first.
	// The connection must then end in an orderly way (EOF), not by a reset,
	// which can make the client fail its write or lose the refusal unread
	// (see closeRefused).
	firstLine := func(t *testing.T, ts *testServer) string {
		t.Helper()
		nc, err := tls.Dial("tcp", ts.TLSAddr().String(), f.ClientConfig(t, "someone"))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write([]byte("PING\r\n")); err != nil {
			t.Errorf("sending a command: %v", err)
		}
		rd := bufio.NewReader(nc)
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the refusal: %q, %v", line, err)
		}
		if rest, err := rd.ReadString('\n'); !errors.Is(err, io.EOF) {
			t.Errorf("after the refusal: %q, %v; want EOF, the server's orderly close", rest, err)
		}
		return strings.TrimSuffix(line, "\r\n")
	}
	t.Run("max clients", func(t *testing.T) {
		ts := startServer(t, withTLS(f, "yes"), func(c *Config) { c.MaxClients = 1 })
		first := ts.tlsClient(f.ClientConfig(t, "first"))
		if err := first.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if got := firstLine(t, ts); got != "-ERR max number of clients reached" {
			t.Fatalf("second client read %q, want max number of clients reached", got)
		}
	})
	t.Run("protected mode", func(t *testing.T) {
		ts := startServer(t, withTLS(f, "yes"), withPeersRemote())
		if got := firstLine(t, ts); !strings.HasPrefix(got, "-DENIED leasehold is running in protected mode") {
			t.Fatalf("remote client read %q, want DENIED", got)
		}
	})
	t.Run("password", func(t *testing.T) {
		ts := startServer(t, withTLS(f, "yes"), withRequirePass("sesame"))
		err := ts.tlsClient(f.ClientConfig(t, "anon")).Ping(ctx).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
			t.Fatalf("PING without AUTH over TLS: %v, want NOAUTH", err)
		}
		authed := ts.tlsClient(f.ClientConfig(t, "alice"), func(o *redis.Options) { o.Password = "sesame" })
		if err := authed.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING after AUTH over TLS: %v", err)
		}
	})
}
