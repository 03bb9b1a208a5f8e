package server

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/tidwall/redcon"

	"github.com/leasehold/leasehold/protocol"
)

// script returns the text of a known script by its library's name.
func script(t testing.TB, lib string) *protocol.Script {
	for i := range protocol.KnownScripts {
		if protocol.KnownScripts[i].Library == lib {
			return &protocol.KnownScripts[i]
		}
	}
	t.Fatalf("no known script of %s", lib)
	return nil
}

// redisStep is one command of a session and its reply as redis-cli would
// print it: a value, "(nil)", "ERR ..." for an error, "*" for any integer,
// "~N" for an integer at most N and within a second of it.
type redisStep struct {
	args []any
	want string
}

func runRedisSteps(t *testing.T, rc *redis.Client, steps []redisStep) {
	t.Helper()
	for _, st := range steps {
		v, err := rc.Do(ctx(t), st.args...).Result()
		var got string
		switch {
		case errors.Is(err, redis.Nil):
			got = "(nil)"
		case err != nil:
			got = err.Error()
		default:
			got = toString(v)
		}
		if !replyMatches(got, st.want) {
			t.Errorf("%v = %q, want %q", st.args, got, st.want)
		}
	}
}

func toString(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case string:
		return v
	case []any:
		parts := make([]string, len(v))
		for i := range v {
			parts[i] = toString(v[i])
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return "?"
}

func replyMatches(got, want string) bool {
	switch {
	case want == "*":
		_, err := strconv.ParseInt(got, 10, 64)
		return err == nil
	case strings.HasPrefix(want, "~"):
		n, err1 := strconv.ParseInt(got, 10, 64)
		w, err2 := strconv.ParseInt(want[1:], 10, 64)
		return err1 == nil && err2 == nil && n <= w && n > w-1000
	case strings.HasSuffix(want, "..."):
		return strings.HasPrefix(got, strings.TrimSuffix(want, "..."))
	}
	return got == want
}

// TestRedisLockCommands: every form of the Redis commands lock libraries
// send, with Redis's replies, and leasehold's errors for what is no lock
// operation.
func TestRedisLockCommands(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rc := ts.client()
	release := script(t, "redis-py Lock.release")
	unlock := script(t, "redsync Mutex.Unlock")
	extend := script(t, "redis-py Lock.extend")
	obtain := script(t, "bsm/redislock Obtain")
	pttl := script(t, "bsm/redislock Lock.TTL")
	acquireAll := script(t, "redlock 4 lock")
	unlockAll := script(t, "@sesamecare-oss/redlock release")
	extendAll := script(t, "redlock 4 extend")
	touchNX := script(t, "redsync Mutex.Extend (WithSetNXOnExtend)")
	runRedisSteps(t, rc, []redisStep{
		{[]any{"SET", "job", "a", "NX", "PX", 10000}, "OK"},
		{[]any{"SET", "job", "b", "NX", "PX", 10000}, "(nil)"},
		{[]any{"SET", "job", "a", "NX", "PX", 10000}, "(nil)"}, // the key exists, whoever's
		{[]any{"GET", "job"}, "a"},
		{[]any{"PTTL", "job"}, "~10000"},
		{[]any{"TTL", "job"}, "10"},
		{[]any{"EXISTS", "job", "free", "job"}, "2"},
		{[]any{"ACQUIRE", "job", 10000, "OWNER", "a"}, "*"}, // the holder's fencing token
		{[]any{"EVALSHA", release.SHA1, 1, "job", "b"}, "0"},
		{[]any{"EVALSHA", extend.SHA1, 1, "job", "a", 5000, 1}, "1"},
		{[]any{"PTTL", "job"}, "~5000"},
		{[]any{"EVALSHA", extend.SHA1, 1, "job", "a", 5000, 0}, "1"},
		{[]any{"PTTL", "job"}, "~10000"},
		{[]any{"EVALSHA", pttl.SHA1, 1, "job", "a"}, "~10000"},
		{[]any{"EVALSHA_RO", pttl.SHA1, 1, "job", "b"}, "-3"},
		{[]any{"EVALSHA_RO", release.SHA1, 1, "job", "a"}, "ERR Write commands are not allowed from read-only scripts."},
		{[]any{"EVALSHA", unlock.SHA1, 1, "job", "a"}, "1"},
		{[]any{"EVALSHA", unlock.SHA1, 1, "job", "a"}, "-1"},
		{[]any{"GET", "job"}, "(nil)"},
		{[]any{"PTTL", "job"}, "-2"},

		{[]any{"EVAL", obtain.Text, 1, "o", "tokmeta", 3, 2000}, "OK"},
		{[]any{"EVALSHA", obtain.SHA1, 1, "o", "other", 5, 2000}, "(nil)"},
		{[]any{"EVALSHA", obtain.SHA1, 1, "o", "tokmeta", 3, 9000}, "OK"}, // the same token again
		{[]any{"PTTL", "o"}, "~9000"},
		{[]any{"EVALSHA", touchNX.SHA1, 1, "t", "v", 3000}, "1"}, // free: taken
		{[]any{"EVALSHA", touchNX.SHA1, 1, "t", "v", 6000}, "1"}, // the holder's: extended
		{[]any{"EVALSHA", touchNX.SHA1, 1, "t", "w", 3000}, "0"},
		{[]any{"PTTL", "t"}, "~6000"},

		{[]any{"EVALSHA", acquireAll.SHA1, 2, "r1", "r2", "v", 5000}, "2"},
		{[]any{"EVALSHA", acquireAll.SHA1, 2, "r2", "r3", "w", 5000}, "0"},
		{[]any{"EXISTS", "r3"}, "0"}, // all or none
		{[]any{"EVALSHA", extendAll.SHA1, 2, "r1", "r2", "v", 8000}, "2"},
		{[]any{"PTTL", "r2"}, "~8000"},
		{[]any{"EVALSHA", unlockAll.SHA1, 3, "r1", "r2", "r3", 0, "v"}, "2"},

		{[]any{"SET", "d", "x", "NX", "EX", 100}, "OK"},
		{[]any{"PEXPIRE", "d", 1500}, "1"},
		{[]any{"PTTL", "d"}, "~1500"},
		{[]any{"EXPIRE", "d", 20}, "1"},
		{[]any{"PTTL", "d"}, "~20000"},
		{[]any{"PEXPIREAT", "d", time.Now().Add(30 * time.Second).UnixMilli()}, "1"},
		{[]any{"PTTL", "d"}, "~30000"},
		{[]any{"PEXPIRE", "free", 1500}, "0"},
		{[]any{"DEL", "d", "d", "free"}, "1"},
		{[]any{"SET", "d", "x", "NX", "PX", 100000}, "OK"},
		{[]any{"PEXPIRE", "d", 0}, "1"}, // deleted, as Redis does
		{[]any{"EXISTS", "d"}, "0"},
		{[]any{"SET", "d", "x", "NX", "PXAT", time.Now().Add(time.Minute).UnixMilli()}, "OK"},
		{[]any{"PTTL", "d"}, "~60000"},
		{[]any{"UNLINK", "d"}, "1"},

		// What is no lock operation is refused, saying what is supported.
		{[]any{"SET", "k", "v"}, protocol.ErrSetNeedsNX.Error()},
		{[]any{"SET", "k", "v", "XX", "PX", 10}, protocol.ErrSetNeedsNX.Error()},
		{[]any{"SET", "k", "v", "NX", "GET"}, protocol.ErrSetGet.Error()},
		{[]any{"SET", "k", "", "NX", "PX", 10}, protocol.ErrEmptyValue.Error()},
		{[]any{"SET", "k", "v", "NX", "PX", 0}, "ERR invalid expire time in 'set' command"},
		{[]any{"SET", "k", "v", "NX", "PX", "soon"}, "ERR value is not an integer or out of range"},
		{[]any{"SET", "k", "v", "NX", "EX", 1, "PX", 1}, "ERR syntax error"},
		{[]any{"SET", "k", "v", "NX"}, "ERR no ttl given and the lock has no default ttl"},
		{[]any{"PEXPIRE", "k", 10, "GT"}, protocol.ErrExpireOptions.Error()},
		{[]any{"EVAL", "return redis.call('flushall')", 0}, "ERR leasehold runs no Lua..."},
		{[]any{"EVALSHA", strings.Repeat("0", 40), 0}, "NOSCRIPT No matching script. Please use EVAL."},
		{[]any{"EVALSHA", release.SHA1, 2, "k"}, "ERR Number of keys can't be greater than number of args"},
		{[]any{"EVALSHA", release.SHA1, 1, "k"}, "ERR too few keys or arguments for the script of redis-py Lock.release"},
		{[]any{"EVALSHA", script(t, "redis-semaphore Semaphore.acquire").SHA1, 1, "s", 3, "id", 100, 1}, "ERR leasehold does not run redis-semaphore Semaphore.acquire..."},

		{[]any{"SCRIPT", "LOAD", release.Text}, release.SHA1},
		{[]any{"SCRIPT", "LOAD", "return 1"}, "ERR leasehold runs no Lua..."},
		{[]any{"SCRIPT", "EXISTS", release.SHA1, strings.Repeat("1", 40)}, "[1 0]"},
		{[]any{"SCRIPT", "FLUSH"}, "OK"},
		{[]any{"SCRIPT", "KILL"}, "ERR unknown subcommand 'KILL'. Try SCRIPT HELP."},
	})
}

// TestScriptRespelt: a library's script in another spelling (its spacing)
// runs once given by EVAL, and then by its own SHA1, as on Redis; SCRIPT
// FLUSH forgets it, and its EVALSHA gets NOSCRIPT again.
func TestScriptRespelt(t *testing.T) {
	t.Parallel()
	rc := startServer(t).client()
	text := strings.ReplaceAll(script(t, "bsm/redislock Lock.Release").Text, " then ", "\nthen\n")
	sha := protocol.ScriptSHA1([]byte(text))
	runRedisSteps(t, rc, []redisStep{
		{[]any{"EVALSHA", sha, 1, "k", "v"}, "NOSCRIPT No matching script. Please use EVAL."},
		{[]any{"SET", "k", "v", "NX", "PX", 10000}, "OK"},
		{[]any{"EVAL", text, 1, "k", "v"}, "1"},
		{[]any{"SET", "k", "v", "NX", "PX", 10000}, "OK"},
		{[]any{"EVALSHA", sha, 1, "k", "v"}, "1"},
		{[]any{"SCRIPT", "FLUSH", "ASYNC"}, "OK"},
		{[]any{"EVALSHA", sha, 1, "k", "v"}, "NOSCRIPT No matching script. Please use EVAL."},
	})
}

// TestRedisCommandsTakeRedisACLRules: a user with Redis's categories and
// key patterns gets the Redis commands they name, and not the others.
func TestRedisCommandsTakeRedisACLRules(t *testing.T) {
	t.Parallel()
	ts := startServer(t, withACLFile(t, "user default on nopass ~* &* +@all\n"+
		"user legacy on >pw ~legacy:* +@write +@read +@scripting -del\n"))
	rc := ts.userClient("legacy", "pw")
	release := script(t, "redis-py Lock.release")
	runRedisSteps(t, rc, []redisStep{
		{[]any{"SET", "legacy:a", "v", "NX", "PX", 10000}, "OK"},
		{[]any{"GET", "legacy:a"}, "v"},
		{[]any{"EVALSHA", release.SHA1, 1, "legacy:a", "v"}, "1"},
		{[]any{"SET", "other", "v", "NX", "PX", 10000}, "NOPERM No permissions to access a key"},
		{[]any{"EVALSHA", release.SHA1, 1, "other", "v"}, "NOPERM No permissions to access a key"},
		{[]any{"DEL", "legacy:a"}, "NOPERM User legacy has no permissions to run the 'del' command"},
		{[]any{"ACQUIRE", "legacy:a", 1000}, "NOPERM User legacy has no permissions to run the 'acquire' command"},
	})
}

// TestRedisLockThroughFollower: a library's lock taken through a follower
// is one of the cluster's, survives the leader's loss, and its
// compare-and-delete works afterwards.
func TestRedisLockThroughFollower(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes...)
	follower := others(nodes, leader)[0]
	fc := follower.client()
	release := script(t, "redsync Mutex.Unlock")
	runRedisSteps(t, fc, []redisStep{
		{[]any{"SET", "legacy:job", "me", "NX", "PX", 60000}, "OK"},
		{[]any{"SET", "legacy:job", "you", "NX", "PX", 60000}, "(nil)"},
		{[]any{"EVAL", release.Text, 1, "legacy:job", "you"}, "0"},
		{[]any{"GET", "legacy:job"}, "me"},
		{[]any{"EVALSHA", script(t, "bsm/redislock Lock.TTL").SHA1, 1, "legacy:job", "me"}, "~60000"},
	})
	// The scripts of two commands and of several keys, and DEL of several
	// keys, pipelined: one round of the follower's proposals.
	obtain, acquireAll := script(t, "bsm/redislock Obtain"), script(t, "redlock 4 lock")
	pipe := fc.Pipeline()
	cmds := []*redis.Cmd{
		pipe.Do(ctx(t), "EVALSHA", obtain.SHA1, 1, "legacy:o", "tok", 3, 60000),
		pipe.Do(ctx(t), "EVALSHA", obtain.SHA1, 1, "legacy:o", "tok", 3, 30000),
		pipe.Do(ctx(t), "EVALSHA", acquireAll.SHA1, 2, "legacy:a", "legacy:b", "v", 60000),
		pipe.Do(ctx(t), "PEXPIRE", "legacy:a", 20000),
		pipe.Do(ctx(t), "DEL", "legacy:a", "legacy:b", "legacy:none"),
		pipe.Do(ctx(t), "EXISTS", "legacy:a", "legacy:o"),
		pipe.Do(ctx(t), "PTTL", "legacy:o"),
	}
	if _, err := pipe.Exec(ctx(t)); err != nil {
		t.Fatalf("the pipeline through the follower: %v", err)
	}
	for i, want := range []string{"OK", "OK", "2", "1", "2", "1", "~30000"} {
		if got := toString(cmds[i].Val()); !replyMatches(got, want) {
			t.Errorf("%v = %q, want %q", cmds[i].Args(), got, want)
		}
	}
	if err := leader.Close(); err != nil {
		t.Logf("closing the leader: %v", err)
	}
	waitLeader(t, others(nodes, leader)...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Through an election a follower may answer TRYAGAIN: go-redis
		// does not retry it here.
		v, err := fc.Do(ctx(t), "EVALSHA", release.SHA1, 1, "legacy:job", "me").Int()
		if err == nil {
			if v != 1 {
				t.Fatalf("the holder's release after the failover = %d, want 1 (the lock survived)", v)
			}
			break
		}
		if !strings.HasPrefix(err.Error(), "TRYAGAIN") || time.Now().After(deadline) {
			t.Fatalf("release after the failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLibraryCycleAllocatesNothing: a Redis lock library's cycle, SET NX PX
// then the release script by EVALSHA, allocates nothing on a single node,
// as the ACQUIRE and RELEASE cycle does not (TestLockCycleAllocatesNothing).
func TestLibraryCycleAllocatesNothing(t *testing.T) {
	srv, err := New(DefaultConfig(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var out bytes.Buffer
	c := newConn(srv, "test", "test")
	c.wr = redcon.NewWriter(&out)
	keys := make([][]byte, 256)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("lock:%07d", i))
	}
	set := [][]byte{[]byte("SET"), nil, []byte("3b2e3c9aeb9f11f1a17702fc00000001"), []byte("PX"), []byte("30000"), []byte("NX")}
	release := [][]byte{[]byte("EVALSHA"), []byte(script(t, "redis-py Lock.release").SHA1), []byte("1"), nil, set[2]}
	n := 0
	cycle := func() {
		k := keys[n%len(keys)]
		n++
		set[1], release[3] = k, k
		c.dispatch(set)
		c.dispatch(release)
		c.flush()
		if out.String() != "+OK\r\n:1\r\n" {
			t.Fatalf("SET and the release answered %q", out.String())
		}
		out.Reset()
	}
	for range 2 * len(keys) { // every buffer grown to fit
		cycle()
	}
	if allocs := testing.AllocsPerRun(2*len(keys), cycle); allocs != 0 {
		t.Fatalf("%v allocations per library cycle, want 0", allocs)
	}
}
