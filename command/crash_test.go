package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// Crash tests: the binary on a data directory is killed with SIGKILL at a
// random moment while clients take and release leases, and started again on
// the same directory (sometimes killed once more in the middle of that
// start). What a client was told must hold after the restart: every
// acknowledged grant not released since is still live with its token (and
// its owner's retry gets that token back), every acknowledged release stays
// released, and no token granted after the restart is at or below one
// granted before for the same lock. docs/persistence.md promises the first
// two for a process crash under every fsync policy, not only always.
//
// The damage tests then break the directory by hand: garbage after the
// last record of the newest log (a torn write: the start warns and goes
// on), a flipped byte with good records after it, or in an older log
// (corruption: the start is refused, naming the file and the offset, until
// --repair).

// crashTTL is every lease's ttl: long enough that none expires during a
// test, so that each lease the ledger holds live must still verify.
const crashTTL = 120 * time.Second

// The locks the load uses: a small set, so that restarts see the same
// names granted again and again.
var (
	crashExclusive = []string{"x0", "x1", "x2", "x3", "x4", "x5"}
	crashShared    = []string{"r0", "r1", "r2"}
	crashSemaphore = []string{"s0", "s1"} // CREATE ... LIMIT crashPermits
	crashCreated   = []string{"c0", "c1"} // CREATEd and DELETEd by the load
	crashKeys      = slices.Concat(crashExclusive, crashShared, crashSemaphore, crashCreated)
)

const crashPermits = 3

// crashLease is one acknowledged grant.
type crashLease struct {
	key    string
	token  uint64
	owner  string // "" for none
	shared bool
	group  *crashGroup // a MACQUIRE's lease, released with its group
	run    int         // the server run that granted it
	until  time.Time   // its deadline, as the client can bound it
}

// crashGroup is the leases of one MACQUIRE, in the order its keys were named.
type crashGroup struct {
	owner  string
	keys   []string
	leases []*crashLease
}

// crashLedger is what the clients were told, across every run of the
// server on one data directory.
type crashLedger struct {
	t  *testing.T
	mu sync.Mutex
	// floor[key] is the highest token of key acknowledged, or seen in
	// STATUS, before the current run began taking grants; seen[key] the
	// highest so far.
	floor, seen map[string]uint64
	granted     map[string]map[uint64]bool // acknowledged grants by key, to catch a token issued twice
	live        map[*crashLease]bool       // acknowledged and not released
	released    []*crashLease              // acknowledged releases
	checked     int                        // released[:checked] were verified after a restart
	grants      int                        // acknowledged grants, in all
}

func newCrashLedger(t *testing.T) *crashLedger {
	return &crashLedger{t: t, floor: map[string]uint64{}, seen: map[string]uint64{},
		granted: map[string]map[uint64]bool{}, live: map[*crashLease]bool{}}
}

// grant records acknowledged grants of run: each token must be above
// every token of its lock from before the run, and new for its lock.
func (l *crashLedger) grant(run int, what string, leases ...*crashLease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range leases {
		if x.token <= l.floor[x.key] {
			l.t.Errorf("run %d: %s granted %s token %d, not above %d, the highest token of %s before the restart",
				run, what, x.key, x.token, l.floor[x.key], x.key)
		}
		if l.granted[x.key] == nil {
			l.granted[x.key] = map[uint64]bool{}
		}
		if l.granted[x.key][x.token] {
			l.t.Errorf("run %d: %s granted %s token %d, which an earlier grant had", run, what, x.key, x.token)
		}
		l.granted[x.key][x.token] = true
		l.seen[x.key] = max(l.seen[x.key], x.token)
		l.live[x] = true
		l.grants++
	}
}

// release records an acknowledged release.
func (l *crashLedger) release(leases ...*crashLease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range leases {
		delete(l.live, x)
		l.released = append(l.released, x)
	}
}

// lost records a release whose reply did not arrive: it may or may not have
// happened.
func (l *crashLedger) lost(leases ...*crashLease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range leases {
		delete(l.live, x)
	}
}

// observe records a token of key seen in STATUS.
func (l *crashLedger) observe(key string, tok uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[key] = max(l.seen[key], tok)
}

// beginRun: every token seen so far was granted before the run.
func (l *crashLedger) beginRun() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range l.seen {
		l.floor[k] = v
	}
}

func (l *crashLedger) liveLeases() []*crashLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*crashLease
	for x := range l.live {
		out = append(out, x)
	}
	return out
}

// crashConfig is one crash test.
type crashConfig struct {
	fsync  string
	rounds int
	// afterKill, when set, damages the directory after each kill and
	// returns the file it damaged; the next start must warn, naming it.
	afterKill func(t *testing.T, dir string, round int) string
}

// crashArgs are serve's arguments on dir, extra after.
func crashArgs(dir string, extra ...string) []string {
	return append([]string{"--data-dir", dir, "--shards", "8"}, extra...)
}

// crashServe starts the binary on dir and waits until it answers PING.
func crashServe(t *testing.T, dir string, extra ...string) (*process, *redis.Client) {
	t.Helper()
	p, addr := serveBinary(t, serveArgs(crashArgs(dir, extra...)...))
	rdb := crashClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("leasehold on %s did not answer PING: %v\nstderr: %s", dir, err, p.stderr)
	}
	return p, rdb
}

// crashKill sends SIGKILL and waits for the process to go.
func crashKill(p *process) {
	p.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(commandTimeout):
		p.t.Fatalf("leasehold survived SIGKILL for %s", commandTimeout)
	}
}

// crashWarnings returns the messages of the process's warn-level log lines.
func crashWarnings(p *process) []string {
	var out []string
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["level"] == "warn" {
			out = append(out, fmt.Sprint(m["message"]))
		}
	}
	return out
}

// crashClient is client without go-redis's dial retries (5, 100ms apart):
// a dial to a killed server fails at once, as the test wants.
func crashClient(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second,
		MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func crashDo(rdb *redis.Client, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return rdb.Do(ctx, args...).Result()
}

// crashAcked reports whether a reply arrived: a value, nil, or an error reply.
func crashAcked(err error) bool {
	var re redis.Error
	return err == nil || errors.Is(err, redis.Nil) || errors.As(err, &re)
}

// crashWorker runs load until stop: it takes leases of every kind, extends
// and releases them, recording what the server acknowledged.
func crashWorker(t *testing.T, l *crashLedger, rdb *redis.Client, run, id int, seed uint64, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, uint64(id)))
	var held [][]*crashLease // each a single lease or a MACQUIRE's group
	seq := 0
	owner := func() string {
		if rng.IntN(2) == 0 {
			return ""
		}
		seq++
		return fmt.Sprintf("w%d-run%d-%d", id, run, seq) // one per request: no retries in the load
	}
	ttl := crashTTL.Milliseconds()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if len(held) >= 3 || len(held) > 0 && rng.IntN(5) < 2 {
			n := rng.IntN(len(held))
			ls := held[n]
			if rng.IntN(4) == 0 {
				v, err := crashDo(rdb, "EXTEND", ls[0].key, ls[0].token, ttl)
				switch {
				case !crashAcked(err):
				case err != nil || v != int64(1):
					t.Errorf("run %d: EXTEND %s %d = %v, %v: an acknowledged lease is lost", run, ls[0].key, ls[0].token, v, err)
				default:
					ls[0].until = time.Now().Add(crashTTL)
				}
				continue
			}
			held = slices.Delete(held, n, n+1)
			args := []any{"RELEASE", ls[0].key, ls[0].token}
			if ls[0].group != nil {
				args = []any{"MRELEASE"}
				for _, x := range ls {
					args = append(args, x.key, x.token)
				}
			}
			v, err := crashDo(rdb, args...)
			switch {
			case !crashAcked(err):
				l.lost(ls...)
			case err != nil || v != int64(len(ls)):
				t.Errorf("run %d: %q = %v, %v; want %d: an acknowledged lease is lost", run, args, v, err, len(ls))
				l.lost(ls...)
			default:
				l.release(ls...)
			}
			continue
		}
		switch op := rng.IntN(10); {
		case op < 6: // ACQUIRE of an exclusive lock, a reader, a permit
			x := &crashLease{run: run, owner: owner()}
			args := []any{"ACQUIRE", "", ttl}
			switch op {
			case 0, 1, 2:
				x.key = crashExclusive[rng.IntN(len(crashExclusive))]
			case 3, 4:
				x.key, x.shared = crashShared[rng.IntN(len(crashShared))], true
				args = append(args, "SHARED")
			case 5:
				x.key = crashSemaphore[rng.IntN(len(crashSemaphore))]
			}
			args[1] = x.key
			if x.owner != "" {
				args = append(args, "OWNER", x.owner)
			}
			before := time.Now()
			v, err := crashDo(rdb, args...)
			switch {
			case !crashAcked(err), errors.Is(err, redis.Nil):
			case err != nil:
				t.Errorf("run %d: %q: %v", run, args, err)
			default:
				x.token, x.until = uint64(v.(int64)), before.Add(crashTTL)
				l.grant(run, fmt.Sprintf("%q", args), x)
				held = append(held, []*crashLease{x})
			}
		case op < 8: // MACQUIRE of exclusive locks
			g := &crashGroup{owner: owner()}
			for _, n := range rng.Perm(len(crashExclusive))[:2+rng.IntN(2)] {
				g.keys = append(g.keys, crashExclusive[n])
			}
			args := []any{"MACQUIRE", ttl, len(g.keys)}
			for _, k := range g.keys {
				args = append(args, k)
			}
			if g.owner != "" {
				args = append(args, "OWNER", g.owner)
			}
			before := time.Now()
			v, err := crashDo(rdb, args...)
			switch {
			case !crashAcked(err), errors.Is(err, redis.Nil):
			case err != nil:
				t.Errorf("run %d: %q: %v", run, args, err)
			default:
				toks := v.([]any)
				for n, k := range g.keys {
					g.leases = append(g.leases, &crashLease{key: k, token: uint64(toks[n].(int64)), owner: g.owner, group: g, run: run, until: before.Add(crashTTL)})
				}
				l.grant(run, fmt.Sprintf("%q", args), g.leases...)
				held = append(held, g.leases)
			}
		default: // a created lock: CREATE, ACQUIRE and release, DELETE
			key := crashCreated[rng.IntN(len(crashCreated))]
			if _, err := crashDo(rdb, "CREATE", key, "TTL", ttl); crashAcked(err) && err != nil {
				t.Errorf("run %d: CREATE %s: %v", run, key, err)
			}
			x := &crashLease{key: key, run: run}
			before := time.Now()
			// Without a ttl, the lock's default ttl; unless another worker
			// DELETEd the lock meanwhile, leaving none.
			v, err := crashDo(rdb, "ACQUIRE", key)
			switch {
			case !crashAcked(err), errors.Is(err, redis.Nil):
			case err != nil && strings.Contains(err.Error(), "no default ttl"):
			case err != nil:
				t.Errorf("run %d: ACQUIRE %s: %v", run, key, err)
			default:
				x.token, x.until = uint64(v.(int64)), before.Add(crashTTL)
				l.grant(run, "ACQUIRE "+key, x)
				if v, err := crashDo(rdb, "RELEASE", key, x.token); !crashAcked(err) {
					l.lost(x)
				} else if v != int64(1) {
					t.Errorf("run %d: RELEASE %s %d = %v, %v", run, key, x.token, v, err)
				} else {
					l.release(x)
				}
			}
			if _, err := crashDo(rdb, "DELETE", key); crashAcked(err) && err != nil && !strings.HasPrefix(err.Error(), "INUSE") {
				t.Errorf("run %d: DELETE %s: %v", run, key, err)
			}
		}
	}
}

// verifyAfterRestart checks what the ledger says against a restarted
// server, then releases every lease of the load's locks, recording their
// tokens, so that the next run starts on free locks.
func verifyAfterRestart(t *testing.T, l *crashLedger, rdb *redis.Client, run int) {
	t.Helper()
	ttl := crashTTL.Milliseconds()
	for _, x := range l.liveLeases() {
		if time.Until(x.until) < 5*time.Second {
			continue // too near its deadline to tell (the test runs far shorter than crashTTL)
		}
		if v, err := crashDo(rdb, "VERIFY", x.key, x.token); err != nil || v != int64(1) {
			t.Errorf("run %d: VERIFY %s %d = %v, %v: a grant acknowledged in run %d (owner %q) was lost",
				run, x.key, x.token, v, err, x.run, x.owner)
			continue
		}
		// A retry by its owner gets the same token back.
		switch {
		case x.owner == "":
		case x.group != nil:
			if x != x.group.leases[0] {
				continue
			}
			args := []any{"MACQUIRE", ttl, len(x.group.keys)}
			for _, k := range x.group.keys {
				args = append(args, k)
			}
			args = append(args, "OWNER", x.owner)
			v, err := crashDo(rdb, args...)
			var got []uint64
			if s, ok := v.([]any); ok {
				for _, e := range s {
					n, _ := e.(int64)
					got = append(got, uint64(n))
				}
			}
			var want []uint64
			for _, y := range x.group.leases {
				want = append(want, y.token)
			}
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("run %d: owner retry %q = %v, %v; want the tokens %d granted in run %d", run, args, v, err, want, x.run)
			}
		default:
			args := []any{"ACQUIRE", x.key, ttl}
			if x.shared {
				args = append(args, "SHARED")
			}
			args = append(args, "OWNER", x.owner)
			if v, err := crashDo(rdb, args...); err != nil || v != int64(x.token) {
				t.Errorf("run %d: owner retry %q = %v, %v; want the token %d granted in run %d", run, args, v, err, x.token, x.run)
			}
		}
	}
	// Every release acknowledged in the run just killed, and a sample of
	// older ones (checked before, but a later replay must not revive them).
	l.mu.Lock()
	released := slices.Clone(l.released[l.checked:])
	for range 100 {
		if l.checked > 0 {
			released = append(released, l.released[rand.IntN(l.checked)])
		}
	}
	l.checked = len(l.released)
	l.mu.Unlock()
	for _, x := range released {
		if v, err := crashDo(rdb, "VERIFY", x.key, x.token); err != nil || v != int64(0) {
			t.Errorf("run %d: VERIFY %s %d = %v, %v: a release acknowledged in run %d was lost", run, x.key, x.token, v, err, x.run)
		}
	}
	for _, key := range crashSemaphore {
		st := crashStatus(t, rdb, key)
		if st["created"] != "1" || st["limit"] != strconv.Itoa(crashPermits) {
			t.Errorf("run %d: STATUS %s = %v, want the semaphore CREATEd with LIMIT %d", run, key, st, crashPermits)
		}
	}
	// Free the load's locks: release every live lease, the ledger's and
	// those whose grant was never acknowledged.
	for _, key := range crashKeys {
		st := crashStatus(t, rdb, key)
		if st == nil {
			continue
		}
		if n, err := strconv.ParseUint(st["last-token"], 10, 64); err == nil {
			l.observe(key, n)
		}
		for _, s := range strings.Fields(st["holders"]) { // every live lease, the exclusive one too
			tok, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("STATUS %s: %v", key, st)
			}
			l.observe(key, tok)
			if v, err := crashDo(rdb, "RELEASE", key, tok); err != nil || v != int64(1) {
				t.Errorf("run %d: RELEASE %s %d (from STATUS) = %v, %v", run, key, tok, v, err)
				continue
			}
			for _, x := range l.liveLeases() {
				if x.key == key && x.token == tok {
					l.release(x)
				}
			}
		}
	}
}

// crashStatus is STATUS of key as a map (holders as their tokens), nil for
// an unknown lock.
func crashStatus(t *testing.T, rdb *redis.Client, key string) map[string]string {
	t.Helper()
	v, err := crashDo(rdb, "STATUS", key)
	if errors.Is(err, redis.Nil) {
		return nil
	}
	s, ok := v.([]any)
	if err != nil || !ok || len(s)%2 != 0 {
		t.Fatalf("STATUS %s = %#v, %v", key, v, err)
	}
	m := map[string]string{}
	for i := 0; i < len(s); i += 2 {
		k, _ := s[i].(string)
		if hs, ok := s[i+1].([]any); ok {
			var toks []string
			for _, h := range hs {
				if f, ok := h.([]any); ok && len(f) >= 2 {
					toks = append(toks, fmt.Sprint(f[1]))
				}
			}
			m[k] = strings.Join(toks, " ")
			continue
		}
		m[k] = fmt.Sprint(s[i+1])
	}
	return m
}

// runCrash runs the crash rounds of cfg on a fresh data directory.
func runCrash(t *testing.T, cfg crashConfig) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	l := newCrashLedger(t)
	started := time.Now()
	damaged := ""
	var kills []time.Duration
	earlyKills := 0
	for run := 0; ; run++ {
		extra := []string{"--fsync", cfg.fsync}
		if run%2 == 1 {
			extra = append(extra, "--io-loops", "0") // both transports
		}
		if run > 0 && cfg.afterKill == nil && rng.IntN(3) == 0 {
			// A crash in the middle of the start: recovery, or just after.
			_, args := serveArgs(crashArgs(dir, extra...)...)(freeAddr(t))
			q := start(t, nil, args...)
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			crashKill(q)
			earlyKills++
		}
		p, rdb := crashServe(t, dir, extra...)
		if run > 0 {
			if damaged != "" && !slices.ContainsFunc(crashWarnings(p), func(w string) bool { return strings.Contains(w, damaged) }) {
				t.Errorf("run %d: no warning about %s in the log:\n%s", run, damaged, p.stderr)
			}
			verifyAfterRestart(t, l, rdb, run)
		}
		if t.Failed() || run == cfg.rounds {
			// Last, a clean stop and start: the directory the crashes
			// left (the damaged logs now older than the newest) reads
			// again, and the same leases are there; the stop answers a
			// parked waiter and releases an EPHEMERAL lease
			// (shutdown_test.go).
			probe := newShutdownProbe(t, rdb)
			if exit := p.stop(syscall.SIGTERM); exit != 0 {
				t.Errorf("exit status %d after SIGTERM\nstderr: %s", exit, p.stderr)
			}
			probe.told(t)
			if !t.Failed() {
				p, rdb = crashServe(t, dir, extra...)
				if w := crashWarnings(p); len(w) > 0 {
					t.Errorf("warnings after a clean stop: %q", w)
				}
				probe.kept(t, rdb)
				verifyAfterRestart(t, l, rdb, run+1)
				p.stop(syscall.SIGTERM)
			}
			break
		}
		l.beginRun()
		if run == 0 {
			for _, key := range crashSemaphore {
				if v, err := crashDo(rdb, "CREATE", key, "LIMIT", crashPermits); err != nil || v != int64(1) {
					t.Fatalf("CREATE %s = %v, %v", key, v, err)
				}
			}
		}
		// A lease nobody releases, kept across every later restart.
		sticky := &crashLease{key: fmt.Sprintf("sticky-%d", run), owner: fmt.Sprintf("sticky-%d", run), run: run, until: time.Now().Add(crashTTL)}
		v, err := crashDo(rdb, "ACQUIRE", sticky.key, crashTTL.Milliseconds(), "OWNER", sticky.owner)
		if err != nil {
			t.Fatalf("ACQUIRE %s: %v", sticky.key, err)
		}
		sticky.token = uint64(v.(int64))
		l.grant(run, "ACQUIRE "+sticky.key, sticky)

		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			wrdb := crashClient(t, rdb.Options().Addr)
			go func() {
				defer wg.Done()
				crashWorker(t, l, wrdb, run, w, seed+uint64(run), stop)
			}()
		}
		delay := time.Duration(20+rng.IntN(280)) * time.Millisecond
		kills = append(kills, delay)
		time.Sleep(delay) // the kill's random moment, in the middle of the load
		crashKill(p)
		close(stop)
		wg.Wait()
		if cfg.afterKill != nil {
			damaged = cfg.afterKill(t, dir, run)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%d runs killed after %v, %d more while starting, in %s; %d grants acknowledged, %d releases",
		cfg.rounds, kills, earlyKills, time.Since(started).Round(time.Millisecond), l.grants, len(l.released))
	if l.grants < cfg.rounds*6 { // a sticky lease a run, and at least a few more
		t.Errorf("only %d grants acknowledged in %d runs: the load did not run", l.grants, cfg.rounds)
	}
	if time.Since(started) > crashTTL/2 {
		t.Errorf("the test took %s, too near the leases' ttl %s to check them all", time.Since(started), crashTTL)
	}
}

func TestCrashFsyncAlways(t *testing.T) {
	t.Parallel()
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	runCrash(t, crashConfig{fsync: "always", rounds: rounds})
}

// Under everysec and no, a process crash (not an OS crash) loses nothing
// acknowledged either: every reply follows the write to the OS
// (docs/persistence.md).
func TestCrashFsyncEverySec(t *testing.T) {
	t.Parallel()
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	runCrash(t, crashConfig{fsync: "everysec", rounds: rounds})
}

func TestCrashFsyncNo(t *testing.T) {
	t.Parallel()
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	runCrash(t, crashConfig{fsync: "no", rounds: rounds})
}

// crashNewestLog returns the path of the highest-numbered log in dir.
func crashNewestLog(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "log-*.lh"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no log in %s: %v", dir, err)
	}
	slices.Sort(logs) // fixed-width numbers
	return logs[len(logs)-1]
}

// TestTornTailAfterCrash appends garbage to the newest log after each kill,
// as a write torn by the crash would leave it: the server must start, warn,
// and keep every acknowledged grant.
func TestTornTailAfterCrash(t *testing.T) {
	t.Parallel()
	garbage := [][]byte{
		{0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}, // a bad chunk header
		[]byte("abc"), // shorter than a chunk header
		{0x11, 0x22, 0x33, 0x44, 0x10, 0x00, 0x01, 'p', 'a', 'r', 't'}, // a full chunk's header, its payload cut short
	}
	runCrash(t, crashConfig{fsync: "always", rounds: 4,
		afterKill: func(t *testing.T, dir string, round int) string {
			path := crashNewestLog(t, dir)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(garbage[round%len(garbage)]); err != nil {
				t.Fatal(err)
			}
			return path
		}})
}

// crashFillLog fills dir with a log bigger than two record blocks (64 KiB)
// under one clean run, and returns the tokens granted, by key.
func crashFillLog(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	p, rdb := crashServe(t, dir, "--fsync", "always")
	toks := map[string]uint64{}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	for batch := 0; ; batch++ {
		fi, err := os.Stat(crashNewestLog(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 80<<10 {
			break
		}
		if batch > 200 {
			t.Fatalf("the log is %d bytes after %d grants", fi.Size(), len(toks))
		}
		pipe := rdb.Pipeline()
		cmds := map[string]*redis.Cmd{}
		for n := range 100 {
			key := fmt.Sprintf("lock-%d-%d", batch, n)
			cmds[key] = pipe.Do(ctx, "ACQUIRE", key, crashTTL.Milliseconds(), "OWNER", "filler")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for key, c := range cmds {
			tok, err := c.Uint64()
			if err != nil {
				t.Fatalf("ACQUIRE %s: %v", key, err)
			}
			toks[key] = tok
		}
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
	}
	return toks
}

// crashRefusesToStart runs the binary on dir and expects it to exit non-zero,
// naming path as corrupt at some offset and mentioning --repair. It
// returns the offset.
func crashRefusesToStart(t *testing.T, dir, path string) int64 {
	t.Helper()
	p := start(t, nil, "serve", "--addr", freeAddr(t), "--data-dir", dir, "--log-format", "json")
	select {
	case <-p.done:
	case <-time.After(commandTimeout):
		t.Fatalf("leasehold started on a corrupt data directory\nstderr: %s", p.stderr)
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("leasehold on a corrupt data directory: %v, want a non-zero exit\nstderr: %s", p.err, p.stderr)
	}
	stderr := p.stderr.String()
	m := regexp.MustCompile(regexp.QuoteMeta(path) + ` is corrupt at offset (\d+)`).FindStringSubmatch(stderr)
	if m == nil || !strings.Contains(stderr, "--repair") {
		t.Fatalf("stderr %q: want it to name %s, the offset and --repair", stderr, path)
	}
	off, _ := strconv.ParseInt(m[1], 10, 64)
	return off
}

// TestCorruptLogRefusesToStart flips a byte early in a log that has good
// records after the damage: that is not a torn write, and the server must
// refuse to start unless told --repair, which cuts the log there.
func TestCorruptLogRefusesToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	toks := crashFillLog(t, dir)
	logs, _ := filepath.Glob(filepath.Join(dir, "log-*.lh"))
	if len(logs) != 1 {
		t.Fatalf("logs %q, want one", logs)
	}
	path := logs[0]
	const flip = 100 // in block 0; blocks 1 and 2 hold good records
	testutil.FlipByte(t, path, flip)
	off := crashRefusesToStart(t, dir, path)
	if off > flip || off < 0 {
		t.Errorf("reported offset %d, want the start of the record holding byte %d", off, flip)
	}
	crashRefusesToStart(t, dir, path) // a refused start changes nothing

	p, rdb := crashServe(t, dir, "--repair")
	if !slices.ContainsFunc(crashWarnings(p), func(w string) bool { return strings.Contains(w, path) }) {
		t.Errorf("no warning about the repair of %s:\n%s", path, p.stderr)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != off {
		t.Errorf("after --repair %s: %v, %v; want it cut at %d", path, fi, err, off)
	}
	// The grants from the damage on are gone; tokens still rise (the
	// first reservation, before the damage, survived).
	var top uint64
	for _, tok := range toks {
		top = max(top, tok)
	}
	var kept int
	for key, tok := range toks {
		v, err := crashDo(rdb, "VERIFY", key, tok)
		if err != nil {
			t.Fatal(err)
		}
		kept += int(v.(int64))
	}
	if kept == len(toks) {
		t.Errorf("all %d grants survived a repair that cut the log at %d", kept, off)
	}
	tok, err := crashDo(rdb, "ACQUIRE", "after-repair", 60000)
	if err != nil || uint64(tok.(int64)) <= top {
		t.Errorf("ACQUIRE after the repair = %v, %v; want a token above %d", tok, err, top)
	}
	if exit := p.stop(syscall.SIGTERM); exit != 0 {
		t.Fatalf("exit status %d\nstderr: %s", exit, p.stderr)
	}
	// The repaired directory starts without --repair, with what it kept.
	p, rdb = crashServe(t, dir)
	if w := crashWarnings(p); len(w) > 0 {
		t.Errorf("warnings after the repair: %q", w)
	}
	if v, err := crashDo(rdb, "VERIFY", "after-repair", tok); err != nil || v != int64(1) {
		t.Errorf("VERIFY after-repair = %v, %v", v, err)
	}
	p.stop(syscall.SIGTERM)
}

// TestCorruptOlderLogRefusesToStart damages the last record of a log that
// a later run's log follows: even at its very end that is corruption, not
// a torn write (the tear can only be in the newest log).
func TestCorruptOlderLogRefusesToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, rdb := crashServe(t, dir)
	first, err := crashDo(rdb, "ACQUIRE", "first", 60000)
	if err != nil {
		t.Fatal(err)
	}
	last, err := crashDo(rdb, "ACQUIRE", "last", 60000)
	if err != nil {
		t.Fatal(err)
	}
	p.stop(syscall.SIGTERM)
	old := crashNewestLog(t, dir)
	p, rdb = crashServe(t, dir)
	later, err := crashDo(rdb, "ACQUIRE", "later", 60000)
	if err != nil {
		t.Fatal(err)
	}
	p.stop(syscall.SIGTERM)
	newer := crashNewestLog(t, dir)
	if newer == old {
		t.Fatalf("the second run wrote to %s, the first run's log", old)
	}
	fi, err := os.Stat(old)
	if err != nil {
		t.Fatal(err)
	}
	testutil.FlipByte(t, old, fi.Size()-2) // in the payload of the last record: "last"'s grant
	crashRefusesToStart(t, dir, old)

	p, rdb = crashServe(t, dir, "--repair")
	for key, want := range map[string]int64{"first": 1, "last": 0, "later": 0} {
		tok := map[string]any{"first": first, "last": last, "later": later}[key]
		if v, err := crashDo(rdb, "VERIFY", key, tok); err != nil || v != want {
			t.Errorf("after --repair: VERIFY %s = %v, %v; want %d", key, v, err, want)
		}
	}
	p.stop(syscall.SIGTERM)
}
