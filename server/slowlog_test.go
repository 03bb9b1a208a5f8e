package server

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func withSlowlog(slowerThanMicros int64, maxLen int) option {
	return func(c *Config) { c.SlowlogSlowerThan, c.SlowlogMaxLen = slowerThanMicros, maxLen }
}

// oneConnClient is a go-redis client with a single connection, so that what
// SLOWLOG shows is this test's commands in order.
func (ts *testServer) oneConnClient() *redis.Client {
	return ts.run.Client(func(o *redis.Options) { o.PoolSize, o.MinIdleConns, o.MaxRetries = 1, 0, -1 })
}

func TestSlowlogAtZeroLogsEveryCommand(t *testing.T) {
	ts := startServer(t, withSlowlog(0, 128))
	rdb := ts.oneConnClient()
	c := ctx(t)
	if err := rdb.Do(c, "CLIENT", "SETNAME", "worker-1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.SlowLogReset(c).Err(); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	if err := rdb.Ping(c).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(c, "ACQUIRE", "job", "30000").Err(); err != nil {
		t.Fatal(err)
	}
	logs, err := rdb.SlowLogGet(c, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"ACQUIRE", "job", "30000"}, {"ping"}, {"slowlog", "reset"}}
	if len(logs) != len(want) {
		t.Fatalf("SLOWLOG GET -1: %d entries, want %d: %+v", len(logs), len(want), logs)
	}
	for i, l := range logs {
		if !strings.EqualFold(strings.Join(l.Args, " "), strings.Join(want[i], " ")) {
			t.Errorf("entry %d: args %q, want %q", i, l.Args, want[i])
		}
		if i > 0 && l.ID >= logs[i-1].ID {
			t.Errorf("entry %d: id %d not below the newer %d", i, l.ID, logs[i-1].ID)
		}
		if l.Time.Before(before) || l.Time.After(time.Now().Add(time.Second)) {
			t.Errorf("entry %d: time %v, want about now", i, l.Time)
		}
		if l.Duration < 0 || l.Duration > 10*time.Second {
			t.Errorf("entry %d: duration %v", i, l.Duration)
		}
		if l.ClientName != "worker-1" || !strings.HasPrefix(l.ClientAddr, "127.0.0.1:") {
			t.Errorf("entry %d: client %q at %q, want worker-1 at 127.0.0.1:port", i, l.ClientName, l.ClientAddr)
		}
	}
	// The GET just logged counts too.
	if n, err := rdb.SlowLogLen(c).Result(); err != nil || n != 4 {
		t.Fatalf("SLOWLOG LEN = %d, %v; want 4", n, err)
	}
	if got, err := rdb.SlowLogGet(c, 2).Result(); err != nil || len(got) != 2 || got[0].Args[0] != "slowlog" {
		t.Fatalf("SLOWLOG GET 2 = %+v, %v; want the LEN and the GET before it", got, err)
	}
	if got, err := rdb.Do(c, "SLOWLOG", "GET").Slice(); err != nil || len(got) != 6 {
		t.Fatalf("SLOWLOG GET = %d entries, %v; want all 6 (fewer than the default 10)", len(got), err)
	}
	if err := rdb.SlowLogReset(c).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.SlowLogLen(c).Result(); err != nil || n != 1 {
		t.Fatalf("SLOWLOG LEN after RESET = %d, %v; want 1 (the RESET)", n, err)
	}
}

func TestSlowlogArgv(t *testing.T) {
	ts := startServer(t, withSlowlog(0, 128))
	rdb := ts.oneConnClient()
	c := ctx(t)
	long := strings.Repeat("x", 200)
	mrelease := []any{"MRELEASE"}
	for range 40 {
		mrelease = append(mrelease, "k", "1")
	}
	for _, tc := range []struct {
		name string
		cmd  []any
		want []string
	}{
		{"long argument", []any{"ECHO", long}, []string{"ECHO", long[:128] + "... (72 more bytes)"}},
		{"many arguments", mrelease, append(append([]string{"MRELEASE"}, strings.Split(strings.Repeat("k 1 ", 15), " ")[:30]...), "... (50 more arguments)")},
		{"auth password", []any{"AUTH", "alice", "s3cret"}, []string{"AUTH", "(redacted)", "(redacted)"}},
		{"hello password", []any{"HELLO", "2", "AUTH", "default", "s3cret"}, []string{"HELLO", "2", "AUTH", "default", "(redacted)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb.Do(c, tc.cmd...) // its reply does not matter; AUTH fails
			logs, err := rdb.SlowLogGet(c, 1).Result()
			if err != nil || len(logs) != 1 {
				t.Fatalf("SLOWLOG GET 1 = %+v, %v", logs, err)
			}
			if got := logs[0].Args; strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
				t.Fatalf("argv (%d)\n got %q\nwant %q (%d)", len(got), got, tc.want, len(tc.want))
			}
		})
	}
}

func TestSlowlogSettings(t *testing.T) {
	c := ctx(t)
	t.Run("negative logs nothing", func(t *testing.T) {
		rdb := startServer(t, withSlowlog(-1, 128)).oneConnClient()
		rdb.Ping(c)
		if n, err := rdb.SlowLogLen(c).Result(); err != nil || n != 0 {
			t.Fatalf("SLOWLOG LEN = %d, %v; want 0", n, err)
		}
	})
	t.Run("default threshold skips fast commands", func(t *testing.T) {
		rdb := startServer(t).oneConnClient()
		for range 10 {
			rdb.Ping(c)
		}
		// 10 ms is far above a PING, even on a loaded machine, almost always;
		// the LEN is logged after it answers.
		if n, err := rdb.SlowLogLen(c).Result(); err != nil || n > 2 {
			t.Fatalf("SLOWLOG LEN = %d, %v; want about 0", n, err)
		}
	})
	t.Run("max len keeps the newest", func(t *testing.T) {
		rdb := startServer(t, withSlowlog(0, 2)).oneConnClient()
		rdb.Do(c, "ECHO", "a")
		rdb.Do(c, "ECHO", "b")
		rdb.Do(c, "ECHO", "c")
		logs, err := rdb.SlowLogGet(c, -1).Result()
		if err != nil || len(logs) != 2 || logs[0].Args[1] != "c" || logs[1].Args[1] != "b" {
			t.Fatalf("SLOWLOG GET -1 = %+v, %v; want ECHO c, ECHO b", logs, err)
		}
	})
	t.Run("a wait is not the command's time", func(t *testing.T) {
		ts := startServer(t, withSlowlog(0, 128))
		if err := ts.client().Do(c, "ACQUIRE", "busy", "30000").Err(); err != nil {
			t.Fatal(err)
		}
		rdb := ts.oneConnClient()
		if err := rdb.Do(c, "ACQUIRE", "busy", "30000", "WAIT", "300").Err(); err != redis.Nil {
			t.Fatalf("ACQUIRE ... WAIT: %v, want nil at its deadline", err)
		}
		logs, err := rdb.SlowLogGet(c, 1).Result()
		if err != nil || len(logs) != 1 || logs[0].Args[0] != "ACQUIRE" {
			t.Fatalf("SLOWLOG GET 1 = %+v, %v", logs, err)
		}
		if logs[0].Duration >= 300*time.Millisecond {
			t.Fatalf("the ACQUIRE took %v by the slowlog, its 300 ms wait included", logs[0].Duration)
		}
	})
	t.Run("config get", func(t *testing.T) {
		rdb := startServer(t, withSlowlog(2500, 7)).oneConnClient()
		got, err := rdb.ConfigGet(c, "slowlog*").Result()
		if err != nil || got["slowlog-log-slower-than"] != "2500" || got["slowlog-max-len"] != "7" {
			t.Fatalf("CONFIG GET slowlog* = %v, %v", got, err)
		}
	})
}

func TestSlowlogErrors(t *testing.T) {
	rdb := startServer(t).oneConnClient()
	c := ctx(t)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"SLOWLOG", "GET", "-2"}, "ERR count should be greater than or equal to -1"},
		{[]any{"SLOWLOG", "GET", "x"}, "ERR count should be greater than or equal to -1"},
		{[]any{"SLOWLOG", "GET", "1", "2"}, "ERR wrong number of arguments for 'slowlog|get' command"},
		{[]any{"SLOWLOG", "LEN", "1"}, "ERR wrong number of arguments for 'slowlog|len' command"},
		{[]any{"SLOWLOG", "NOPE"}, "ERR unknown subcommand 'NOPE'. Try SLOWLOG HELP."},
		{[]any{"SLOWLOG"}, "ERR wrong number of arguments for 'slowlog' command"},
	} {
		if err := rdb.Do(c, tc.args...).Err(); err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	lines, err := rdb.Do(c, "SLOWLOG", "HELP").StringSlice()
	if err != nil || len(lines) < 2 || !strings.HasPrefix(lines[0], "SLOWLOG ") {
		t.Fatalf("SLOWLOG HELP = %q, %v", lines, err)
	}
}
