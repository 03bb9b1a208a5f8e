//go:build linux

package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// The nemesis's faults. A single node takes kill, pause and isolate; the
// rest need a cluster (and, for partitions and isolate, namespaces).
var (
	SingleFaults  = []string{"kill", "pause", "isolate", "pause+isolate"}
	ClusterFaults = []string{
		"kill-leader", "kill-follower", "kill-majority", "kill-all",
		"pause-leader", "pause-follower",
		"partition-minority", "partition-leader", "partition-oneway", "partition-flap",
		"isolate", "kill-follower+partition-leader", "pause-follower+partition-oneway",
		"member", "snapshot", "torn-tail",
	}
	// LogStoreFaults are the faults of a node's Raft log store: torn-tail
	// (SIGKILL, then a torn write after the end of the node's log: see
	// TearTail) and disk-full (the node's data directory out of space for a
	// while: see FillDisk; it needs RunConfig.DiskSize). torn-tail is in
	// ClusterFaults; disk-full mounts a file system per node, so it runs only
	// when asked for.
	LogStoreFaults = []string{"torn-tail", "disk-full"}
	// ShortClusterFaults: a short run's choice, one of each family.
	ShortClusterFaults = []string{"kill-leader", "partition-leader", "pause-follower+partition-oneway", "kill-majority", "partition-flap"}
)

// NemesisConfig says which faults to inject and for how long.
type NemesisConfig struct {
	Kinds []string      // taken in turn; a "+" joins kinds injected together
	Hold  time.Duration // how long a fault lasts
	Pause time.Duration // how long SIGSTOP lasts: past the lease ttl and the election timeout
	Quiet time.Duration // between the end of a fault and the next
	Seed  int64
	Logf  func(format string, args ...interface{})
}

// FaultRecord is one fault injected: when (on the history's clock) and to whom.
type FaultRecord struct {
	Kind       string
	Nodes      []string
	Start, End int64
	Err        string // the fault could not be injected (or healed) in full
	Note       string // what the fault did, when there is more to say (torn-tail, disk-full)
	Skipped    bool   // the server does not support it yet
	// Recovery: from End to the return of the first ACQUIRE sent after End
	// that was granted; -1 when none was.
	Recovery time.Duration
}

type nemesis struct {
	c     *Cluster
	h     *History
	cfg   NemesisConfig
	rng   *rand.Rand
	notes []string // the current fault's, for FaultRecord.Note
}

func (n *nemesis) notef(format string, args ...interface{}) {
	n.notes = append(n.notes, fmt.Sprintf(format, args...))
}

// RunNemesis injects faults in turn until ctx ends, healing each before the
// next and everything before it returns.
func RunNemesis(ctx context.Context, c *Cluster, h *History, cfg NemesisConfig) []FaultRecord {
	n := &nemesis{c: c, h: h, cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed))}
	if n.cfg.Logf == nil {
		n.cfg.Logf = func(string, ...interface{}) {}
	}
	var recs []FaultRecord
	for i := 0; ; i++ {
		if !sleep(ctx, cfg.Quiet) {
			break
		}
		kind := cfg.Kinds[i%len(cfg.Kinds)]
		rec := FaultRecord{Kind: kind, Start: h.Now()}
		n.notes = nil
		var heals []func() error
		var errs []error
		for _, k := range strings.Split(kind, "+") {
			nodes, heal, err := n.inject(ctx, k)
			rec.Nodes = append(rec.Nodes, nodes...)
			if errors.Is(err, ErrNotYet) {
				rec.Skipped = true
			} else if err != nil {
				errs = append(errs, err)
			}
			if heal != nil {
				heals = append(heals, heal)
			}
		}
		hold := cfg.Hold
		if strings.Contains(kind, "pause") {
			hold = cfg.Pause
		}
		if strings.Contains(kind, "disk-full") {
			hold = max(hold, DiskFullHold)
		}
		if !rec.Skipped {
			n.cfg.Logf("nemesis: %s %v for %v", kind, rec.Nodes, hold)
			time.Sleep(hold) // not cut short by ctx: a fault always runs its course, then heals
		}
		for j := len(heals) - 1; j >= 0; j-- {
			if err := heals[j](); err != nil {
				errs = append(errs, err)
			}
		}
		rec.End = h.Now()
		rec.Note = strings.Join(n.notes, "; ")
		if len(errs) > 0 {
			rec.Err = errors.Join(errs...).Error()
			n.cfg.Logf("nemesis: %s: %s", kind, rec.Err)
		}
		recs = append(recs, rec)
	}
	return recs
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// leaderAndFollowers waits a little for a leader; without one it picks a node.
func (n *nemesis) leaderAndFollowers(ctx context.Context) (int, []int) {
	leader := -1
	for end := time.Now().Add(3 * time.Second); leader < 0 && time.Now().Before(end); {
		if leader = n.c.Leader(ctx); leader < 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if leader < 0 {
		leader = n.rng.Intn(len(n.c.Nodes))
	}
	var f []int
	for i := range n.c.Nodes {
		if i != leader {
			f = append(f, i)
		}
	}
	n.rng.Shuffle(len(f), func(i, j int) { f[i], f[j] = f[j], f[i] })
	return leader, f
}

func (n *nemesis) names(idx []int) []string {
	var s []string
	for _, i := range idx {
		s = append(s, n.c.Nodes[i].ID)
	}
	return s
}

// inject starts one fault and returns the nodes it hit and how to heal it.
func (n *nemesis) inject(ctx context.Context, kind string) ([]string, func() error, error) {
	nw := n.c.cfg.Net
	needNet := strings.HasPrefix(kind, "partition") || kind == "isolate"
	if needNet && nw == nil {
		return nil, nil, fmt.Errorf("chaos: %s needs network namespaces", kind)
	}
	if !n.c.Clustered() && kind != "kill" && kind != "pause" && kind != "isolate" {
		return nil, nil, fmt.Errorf("chaos: %s needs a cluster", kind)
	}
	leader, followers := n.leaderAndFollowers(ctx)
	majority := len(n.c.Nodes)/2 + 1
	var hit []int
	switch kind {
	case "kill", "pause", "isolate", "kill-leader", "pause-leader", "partition-leader", "partition-oneway":
		hit = []int{leader}
	case "kill-follower", "pause-follower":
		hit = followers[:1]
	case "torn-tail", "disk-full":
		// The leader or a follower: either may be mid-write.
		hit = []int{leader}
		if n.rng.Intn(2) == 0 {
			hit = followers[:1]
		}
	case "kill-majority":
		hit = append([]int{leader}, followers[:majority-1]...)
	case "kill-all":
		hit = append([]int{leader}, followers...)
	case "partition-minority":
		hit = followers[:len(n.c.Nodes)-majority]
	case "partition-flap":
		hit = []int{leader}
	case "member":
		if err := n.c.RemoveVoter(ctx, followers[0]); err != nil {
			return n.names(followers[:1]), nil, err
		}
		f := followers[0]
		return n.names([]int{f}), func() error { return n.c.AddVoter(context.Background(), f) }, nil
	case "snapshot":
		return n.names([]int{leader}), nil, n.c.Snapshot(ctx, leader)
	default:
		return nil, nil, fmt.Errorf("chaos: unknown fault %q", kind)
	}
	rest := others(len(n.c.Nodes), hit)
	switch {
	case strings.HasPrefix(kind, "kill"):
		for _, i := range hit {
			n.c.Kill(i)
		}
		return n.names(hit), func() error { return n.restart(hit) }, nil
	case kind == "torn-tail":
		i := hit[0]
		n.c.Kill(i)
		what, err := TearTail(n.c.Nodes[i].DataDir, n.rng)
		n.notef("%s: %s", n.c.Nodes[i].ID, what)
		return n.names(hit), func() error { return n.restart(hit) }, err
	case kind == "disk-full":
		return n.diskFull(ctx, hit[0])
	case strings.HasPrefix(kind, "pause"):
		var errs []error
		for _, i := range hit {
			errs = append(errs, n.c.Pause(i))
		}
		return n.names(hit), func() error {
			var errs []error
			for _, i := range hit {
				errs = append(errs, n.c.Resume(i))
			}
			return errors.Join(errs...)
		}, errors.Join(errs...)
	case kind == "isolate":
		return n.names(hit), func() error { return nw.Unblock(hit[0], Host) }, nw.Block(hit[0], Host)
	case kind == "partition-oneway":
		var errs []error
		for _, j := range rest {
			errs = append(errs, nw.Block(hit[0], j))
		}
		return n.names(hit), nw.Heal, errors.Join(errs...)
	case kind == "partition-flap":
		stop, done := make(chan struct{}), make(chan struct{})
		rng := rand.New(rand.NewSource(n.rng.Int63())) // the goroutine's own
		go func() {
			defer close(done)
			cut := false
			for {
				if cut {
					_ = nw.Heal()
				} else {
					i := rng.Intn(len(n.c.Nodes))
					_ = nw.Split([]int{i}, others(len(n.c.Nodes), []int{i}))
				}
				cut = !cut
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(200+rng.Intn(400)) * time.Millisecond):
				}
			}
		}()
		return n.names(hit), func() error { close(stop); <-done; return nw.Heal() }, nil
	default: // partition-minority, partition-leader
		return n.names(hit), nw.Heal, nw.Split(hit, rest)
	}
}

// restart starts the nodes again (all at once: a cluster node may wait for
// its peers).
func (n *nemesis) restart(hit []int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, i := range hit {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := n.c.Start(ctx, i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// DiskFullHold is the least a disk-full fault lasts: long enough for the
// node to write (and fail) more than once.
const DiskFullHold = 4 * time.Second

// diskFull fills node i's data directory and asks it for a snapshot (a write
// that needs new space, where the log may not: raft-wal preallocates its
// segments). The heal frees the space, waits for the node to apply what the
// leader had committed by then, and restarts it (kill -9), so its log must
// open after writes that failed for want of space.
func (n *nemesis) diskFull(ctx context.Context, i int) ([]string, func() error, error) {
	node := n.c.Nodes[i]
	if n.c.cfg.DiskSize == 0 {
		return n.names([]int{i}), nil, fmt.Errorf("chaos: disk-full needs a small disk per node (RunConfig.DiskSize)")
	}
	logFrom := fileSize(node.Log)
	filled, err := FillDisk(node.DataDir)
	if err != nil {
		return n.names([]int{i}), func() error { return FreeDisk(node.DataDir) }, err
	}
	serr := n.c.Snapshot(ctx, i)
	n.notef("%s: %d MiB filled; snapshot while full: %v", node.ID, filled>>20, errOrOK(serr))
	return n.names([]int{i}), func() error {
		var errs []error
		if n.c.Exited(i) {
			errs = append(errs, fmt.Errorf("chaos: %s exited while its disk was full; see %s", node.ID, node.Log))
		}
		errs = append(errs, FreeDisk(node.DataDir))
		n.notef("%d log lines with ENOSPC", countSince(node.Log, logFrom, "no space left on device"))
		start := time.Now()
		if err := n.c.CatchUp(context.Background(), i, 20*time.Second); err != nil {
			errs = append(errs, err)
		} else {
			n.notef("caught up %v after the space was freed", time.Since(start).Round(time.Millisecond))
		}
		n.c.Kill(i)
		errs = append(errs, n.restart([]int{i}))
		return errors.Join(errs...)
	}, nil
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// countSince counts the lines of the file from offset on that hold s.
func countSince(path string, from int64, s string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, from, 1<<40))
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte(s))
}

func others(n int, not []int) []int {
	var o []int
	for i := 0; i < n; i++ {
		skip := false
		for _, j := range not {
			skip = skip || i == j
		}
		if !skip {
			o = append(o, i)
		}
	}
	return o
}

// Recoveries fills in each fault's Recovery from the history.
func Recoveries(recs []FaultRecord, ops []Op) {
	var grants []Op
	for _, o := range ops {
		if o.granted() {
			grants = append(grants, o)
		}
	}
	sort.Slice(grants, func(i, j int) bool { return grants[i].Call < grants[j].Call })
	for i := range recs {
		recs[i].Recovery = -1
		first := int64(Never)
		for _, g := range grants[sort.Search(len(grants), func(j int) bool { return grants[j].Call >= recs[i].End }):] {
			first = min(first, g.Return)
		}
		if first != Never {
			recs[i].Recovery = time.Duration(first - recs[i].End)
		}
	}
}
