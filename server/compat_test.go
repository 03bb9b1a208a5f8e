package server

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/protocol"
	"github.com/redis/go-redis/v9"
)

// respError is an error reply read off a raw connection.
type respError string

// reply reads one RESP2 reply of any type: string for simple and bulk
// strings, respError, int64, nil for a nil bulk or array, []any for arrays.
func (rc *rawConn) reply() any {
	rc.t.Helper()
	l := rc.line()
	if l == "" {
		rc.t.Fatal("empty reply line")
	}
	switch l[0] {
	case '+':
		return l[1:]
	case '-':
		return respError(l[1:])
	case ':':
		n, err := strconv.ParseInt(l[1:], 10, 64)
		if err != nil {
			rc.t.Fatalf("bad integer reply %q", l)
		}
		return n
	case '$':
		n, err := strconv.Atoi(l[1:])
		if err != nil {
			rc.t.Fatalf("bad bulk header %q", l)
		}
		if n < 0 {
			return nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, b); err != nil {
			rc.t.Fatalf("reading bulk of %d: %v", n, err)
		}
		if string(b[n:]) != "\r\n" {
			rc.t.Fatalf("bulk of %d not followed by CRLF", n)
		}
		return string(b[:n])
	case '*':
		n, err := strconv.Atoi(l[1:])
		if err != nil {
			rc.t.Fatalf("bad array header %q", l)
		}
		if n < 0 {
			return nil
		}
		a := make([]any, n)
		for i := range a {
			a[i] = rc.reply()
		}
		return a
	}
	rc.t.Fatalf("unknown reply type %q", l)
	return nil
}

// expect reads one reply and compares it with want.
func (rc *rawConn) expect(want any) {
	rc.t.Helper()
	got := rc.reply()
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		rc.t.Fatalf("reply %#v, want %#v", got, want)
	}
}

// expectErr reads one reply and checks that it is an error starting with prefix.
func (rc *rawConn) expectErr(prefix string) {
	rc.t.Helper()
	got := rc.reply()
	if e, ok := got.(respError); !ok || !strings.HasPrefix(string(e), prefix) {
		rc.t.Fatalf("reply %#v, want an error starting %q", got, prefix)
	}
}

// resp encodes args as a RESP array of bulk strings.
func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

func TestPingEchoSelect(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	c := ctx(t)

	if got, err := rdb.Ping(c).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v", got, err)
	}
	do(t, rdb, "PING", "hello world").Str("hello world")
	do(t, rdb, "PING", "").Str("")
	do(t, rdb, "PING", "a", "b").Err("ERR wrong number of arguments for 'ping' command")
	if got, err := rdb.Echo(c, "a\x00b\r\n").Result(); err != nil || got != "a\x00b\r\n" {
		t.Fatalf("ECHO = %q, %v", got, err)
	}
	do(t, rdb, "ECHO", "").Str("")
	do(t, rdb, "SELECT", 0).OK()
	do(t, rdb, "SELECT", 1).Err("ERR DB index is out of range")
	do(t, rdb, "SELECT", -1).Err("ERR DB index is out of range")
	do(t, rdb, "SELECT", "x").Err("ERR value is not an integer or out of range")

	// A client configured for database 1 fails to connect, as against a
	// Redis with a single database, while DB 0 works.
	db1 := redis.NewClient(&redis.Options{Addr: ts.addr, DB: 1, MaxRetries: -1})
	defer db1.Close()
	if err := db1.Ping(c).Err(); err == nil || !strings.Contains(err.Error(), "DB index is out of range") {
		t.Fatalf("PING with DB 1 = %v, want DB index error", err)
	}
}

func TestQuit(t *testing.T) {
	ts := startServer(t)
	for _, tc := range []struct{ name, in string }{
		{"resp", resp("QUIT")},
		{"inline", "quit\r\n"},
		// Commands after QUIT in the same read are not run.
		{"pipelined", "PING\r\n" + resp("QUIT") + "PING\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := ts.dial()
			rc.send(tc.in)
			if strings.HasPrefix(tc.in, "PING") {
				rc.expect("PONG")
			}
			rc.expect("OK")
			if !rc.closed() {
				t.Fatal("connection still open after QUIT")
			}
		})
	}
	// The server still serves.
	do(t, ts.client(), "PING").Str("PONG")
}

// helloMap turns HELLO's flat reply into a map.
func helloMap(t testing.TB, r reply) map[string]any {
	t.Helper()
	s := r.Slice()
	if len(s)%2 != 0 {
		t.Fatalf("HELLO reply has %d elements", len(s))
	}
	m := map[string]any{}
	for i := 0; i < len(s); i += 2 {
		m[s[i].(string)] = s[i+1]
	}
	return m
}

func TestHello(t *testing.T) {
	ts := startServer(t)
	cn := stickyConn(t, ts.client())

	for _, args := range [][]any{{"HELLO"}, {"HELLO", 2}, {"hello", "2", "AUTH", "default", "anything"}} {
		m := helloMap(t, do(t, cn, args...))
		if m["proto"] != int64(2) || m["server"] != "leasehold" || m["version"] != "test" || m["mode"] != "standalone" || m["role"] != "master" {
			t.Errorf("%v = %v", args, m)
		}
		if id, ok := m["id"].(int64); !ok || id <= 0 {
			t.Errorf("%v: id %v", args, m["id"])
		}
	}
	do(t, cn, "HELLO", 3).Err("NOPROTO ")
	do(t, cn, "HELLO", 1).Err("NOPROTO ")
	do(t, cn, "HELLO", "x").Err("ERR Protocol version is not an integer or out of range")
	do(t, cn, "HELLO", 2, "BOGUS").Err("ERR Syntax error in HELLO option 'BOGUS'")
	do(t, cn, "HELLO", 2, "AUTH", "bob", "pw").Err("WRONGPASS ")
	do(t, cn, "HELLO", 2, "SETNAME", "bad name").Err("ERR Client names cannot contain spaces")
	do(t, cn, "CLIENT", "GETNAME").Nil()
	helloMap(t, do(t, cn, "HELLO", 2, "SETNAME", "via-hello"))
	do(t, cn, "CLIENT", "GETNAME").Str("via-hello")
}

func TestGoRedisDefaultClient(t *testing.T) {
	ts := startServer(t)
	c := ctx(t)

	// go-redis v9 defaults to RESP3: it sends HELLO 3, falls back to RESP2 on
	// NOPROTO, then sends CLIENT SETINFO. All of that must be invisible.
	for _, tc := range []struct {
		name string
		opts redis.Options
	}{
		{"default", redis.Options{}},
		{"resp2", redis.Options{Protocol: 2}},
		{"resp3", redis.Options{Protocol: 3, ClientName: "my-app"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Addr = ts.addr
			rdb := redis.NewClient(&opts)
			defer rdb.Close()
			if err := rdb.Ping(c).Err(); err != nil {
				t.Fatal(err)
			}
			key := "gr-" + tc.name
			tok := do(t, rdb, "ACQUIRE", key, 30000).Token()
			do(t, rdb, "VERIFY", key, tok).Is(1)
			do(t, rdb, "RELEASE", key, tok).Is(1)

			cn := rdb.Conn()
			defer cn.Close()
			info := do(t, cn, "CLIENT", "INFO").Text()
			if !strings.Contains(info, "lib-name=go-redis(") || !strings.Contains(info, "lib-ver="+redis.Version()) {
				t.Errorf("CLIENT SETINFO did not take: %q", info)
			}
			if tc.opts.ClientName != "" {
				do(t, cn, "CLIENT", "GETNAME").Str(tc.opts.ClientName)
			}
		})
	}
}

func TestClient(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	cn := stickyConn(t, rdb)
	other := stickyConn(t, rdb)

	id := do(t, cn, "CLIENT", "ID").Int()
	if id <= 0 {
		t.Fatalf("CLIENT ID = %d", id)
	}
	if id2 := do(t, other, "client", "id").Int(); id2 == id {
		t.Fatalf("two connections share CLIENT ID %d", id)
	}
	do(t, cn, "CLIENT", "GETNAME").Nil()
	do(t, cn, "CLIENT", "SETNAME", "worker-1").OK()
	do(t, cn, "CLIENT", "GETNAME").Str("worker-1")
	do(t, other, "CLIENT", "GETNAME").Nil()
	do(t, cn, "CLIENT", "SETNAME", "bad name").Err("ERR Client names cannot contain spaces, newlines or special characters.")
	do(t, cn, "CLIENT", "SETNAME", "bad\nname").Err("ERR Client names cannot contain spaces")
	do(t, cn, "CLIENT", "GETNAME").Str("worker-1")
	do(t, cn, "CLIENT", "SETINFO", "LIB-NAME", "x").OK()
	do(t, cn, "CLIENT", "setinfo", "lib-ver", "1.0").OK()
	do(t, cn, "CLIENT", "SETINFO", "LIB-NAME", "a b").Err("ERR Client names cannot contain spaces")
	do(t, cn, "CLIENT", "SETINFO", "FOO", "x").Err("ERR Unrecognized option 'FOO'")
	do(t, cn, "CLIENT", "FOO").Err("ERR unknown subcommand 'FOO'. Try CLIENT HELP.")
	do(t, cn, "CLIENT", "SETNAME").Err("ERR wrong number of arguments for 'client|setname' command")
	do(t, cn, "CLIENT", "ID", "x").Err("ERR wrong number of arguments for 'client|id' command")
	do(t, cn, "CLIENT").Err("ERR wrong number of arguments for 'client' command")
	info := do(t, cn, "CLIENT", "INFO").Text()
	for _, want := range []string{fmt.Sprintf("id=%d ", id), " name=worker-1 ", " lib-name=x ", " lib-ver=1.0"} {
		if !strings.Contains(info, want) {
			t.Errorf("CLIENT INFO %q lacks %q", info, want)
		}
	}
	if got := do(t, cn, "CLIENT", "ID").Int(); got != id {
		t.Fatalf("CLIENT ID changed from %d to %d after errors", id, got)
	}
}

func TestCommandCommand(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	c := ctx(t)

	do(t, rdb, "COMMAND", "COUNT").Is(int64(len(protocol.Commands)))

	var want []string
	for _, cmd := range protocol.Commands {
		want = append(want, cmd.Name)
	}
	entries := do(t, rdb, "COMMAND").Slice()
	var got []string
	for _, e := range entries {
		fields, ok := e.([]any)
		if !ok || len(fields) != 10 {
			t.Fatalf("COMMAND entry %#v is not a 10-element array", e)
		}
		got = append(got, fields[0].(string))
		cmd := protocol.Lookup([]byte(fields[0].(string)))
		if cmd == nil || fields[1] != int64(cmd.Arity) {
			t.Errorf("COMMAND entry %v: arity does not match the table", fields)
		}
	}
	wantOnce(t, got, want)
	list := do(t, rdb, "COMMAND", "LIST").Slice()
	if len(list) != len(want) {
		t.Errorf("COMMAND LIST has %d names, want %d", len(list), len(want))
	}

	// go-redis parses the reply itself (it uses it for key routing).
	infos, err := rdb.Command(c).Result()
	if err != nil {
		t.Fatalf("go-redis Command: %v", err)
	}
	if len(infos) != len(protocol.Commands) {
		t.Fatalf("go-redis Command has %d entries, want %d", len(infos), len(protocol.Commands))
	}
	if a := infos["acquire"]; a == nil || a.Arity != -2 || a.FirstKeyPos != 1 || a.LastKeyPos != 1 || a.StepCount != 1 || a.ReadOnly {
		t.Errorf("acquire = %+v", a)
	}
	if v := infos["verify"]; v == nil || v.Arity != 3 || !v.ReadOnly || !slices.Contains(v.ACLFlags, "@read") { // its ACL category
		t.Errorf("verify = %+v", v)
	}

	info := do(t, rdb, "COMMAND", "INFO", "acquire", "ACQUIRE", "nope").Slice()
	if len(info) != 3 || info[2] != nil {
		t.Fatalf("COMMAND INFO acquire ACQUIRE nope = %#v", info)
	}
	for _, e := range info[:2] {
		if f, ok := e.([]any); !ok || f[0] != "acquire" || f[1] != int64(-2) {
			t.Errorf("COMMAND INFO acquire entry = %#v", e)
		}
	}

	docs := do(t, rdb, "COMMAND", "DOCS").Slice()
	if len(docs) != 2*len(protocol.Commands) {
		t.Fatalf("COMMAND DOCS has %d elements, want %d", len(docs), 2*len(protocol.Commands))
	}
	one := do(t, rdb, "COMMAND", "DOCS", "acquire").Slice()
	if len(one) != 2 || one[0] != "acquire" {
		t.Fatalf("COMMAND DOCS acquire = %#v", one)
	}
	doc := map[string]any{}
	body := one[1].([]any)
	for i := 0; i+1 < len(body); i += 2 {
		doc[body[i].(string)] = body[i+1]
	}
	if doc["summary"] != protocol.Lookup([]byte("acquire")).Summary || doc["group"] != "lock" {
		t.Errorf("COMMAND DOCS acquire = %v", doc)
	}
	if got := do(t, rdb, "COMMAND", "DOCS", "nope").Slice(); len(got) != 0 {
		t.Errorf("COMMAND DOCS nope = %v", got)
	}
	do(t, rdb, "COMMAND", "FOO").Err("ERR unknown subcommand 'FOO'. Try COMMAND HELP.")
	do(t, rdb, "COMMAND", "COUNT", "x").Err("ERR wrong number of arguments for 'command|count' command")
}

func TestInfo(t *testing.T) {
	ts, clock := manualServer(t)
	rdb := ts.client()
	cn := stickyConn(t, rdb)

	all := do(t, cn, "INFO").Text()
	last := -1
	for _, sec := range []string{"# Server\r\n", "# Clients\r\n", "# Stats\r\n", "# Locks\r\n"} {
		i := strings.Index(all, sec)
		if i < 0 {
			t.Fatalf("INFO lacks %q:\n%s", sec, all)
		}
		if i < last {
			t.Errorf("INFO section %q out of order", sec)
		}
		last = i
	}
	if !strings.HasPrefix(all, "# Server\r\n") {
		t.Errorf("INFO does not start with # Server: %q", all[:min(len(all), 40)])
	}
	server := infoMap(t, cn, "server")
	if server["tcp_addr"] != ts.addr || server["leasehold_version"] != "test" || server["redis_version"] == "" {
		t.Errorf("INFO server = %v", server)
	}
	// go-redis reads INFO with its own parser too.
	if m, err := rdb.InfoMap(ctx(t), "locks").Result(); err != nil || m["Locks"]["shards"] != "8" {
		t.Errorf("go-redis InfoMap locks = %v, %v", m, err)
	}

	for _, section := range []string{"locks", "LOCKS", "Locks"} {
		text := do(t, cn, "INFO", section).Text()
		if strings.Count(text, "# ") != 1 || !strings.HasPrefix(text, "# Locks\r\n") {
			t.Errorf("INFO %s = %q, want the locks section only", section, text)
		}
	}
	two := do(t, cn, "INFO", "clients", "stats").Text()
	if strings.Count(two, "# ") != 2 || !strings.Contains(two, "# Clients\r\n") || !strings.Contains(two, "# Stats\r\n") {
		t.Errorf("INFO clients stats = %q", two)
	}
	if got := do(t, cn, "INFO", "nosuchsection").Text(); got != "" {
		t.Errorf("INFO nosuchsection = %q, want empty", got)
	}

	// Counters match what happened.
	locks := func() map[string]string { return infoMap(t, cn, "locks") }
	wantLocks := func(want map[string]string) {
		t.Helper()
		got := locks()
		for k, v := range want {
			if got[k] != v {
				t.Errorf("INFO locks %s = %q, want %q", k, got[k], v)
			}
		}
	}
	wantLocks(map[string]string{"locks": "0", "leases_held": "0", "leases_granted": "0", "require_create": "0", "max_ttl_ms": "86400000"})
	ta := do(t, cn, "ACQUIRE", "a", 1000).Token()
	tb := do(t, cn, "ACQUIRE", "b", 1000).Token()
	tc := do(t, cn, "ACQUIRE", "c", 1000, "OWNER", "o").Token()
	do(t, cn, "ACQUIRE", "c", 1000, "OWNER", "o").Is(int64(tc))
	do(t, cn, "CREATE", "d").Is(1)
	do(t, cn, "RELEASE", "b", tb).Is(1)
	wantLocks(map[string]string{"locks": "3", "leases_held": "2", "leases_granted": "3", "leases_renewed": "1", "leases_released": "1", "leases_expired": "0"})
	clock.Advance(time.Second)
	// Touching the leases expires them without waiting for the reaper.
	do(t, cn, "VERIFY", "a", ta).Is(0)
	do(t, cn, "VERIFY", "c", tc).Is(0)
	wantLocks(map[string]string{"locks": "1", "leases_held": "0", "leases_expired": "2"})

	// Two more clients, each proven registered by a reply.
	before, _ := strconv.Atoi(infoField(t, cn, "clients", "connected_clients"))
	for range 2 {
		rc := ts.dial()
		rc.send("PING\r\n")
		rc.expect("PONG")
	}
	clients := infoMap(t, cn, "clients")
	if clients["connected_clients"] != strconv.Itoa(before+2) || clients["maxclients"] != "10000" {
		t.Errorf("INFO clients = %v", clients)
	}
	// The reaper, not just a lookup, expires leases on the manual clock.
	do(t, cn, "ACQUIRE", "reaped", 1000).Token()
	wantLocks(map[string]string{"leases_held": "1"})
	clock.Advance(time.Second)
	testutil.Eventually(t, 5*time.Second, "the reaper expires the lease", func() bool {
		m := locks()
		return m["leases_held"] == "0" && m["leases_expired"] == "3" && m["locks"] == "1"
	})

	stats := infoMap(t, cn, "stats")
	if n, _ := strconv.Atoi(stats["total_commands_processed"]); n < 10 {
		t.Errorf("total_commands_processed = %q", stats["total_commands_processed"])
	}
	if n, _ := strconv.Atoi(stats["total_connections_received"]); n < 3 {
		t.Errorf("total_connections_received = %q", stats["total_connections_received"])
	}
}

func TestConfig(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	c := ctx(t)

	// What redis-benchmark asks before it starts.
	for param, want := range map[string]string{"save": "", "appendonly": "no"} {
		got, err := rdb.ConfigGet(c, param).Result()
		if err != nil || len(got) != 1 || got[param] != want {
			t.Errorf("CONFIG GET %s = %v, %v", param, got, err)
		}
	}
	all := do(t, rdb, "CONFIG", "GET", "*").Fields()
	for _, p := range []string{"save", "appendonly", "databases", "maxclients", "timeout", "max-ttl", "max-key-len", "require-create", "proto-max-bulk-len"} {
		if _, ok := all[p]; !ok {
			t.Errorf("CONFIG GET * lacks %s: %v", p, all)
		}
	}
	if all["max-ttl"] != "86400000" || all["maxclients"] != "10000" || all["databases"] != "1" {
		t.Errorf("CONFIG GET * = %v", all)
	}
	maxes := do(t, rdb, "CONFIG", "GET", "max-*").Fields()
	if len(maxes) != 3 || maxes["max-ttl"] == "" || maxes["max-key-len"] == "" || maxes["max-locks"] != "0" {
		t.Errorf("CONFIG GET max-* = %v", maxes)
	}
	// What Redis tools ask about memory.
	if got := do(t, rdb, "CONFIG", "GET", "protected-mode").Fields(); got["protected-mode"] != "yes" {
		t.Errorf("CONFIG GET protected-mode = %q, want yes (the default)", got)
	}
	if got := do(t, rdb, "CONFIG", "GET", "maxmemory*").Fields(); len(got) != 2 || got["maxmemory"] != "0" || got["maxmemory-policy"] != "noeviction" {
		t.Errorf("CONFIG GET maxmemory* = %v", got)
	}
	if got := do(t, rdb, "CONFIG", "GET", "MAXCLIENTS", "save").Fields(); len(got) != 2 || got["maxclients"] != "10000" {
		t.Errorf("CONFIG GET MAXCLIENTS save = %v", got)
	}
	if got := do(t, rdb, "CONFIG", "GET", "nope").Fields(); len(got) != 0 {
		t.Errorf("CONFIG GET nope = %v", got)
	}
	do(t, rdb, "CONFIG", "SET", "save", "").Err("ERR CONFIG SET is not supported")
	do(t, rdb, "CONFIG", "RESETSTAT").Err("ERR ")
	do(t, rdb, "CONFIG", "GET").Err("ERR wrong number of arguments for 'config|get' command")
	do(t, rdb, "CONFIG", "FOO").Err("ERR unknown subcommand 'FOO'. Try CONFIG HELP.")
	do(t, rdb, "CONFIG").Err("ERR wrong number of arguments for 'config' command")
}

func TestConfigTimeout(t *testing.T) {
	for _, tc := range []struct {
		idle time.Duration
		want string
	}{
		{0, "0"},
		{2 * time.Second, "2"},
		{200 * time.Millisecond, ""}, // any whole number but 0, which would mean "never"
	} {
		t.Run(tc.idle.String(), func(t *testing.T) {
			ts := startServer(t, func(c *Config) { c.IdleTimeout = tc.idle })
			got := do(t, ts.client(), "CONFIG", "GET", "timeout").Fields()["timeout"]
			if n, err := strconv.Atoi(got); tc.want == "" && (err != nil || n <= 0) || tc.want != "" && got != tc.want {
				t.Fatalf("CONFIG GET timeout = %q with an idle timeout of %v", got, tc.idle)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	ts := startServer(t)
	rdb := ts.client()
	do(t, rdb, "AUTH", "pass").Err("ERR AUTH <password> called without any password configured for the default user.")
	do(t, rdb, "AUTH", "default", "anything").OK()
	do(t, rdb, "AUTH", "bob", "pw").Err("WRONGPASS invalid username-password pair")
	do(t, rdb, "AUTH", "a", "b", "c").Err("ERR syntax error") // Redis's reply

	// A go-redis client configured with a password cannot connect: leasehold
	// must not pretend to have checked it.
	pw := redis.NewClient(&redis.Options{Addr: ts.addr, Password: "secret", MaxRetries: -1})
	defer pw.Close()
	if err := pw.Ping(ctx(t)).Err(); err == nil {
		t.Fatal("a client with a password connected")
	}
}

func TestInline(t *testing.T) {
	ts := startServer(t)
	rc := ts.dial()

	rc.send("ACQUIRE k 1000\r\n")
	tok, ok := rc.reply().(int64)
	if !ok || tok <= 0 {
		t.Fatalf("inline ACQUIRE: not a token")
	}
	rc.send(fmt.Sprintf("verify k %d\r\n", tok))
	rc.expect(int64(1))
	rc.send("acquire k 1000\r\n")
	rc.expect(nil)
	rc.send(fmt.Sprintf("Release k %d\r\n", tok))
	rc.expect(int64(1))

	// Quoted arguments, as redis-cli and telnet users type them.
	rc.send(`acquire "my key" 30000 OWNER "a b"` + "\r\n")
	qtok, ok := rc.reply().(int64)
	if !ok || qtok <= 0 {
		t.Fatal("inline ACQUIRE with quotes: not a token")
	}
	rc.send(`STATUS "my key"` + "\r\n")
	st, _ := rc.reply().([]any)
	if len(st) != 2*len(protocol.StatusFields) || st[4] != "owner" || st[5] != "a b" || st[1] != "held" {
		t.Fatalf(`STATUS "my key" = %#v`, st)
	}
	rc.send(`VERIFY 'my key' ` + strconv.FormatInt(qtok, 10) + "\r\n")
	rc.expect(int64(1))

	for _, tc := range []struct {
		in   string
		want any
	}{
		{`ECHO "a\x41\n\t\"b"` + "\r\n", "aA\n\t\"b"},
		{`ECHO 'it\'s'` + "\r\n", "it's"},
		{`ECHO ""` + "\r\n", ""},
		{"ECHO   \t spaced  \r\n", "spaced"},
		{"PING\n", "PONG"},                       // bare LF, as nc sends
		{"\r\n\n\r\nPING\r\n", "PONG"},           // blank lines are skipped
		{"ping hello\r\n", "hello"},              // lower case
		{"PiNg\r\n" + resp("ECHO", "x"), "PONG"}, // inline then RESP
	} {
		rc.send(tc.in)
		rc.expect(tc.want)
	}
	rc.expect("x")

	// Pipelined inline commands are all answered, in order.
	rc.send("PING\r\nECHO one\r\nECHO two\r\n")
	rc.expect("PONG")
	rc.expect("one")
	rc.expect("two")

	// Errors leave the connection open.
	rc.send("ACQUIRE\r\n")
	rc.expectErr("ERR wrong number of arguments for 'acquire' command")
	rc.send("foo bar\r\n")
	rc.expectErr("ERR unknown command 'foo', with args beginning with: 'bar' ")
	rc.send("ACQUIRE k 0\r\n")
	rc.expectErr("ERR invalid expire time in 'acquire' command")
	rc.send("ACQUIRE \"\" 1000\r\n")
	rc.expectErr("ERR empty key")
	rc.send("PING\r\n")
	rc.expect("PONG")

	// An argument quoted into an error message cannot inject a reply.
	for _, args := range [][]string{
		{"HELLO", "2", "x\r\n+OK"},
		{"CLIENT", "SETINFO", "x\r\n+OK", "v"},
		{"CLIENT", "x\r\n+OK"},
		{"nope\r\n+OK", "a\r\n:1"},
		{"ACQUIRE", "x\r\n:1", "1000", "OWNER", ""},
	} {
		rc.send(resp(args...) + "PING\r\n")
		rc.expectErr("ERR ")
		rc.expect("PONG")
	}
	rc.send(resp("DELETE", "k\r\n:1"))
	rc.expect(int64(0))
}
