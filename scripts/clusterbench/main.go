// Command clusterbench is the load generator of scripts/bench-cluster.sh:
// the same program measures a leasehold cluster, a single leasehold and an
// etcd cluster, so that the lock cycle of each is counted the same way.
//
// It is a module of its own so that the etcd client (gRPC and its
// dependencies) stays out of leasehold's go.mod.
//
//	clusterbench cycle    -target leasehold|etcd -addr HOST:PORT [-c 50 -P 1 -keys 1000000 -ttl 30000 -d 5s -pids P,P,P -label NAME]
//	clusterbench leader   -target leasehold|etcd -addrs A,B,C [-timeout 30s]
//	clusterbench failover -target leasehold|etcd -addrs A,B,C -pids P,P,P [-timeout 15s -label NAME]
//	clusterbench report   -in RAW.jsonl
//
// A lock cycle is, on leasehold, ACQUIRE key ttl then RELEASE key token; on
// etcd, concurrency.NewMutex(session, key).Lock then Unlock, with one
// session (lease) per connection. -P is the cycles in flight per
// connection: leasehold pipelines P ACQUIREs in one write, then the RELEASEs
// of those granted; etcd runs P goroutines on the connection's gRPC client
// and session, gRPC multiplexing their requests over the one connection.
// Latency is per cycle: from the write of the acquire to the reply of the
// release.
//
// leader waits until the cluster agrees on a leader that takes writes and
// prints its address. failover finds the leader, kill -9s its process, and
// measures the time until a lock is granted through a surviving node: on
// leasehold an ACQUIRE sent to each survivor in turn (today a follower
// answers -TRYAGAIN; once followers forward, any node), on etcd a Lock on
// a client of the survivors' endpoints whose session was made before the
// kill. cycle, leader and failover print one JSON line; report turns the
// lines of a run into the markdown table.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/scripts/internal/hist"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "clusterbench:", err)
		}
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: clusterbench cycle|leader|failover|report [flags] (see the package doc)")
	}
	modes := map[string]func([]string) error{
		"cycle":    cycleMain,
		"leader":   leaderMain,
		"failover": failoverMain,
		"report":   reportMain,
	}
	m, ok := modes[args[0]]
	if !ok {
		return fmt.Errorf("unknown mode %q", args[0])
	}
	return m(args[1:])
}

// system is what a mode talks to: a leasehold node or cluster, or etcd.
type system interface {
	// leader returns the index in addrs of the node that leads and takes
	// writes now, or an error if there is none yet.
	leader(addrs []string) (int, error)
	// cycles runs the cycle workload against addr.
	cycles(addr string, o cycleOpts) (*cycleResult, error)
	// failover kills pids[lead] and measures the first grant through the
	// other nodes.
	failover(addrs []string, pids []int, lead int, timeout time.Duration) (*failoverResult, error)
}

func parseSystem(name string) (system, error) {
	switch name {
	case "leasehold":
		return leasehold{}, nil
	case "leasehold-redis":
		return leasehold{redisProto: true}, nil
	case "etcd":
		return etcd{}, nil
	}
	return nil, fmt.Errorf("unknown -target %q: want leasehold, leasehold-redis or etcd", name)
}

// cycleOpts are the cycle mode's flags.
type cycleOpts struct {
	conns, pipeline, keys int
	ttlMs                 int64
	dur                   time.Duration
	prefix                string
}

// cycleResult is the cycle mode's JSON line.
type cycleResult struct {
	Mode        string       `json:"mode"`
	Label       string       `json:"label"`
	Target      string       `json:"target"`
	Addr        string       `json:"addr"`
	Conns       int          `json:"conns"`
	Pipeline    int          `json:"pipeline"`
	Keys        int          `json:"keys"`
	ElapsedS    float64      `json:"elapsed_s"`
	Cycles      uint64       `json:"cycles"` // lock attempts, each released if granted
	Grants      uint64       `json:"grants"`
	Errors      uint64       `json:"errors"`
	FirstError  string       `json:"first_error,omitempty"`
	CyclesPerS  float64      `json:"cycles_per_s"`
	Latency     hist.Latency `json:"latency"` // per cycle
	ClientCPUS  float64      `json:"client_cpu_s"`
	ServerCPUS  float64      `json:"server_cpu_s"` // summed over -pids
	ServerPids  []int        `json:"server_pids,omitempty"`
	ClientProcs int          `json:"client_gomaxprocs"`
}

func cycleMain(args []string) error {
	fs := flag.NewFlagSet("cycle", flag.ContinueOnError)
	target := fs.String("target", "leasehold", "leasehold or etcd")
	addr := fs.String("addr", "", "the node to send to, HOST:PORT (etcd: its client URL's host:port)")
	pidList := fs.String("pids", "", "server processes whose CPU the run reports, comma-separated")
	label := fs.String("label", "", "the row's name in the report")
	var o cycleOpts
	fs.IntVar(&o.conns, "c", 50, "connections")
	fs.IntVar(&o.pipeline, "P", 1, "cycles in flight per connection")
	fs.IntVar(&o.keys, "keys", 1_000_000, "key space")
	fs.Int64Var(&o.ttlMs, "ttl", 30000, "leasehold lease ttl, ms")
	fs.DurationVar(&o.dur, "d", 5*time.Second, "how long to run")
	fs.StringVar(&o.prefix, "prefix", "cb:", "key prefix")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" || o.conns < 1 || o.pipeline < 1 || o.keys < 1 || o.ttlMs < 1 || o.dur <= 0 {
		return errors.New("cycle: -addr is required; -c, -P, -keys, -ttl and -d must be positive")
	}
	sys, err := parseSystem(*target)
	if err != nil {
		return err
	}
	pids, err := parsePids(*pidList)
	if err != nil {
		return err
	}
	s0 := procsCPU(pids)
	c0 := selfCPU()
	res, err := sys.cycles(*addr, o)
	if err != nil {
		return err
	}
	res.ClientCPUS = selfCPU() - c0
	res.ServerCPUS = procsCPU(pids) - s0
	res.ServerPids = pids
	res.Mode, res.Label, res.Target, res.Addr = "cycle", *label, *target, *addr
	res.Conns, res.Pipeline, res.Keys = o.conns, o.pipeline, o.keys
	res.CyclesPerS = float64(res.Cycles) / res.ElapsedS
	res.ClientProcs = runtime.GOMAXPROCS(0)
	return emit(res, res.Errors)
}

func leaderMain(args []string) error {
	fs := flag.NewFlagSet("leader", flag.ContinueOnError)
	target := fs.String("target", "leasehold", "leasehold or etcd")
	addrList := fs.String("addrs", "", "every node, comma-separated")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sys, err := parseSystem(*target)
	if err != nil {
		return err
	}
	addrs := splitList(*addrList)
	if len(addrs) == 0 {
		return errors.New("leader: -addrs is required")
	}
	i, err := waitLeader(sys, addrs, *timeout)
	if err != nil {
		return err
	}
	fmt.Println(addrs[i])
	return nil
}

// waitLeader polls until sys names a leader among addrs.
func waitLeader(sys system, addrs []string, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		i, err := sys.leader(addrs)
		if err == nil {
			return i, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no leader within %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// failoverResult is the failover mode's JSON line.
type failoverResult struct {
	Mode       string  `json:"mode"`
	Label      string  `json:"label"`
	Target     string  `json:"target"`
	Killed     string  `json:"killed"`
	KilledPid  int     `json:"killed_pid"`
	GrantedVia string  `json:"granted_via"`
	Ms         float64 `json:"ms"` // from the kill to the granted reply
	// ElectedMs (leasehold) is when a survivor first said it leads
	// (cluster_role leader or leader-starting), polled after each TRYAGAIN.
	ElectedMs float64        `json:"elected_ms,omitempty"`
	Attempts  int            `json:"attempts"`
	Answers   map[string]int `json:"answers"` // what the attempts before the grant got, by kind
}

func failoverMain(args []string) error {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	target := fs.String("target", "leasehold", "leasehold or etcd")
	addrList := fs.String("addrs", "", "every node, comma-separated")
	pidList := fs.String("pids", "", "their processes, in the same order")
	timeout := fs.Duration("timeout", 15*time.Second, "give up on a grant after this long")
	label := fs.String("label", "", "the row's name in the report")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sys, err := parseSystem(*target)
	if err != nil {
		return err
	}
	addrs := splitList(*addrList)
	pids, err := parsePids(*pidList)
	if err != nil {
		return err
	}
	if len(addrs) < 3 || len(pids) != len(addrs) {
		return errors.New("failover: -addrs needs 3 or more nodes and -pids one process each")
	}
	lead, err := waitLeader(sys, addrs, 30*time.Second)
	if err != nil {
		return err
	}
	res, err := sys.failover(addrs, pids, lead, *timeout)
	if err != nil {
		return err
	}
	res.Mode, res.Label, res.Target = "failover", *label, *target
	res.Killed, res.KilledPid = addrs[lead], pids[lead]
	return emit(res, 0)
}

// others returns addrs without addrs[skip].
func others(addrs []string, skip int) []string {
	var out []string
	for i, a := range addrs {
		if i != skip {
			out = append(out, a)
		}
	}
	return out
}

func emit(v any, errs uint64) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	if errs > 0 {
		return fmt.Errorf("%d errors during the run (first_error in the JSON line)", errs)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parsePids(s string) ([]int, error) {
	var pids []int
	for _, f := range splitList(s) {
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("not a process id: %q", f)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// procsCPU returns the user+system CPU seconds of the processes so far
// (a process that is gone counts 0).
func procsCPU(pids []int) float64 {
	var ticks int64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		// The command name may hold spaces; the fields follow its ')'.
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			k, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + k
		}
	}
	return float64(ticks) / clkTck
}

// clkTck is USER_HZ, 100 on every Linux this runs on.
const clkTck = 100

func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
