//go:build linux

package chaos

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The short run is the default (part of make test); make chaos passes a
// longer duration and more nodes.
var (
	flagDuration = flag.Duration("chaos.duration", 20*time.Second, "how long the clients run under faults")
	flagNodes    = flag.Int("chaos.nodes", 0, "nodes: 1 (serve --data-dir), 3 or 5 (serve --cluster); 0: 3 when the binary has serve --cluster, else 1")
	flagClients  = flag.Int("chaos.clients", 8, "concurrent clients")
	flagFaults   = flag.String("chaos.faults", "", "comma-separated faults, taken in turn (\"+\" joins faults injected together); default: every fault for the node count; \"none\" for none")
	flagSeed     = flag.Int64("chaos.seed", 0, "random seed (0: from the clock)")
	flagBin      = flag.String("chaos.bin", "", "a leasehold binary (default: build one from this tree)")
	flagLate     = flag.Duration("chaos.late", 0, "how long past its deadline a lease may still be reported live (default: 100ms for one node, 3s for a cluster)")
	flagTTL      = flag.Duration("chaos.ttl", time.Second, "the longest lease ttl clients ask for (the shortest is a fifth of it)")
	flagHold     = flag.Duration("chaos.hold", 1500*time.Millisecond, "how long a kill or partition lasts")
	flagPause    = flag.Duration("chaos.pause", 0, "how long a SIGSTOP lasts (default: the longest ttl plus 1.5s, past ttl and election timeout)")
	flagDir      = flag.String("chaos.dir", "", "keep data, logs and findings here (default: a temporary directory, kept when the run fails)")
	flagNetns    = flag.Bool("chaos.netns", true, "run each node in a network namespace of its own (root; needed by partitions)")
	flagWait     = flag.Duration("chaos.wait", 300*time.Millisecond, "the longest ACQUIRE ... WAIT clients send (0: none)")
	flagRecheck  = flag.String("chaos.recheck", "", "TestRecheck: a history.json to check again (with -chaos.late)")
	flagServe    = flag.String("chaos.serve-args", "", "more leasehold serve flags for every node, space-separated (e.g. \"--io-loops 0\")")
	flagPeers    = flag.Bool("chaos.peers", false, "start a cluster with a static --peers list on every node (default: --bootstrap, then CLUSTER ADDNODE)")
	flagTimeout  = flag.Duration("chaos.op-timeout", 0, "a write with no reply after this (plus its WAIT) has an unknown outcome (default: 1s for one node; 3s for a cluster, whose nodes wait out an election for 2s before TRYAGAIN)")
	flagWithin   = flag.Duration("chaos.unknown-within", 10*time.Second, "an operation of unknown outcome is taken to have taken effect within this long of its call, or never (0: no bound; porcupine may then run out of time on long runs)")
	flagMaxOps   = flag.Int("chaos.max-ops", 1000000, "stop the clients after this many operations, whatever the duration")
	flagCheck    = flag.Duration("chaos.check-timeout", 60*time.Second, "porcupine's time limit per key")
	flagDisk     = flag.Int64("chaos.disk-size", 256<<20, "with a disk-full fault: each node's data directory is a tmpfs of this many bytes (raft-wal preallocates 64 MiB segments)")
)

// buildLeasehold builds the binary from the module root into dir.
func buildLeasehold(t *testing.T, dir string) string {
	t.Helper()
	if *flagBin != "" {
		return *flagBin
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "leasehold")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// hasCluster reports whether the binary knows serve --cluster.
func hasCluster(bin string) bool {
	out, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	return strings.Contains(string(out), "--cluster")
}

func runDir(t *testing.T) string {
	if *flagDir != "" {
		if err := os.MkdirAll(*flagDir, 0o755); err != nil {
			t.Fatal(err)
		}
		return *flagDir
	}
	dir, err := os.MkdirTemp("", "leasehold-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("data, logs and findings kept in %s", dir)
		}
	})
	return dir
}

// TestChaos is the harness's run: the short one by default, the long one
// with -chaos.duration and -chaos.nodes (make chaos).
func TestChaos(t *testing.T) {
	t.Parallel() // its nodes in namespaces named after the process, the others' on ports of their own
	if *flagNetns {
		if err := NetnsAvailable(); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("network namespaces are needed and not available under CI: %v", err)
			}
			t.Skipf("skipped: the chaos harness needs root and ip netns (%v); run as root, or with -chaos.netns=false for kill and pause faults only", err)
		}
	}
	dir := runDir(t)
	bin := buildLeasehold(t, dir)
	nodes := *flagNodes
	if nodes == 0 {
		nodes = 1
		if hasCluster(bin) {
			nodes = 3
		}
	}
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	late := *flagLate
	if late == 0 {
		late = 100 * time.Millisecond
		if nodes > 1 {
			late = 3 * time.Second
		}
	}
	opTimeout := *flagTimeout
	if opTimeout == 0 {
		opTimeout = time.Second
		if nodes > 1 {
			opTimeout = 3 * time.Second
		}
	}
	pause := *flagPause
	if pause == 0 {
		pause = *flagTTL + 1500*time.Millisecond
	}
	faults := SingleFaults
	if nodes > 1 {
		faults = ClusterFaults
		if *flagDuration <= 30*time.Second {
			faults = ShortClusterFaults
		}
	}
	if !*flagNetns {
		faults = []string{"kill", "pause"}
		if nodes > 1 {
			faults = []string{"kill-leader", "kill-follower", "kill-majority", "kill-all", "pause-leader", "pause-follower"}
		}
	}
	switch *flagFaults {
	case "":
	case "none":
		faults = nil
	default:
		faults = strings.Split(*flagFaults, ",")
	}
	var disk int64
	for _, f := range faults {
		if strings.Contains(f, "disk-full") {
			disk = *flagDisk
		}
	}
	cfg := RunConfig{
		DiskSize: disk,
		Bin:      bin,
		Nodes:    nodes,
		Dir:      dir,
		Netns:    *flagNetns,
		Duration: *flagDuration,
		Settle:   2 * time.Second,
		Workload: Workload{
			Clients: *flagClients, Keys: DefaultKeys(), MaxOps: *flagMaxOps, TTLMin: *flagTTL / 5, TTLMax: *flagTTL,
			MaxWait: *flagWait, OpTimeout: opTimeout, Pace: 20 * time.Millisecond, Seed: seed,
		},
		Nemesis:           NemesisConfig{Kinds: faults, Hold: *flagHold, Pause: pause, Quiet: time.Second, Seed: seed, Logf: t.Logf},
		Extra:             strings.Fields(*flagServe),
		Peers:             *flagPeers,
		Late:              late,
		LateThroughFaults: nodes > 1,
		UnknownWithin:     *flagWithin,
		CheckTimeout:      *flagCheck,
		Logf:              t.Logf,
	}
	t.Logf("seed %d, %d node(s), %v, faults %v, run dir %s", seed, cfg.Nodes, cfg.Duration, faults, dir)
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + sum.String())
	if sum.Failed() {
		t.Errorf("violations found; the history is in %s/history.txt", dir)
	}
	if sum.Stats.Granted == 0 {
		t.Errorf("no lease was granted in the whole run")
	}
}

// TestControlServer runs a real single node on loopback with a planted bug
// between it and the clients (tokens lowered now and then): the run must
// fail, by porcupine and by the token checkers.
func TestControlServer(t *testing.T) {
	t.Parallel() // a node of its own on free loopback ports, in a directory of its own
	dir := t.TempDir()
	cfg := RunConfig{
		Bin: buildLeasehold(t, dir), Nodes: 1, Dir: dir, Duration: 3 * time.Second,
		Workload: Workload{Clients: 6, Keys: DefaultKeys(), TTLMin: 50 * time.Millisecond, TTLMax: 300 * time.Millisecond,
			MaxWait: 100 * time.Millisecond, OpTimeout: time.Second, Pace: 5 * time.Millisecond, Seed: 1},
		Late: 100 * time.Millisecond, CheckTimeout: 30 * time.Second,
		Wrap: func(t Target) Target { return LowerTokens(t, 10) },
	}
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	fired := map[string]int{}
	for _, v := range sum.Violations {
		fired[v.Check]++
	}
	t.Logf("%d ops, %d granted, violations %v", sum.Ops, sum.Stats.Granted, fired)
	if !sum.Failed() || fired[CheckTokenOrder]+fired[CheckMaxToken] == 0 {
		t.Fatalf("lowered tokens went unnoticed:\n%s", sum)
	}
	illegal := false
	for _, r := range sum.Linearizable {
		illegal = illegal || r.Result == "Illegal"
	}
	if !illegal {
		t.Errorf("porcupine did not catch lowered tokens:\n%s", sum)
	}
}

// TestRecheck checks a saved history again, say with another -chaos.late.
func TestRecheck(t *testing.T) {
	if *flagRecheck == "" {
		t.Skip("no -chaos.recheck history given")
	}
	ops, late, err := ReadHistory(*flagRecheck)
	if err != nil {
		t.Fatal(err)
	}
	if *flagLate != 0 {
		late.Base = *flagLate
	}
	late.Within = *flagWithin
	for _, r := range Linearizable(ops, late, *flagCheck) {
		t.Logf("porcupine %s: %s (%d ops)", r.Key, r.Result, r.Ops)
		if r.Result == porcupine.Illegal {
			t.Errorf("%s is not linearizable", r.Key)
		}
	}
	for _, v := range Check(ops, late) {
		t.Errorf("%s", v)
	}
}
