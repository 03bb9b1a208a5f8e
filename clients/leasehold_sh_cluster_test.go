//go:build unix

package clients_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cluster"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
	"github.com/leasehold/leasehold/internal/testutil"
)

// TestLeaseholdShClusterReplies: leasehold.sh's answers to a cluster in
// transition, under a stand-in redis-cli. Hosts named follower* answer
// TRYAGAIN; once* answer UNCERTAIN to their first command and then as the
// server would; unc* answer UNCERTAIN always; the others answer as the
// server would (ACQUIRE 42, RELEASE 0 after an applied UNCERTAIN, 1
// otherwise). Each call of the stand-in is logged on stderr, with its OWNER.
func TestLeaseholdShClusterReplies(t *testing.T) {
	t.Parallel()
	bash := lookTool(t, "bash", "bash")
	lib := repoPath(t, "scripts/leasehold.sh")
	const fakeCLI = `redis-cli() {
	local host=$2 owner=""
	[ "${9:-}" != OWNER ] || owner=" owner ${10}"
	echo "redis-cli $host $6$owner" >&2
	case $host in
	follower*) echo "TRYAGAIN no cluster leader is ready (election in progress); nothing was done, try again"; return 0 ;;
	unc*) echo "UNCERTAIN the leader was lost before the outcome was known"; return 0 ;;
	once*)
		if [ ! -e "$DIR/once" ]; then
			: >"$DIR/once"
			echo "UNCERTAIN the leader was lost before the outcome was known"
			return 0
		fi
		;;
	esac
	case $6 in
	ACQUIRE) echo 42 ;;
	RELEASE) if [ -e "$DIR/once" ]; then echo 0; else echo 1; fi ;;
	*) echo 1 ;;
	esac
}
`
	for _, c := range []struct {
		name, addr, script string
		stdout             string
		says, notSays      []string // on stderr, in order; not on stderr
	}{
		{"a follower first is passed over", "follower:1,leader:2", `leasehold_acquire k 30000`,
			"42\n", []string{"redis-cli follower ACQUIRE owner leasehold.sh:", "redis-cli leader ACQUIRE owner leasehold.sh:"}, []string{"TRYAGAIN no"}},
		{"the address that answered comes first next", "follower:1,leader:2", `leasehold_verify k 1; leasehold_extend k 1 30000; leasehold_release k 1; echo done`,
			"done\n", []string{"redis-cli follower VERIFY", "redis-cli leader VERIFY", "redis-cli leader EXTEND", "redis-cli leader RELEASE"}, []string{"follower EXTEND", "follower RELEASE"}},
		{"acquire is sent again with its OWNER after UNCERTAIN", "once:1", `LEASEHOLD_OWNER=me leasehold_acquire k 30000`,
			"42\n", []string{"redis-cli once ACQUIRE owner me", "redis-cli once ACQUIRE owner me"}, nil},
		{"an anonymous acquire is sent again with the owner it took", "once:1", `leasehold_acquire k 30000`,
			"42\n", []string{"redis-cli once ACQUIRE owner leasehold.sh:"}, nil},
		{"release finding nothing after UNCERTAIN counts as released", "once:1", `leasehold_release k 7 && echo released`,
			"released\n", []string{"redis-cli once RELEASE", "redis-cli once RELEASE"}, nil},
		{"UNCERTAIN to the end is an unknown outcome", "unc:1", `rc=0; LEASEHOLD_RETRY_MS=300 LEASEHOLD_OWNER=me leasehold_acquire k 30000 || rc=$?; echo "status $rc"`,
			"status 2\n", []string{"leasehold_acquire: outcome unknown", "LEASEHOLD_OWNER=me leasehold_acquire k 30000 returns the lease"}, nil},
		{"TRYAGAIN to the end is an error", "follower1:1,follower2:2", `rc=0; LEASEHOLD_RETRY_MS=300 leasehold_verify k 1 || rc=$?; echo "status $rc"`,
			"status 2\n", []string{"redis-cli follower1 VERIFY", "redis-cli follower2 VERIFY", "leasehold_verify: TRYAGAIN no cluster leader"}, []string{"outcome unknown"}},
		{"LEASEHOLD_RETRY_MS is checked", "leader:1", `rc=0; LEASEHOLD_RETRY_MS=soon leasehold_verify k 1 || rc=$?; echo "status $rc"`,
			"status 2\n", []string{"leasehold_verify: LEASEHOLD_RETRY_MS must be a number of milliseconds, got 'soon'"}, []string{"redis-cli"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := testutil.Environ("LH="+lib, "LEASEHOLD_ADDR="+c.addr, "LEASEHOLD_RETRY_MS=5000", "DIR="+t.TempDir())
			p := start(t, env, "", bash, "-c", "set -euo pipefail\nsource \"$LH\"\n"+fakeCLI+c.script+"\n").wait()
			errOut := p.stderr.String()
			if p.stdout.String() != c.stdout {
				t.Errorf("stdout %q, want %q; %s", p.stdout.String(), c.stdout, p)
			}
			rest := errOut
			for _, s := range c.says {
				i := strings.Index(rest, s)
				if i < 0 {
					t.Errorf("stderr lacks %q (in order); %s", s, p)
					break
				}
				rest = rest[i+len(s):]
			}
			for _, s := range c.notSays {
				if strings.Contains(errOut, s) {
					t.Errorf("stderr has %q; %s", s, p)
				}
			}
			if p.elapsed > 4*time.Second {
				t.Errorf("took %s: retried for longer than LEASEHOLD_RETRY_MS", p.elapsed)
			}
		})
	}
}

// TestLeaseholdShCluster: with a follower first in LEASEHOLD_ADDR, a real
// redis-cli takes, verifies, renews and releases locks on a 3-node cluster,
// and a leasehold_with_lock keeps its lease while the leader is lost.
func TestLeaseholdShCluster(t *testing.T) {
	t.Parallel()
	sh := newShell(t)
	// An election follows the leader's loss, as after a crash, most often
	// (see clients/go's TestClusterLeaseSurvivesLeaderLoss).
	nodes := lockserver.StartCluster(t, 3, func(c *cluster.Config) { c.TransferTimeout = time.Nanosecond })
	leader, err := lockserver.WaitLeader(nodes...)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, n := range nodes {
		if n != leader {
			addrs = append(addrs, n.Addr)
		}
	}
	list := strings.Join(append(addrs, leader.Addr), ",")
	p := sh.run(`
tok=$(leasehold_acquire k 30000)
leasehold_verify k "$tok" && echo verified
leasehold_extend k "$tok" 30000 && echo extended
leasehold_release k "$tok" && echo released
`, "LEASEHOLD_ADDR="+list)
	expect(t, p, 0, "verified\nextended\nreleased\n")

	// The leader first, then lost while leasehold_with_lock holds a lease
	// of 6s: the renewals go on through the next leader. (With 3s, a loaded
	// CI machine's election outlasted the lease's margin once.)
	list = strings.Join(append([]string{leader.Addr}, addrs...), ",")
	dir := t.TempDir()
	p = sh.start(`
leasehold_with_lock wl 6000 bash -c 'echo started; while [ ! -e "$DIR/stop" ]; do sleep 0.05; done; source "$LH"; leasehold_verify "$LEASEHOLD_KEY" "$LEASEHOLD_TOKEN" && echo still held'
`, "LEASEHOLD_ADDR="+list, "DIR="+dir)
	p.waitOutput("started\n")
	closed := time.Now()
	if err := leader.Close(); err != nil {
		t.Logf("closing the leader: %v", err)
	}
	var rest []*lockserver.Node
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	if _, err := lockserver.WaitLeader(rest...); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 15*time.Second, "past the lease's deadline as it was at the loss", func() bool { return time.Since(closed) > 7*time.Second })
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.wait()
	expect(t, p, 0, "started\nstill held\n")
}
