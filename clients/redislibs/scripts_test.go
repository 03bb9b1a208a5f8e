//go:build unix

package redislibs_test

import (
	"fmt"
	"testing"
	"time"
)

// scriptLib is a library that a script drives: python/redispy_lock.py or
// node/locks.js with the library's name.
type scriptLib struct {
	// command is the interpreter, the script and its leading arguments;
	// the scenario and the key follow.
	command func(t *testing.T) []string
	// api are the scenarios of the library's calls and the lines each
	// prints before "ok".
	api []scenario
	// leaseholdAPI, when set, replaces api against leasehold, where it
	// differs from Redis as docs/redis-compat.md says.
	leaseholdAPI []scenario
	// redisKey is the Redis key the library keeps a lock named key in.
	redisKey func(key string) string
	// holdSteps are what the hold scenario prints after the go-ahead.
	holdSteps []string
}

type scenario struct {
	name  string
	steps []string
}

func (l scriptLib) run(t *testing.T, tg *target, scenario, key string) *proc {
	t.Helper()
	cmd := append(l.command(t), scenario, key)
	env := []string{"LOCKS_ADDR=" + tg.addr, "LOCKS_TARGET=leasehold"}
	if tg.redis {
		env[1] = "LOCKS_TARGET=redis"
	}
	return start(t, env, cmd[0], cmd[1:]...)
}

// testScriptLib runs the library's scenarios on each target: its calls, the
// counter under contention, and a lock held through a failover.
func testScriptLib(t *testing.T, lib scriptLib) {
	t.Helper()
	lib.command(t) // the tools, or a skip (a failure under CI=true)
	eachTarget(t, func(t *testing.T, tg *target) {
		// The scenarios run at once, each in its process, on keys of
		// their own; their transcripts are checked one by one.
		type run struct {
			name  string
			p     *proc
			steps []string
		}
		var runs []run
		api := lib.api
		if !tg.redis && lib.leaseholdAPI != nil {
			api = lib.leaseholdAPI
		}
		for _, sc := range api {
			runs = append(runs, run{sc.name, lib.run(t, tg, sc.name, "lib:"+sc.name), append(sc.steps, "ok")})
		}
		runs = append(runs, run{"contention", lib.run(t, tg, "count", "lib:count"), []string{"count 100", "overlaps 0", "ok"}})
		for _, r := range runs {
			t.Run(r.name, func(t *testing.T) { expectTranscript(t, r.p, r.steps...) })
		}
		name := "hold"
		if tg.cluster() {
			name = "failover"
		}
		t.Run(name, func(t *testing.T) {
			const key = "lib:hold"
			holdThroughFailover(t, tg, lib.redisKey(key), 15*time.Second, func(t *testing.T) (string, func()) {
				p := lib.run(t, tg, "hold", key)
				owner := p.waitLine(t, "held ")
				return owner, func() {
					if _, err := fmt.Fprintln(p.stdin, "go"); err != nil {
						t.Fatalf("go-ahead: %v: %s", err, p)
					}
					expectTranscript(t, p, append(append([]string{"held " + owner}, lib.holdSteps...), "ok")...)
				}
			})
		})
	})
}

func sameKey(key string) string { return key }

func TestRedisPy(t *testing.T) {
	t.Parallel()
	testScriptLib(t, scriptLib{
		command: func(t *testing.T) []string {
			return []string{python(t), scriptPath(t, "python/redispy_lock.py")}
		},
		api: []scenario{
			{"api", []string{"acquired", "second refused", "extended", "reacquired", "released",
				"acquired after expiry", "stale release refused", "expired release refused", "context manager"}},
			{"notimeout", []string{"lock without a timeout"}},
		},
		leaseholdAPI: []scenario{
			{"api", []string{"acquired", "second refused", "extended", "reacquired", "released",
				"acquired after expiry", "stale release refused", "expired release refused", "context manager"}},
			{"notimeout", []string{"refused without a default ttl", "lock without a timeout"}},
		},
		redisKey:  sameKey,
		holdSteps: []string{"extended", "released"},
	})
}

// nodeLib is the library of node/locks.js named lib.
func nodeLib(lib string, api []string, redisKey func(string) string, holdSteps ...string) scriptLib {
	return scriptLib{
		command: func(t *testing.T) []string {
			return []string{node(t), scriptPath(t, "node/locks.js"), lib}
		},
		api:       []scenario{{"api", api}},
		redisKey:  redisKey,
		holdSteps: holdSteps,
	}
}

func TestRedlock4(t *testing.T) {
	t.Parallel()
	testScriptLib(t, nodeLib("redlock4", []string{"acquired", "second refused", "extended", "released",
		"second release refused", "multi-resource", "acquired after expiry", "stale release refused"},
		sameKey, "extended", "released"))
}

func TestSesamecareRedlock(t *testing.T) {
	t.Parallel()
	testScriptLib(t, nodeLib("sesamecare", []string{"acquired", "second refused", "extended", "released",
		"second release refused", "multi-resource", "using", "acquired after expiry", "stale release refused"},
		sameKey, "extended", "released"))
}

// redis-semaphore's Mutex refreshes its lock by itself (every second in the
// hold scenario, through the failover); it has no extend call.
func TestRedisSemaphoreMutex(t *testing.T) {
	t.Parallel()
	testScriptLib(t, nodeLib("semaphore", []string{"acquired", "second refused", "released", "refreshed",
		"acquired after expiry", "stale release refused", "lost lock reported"},
		func(key string) string { return "mutex:" + key }, "released"))
}
