//go:build linux

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

// RunConfig is one chaos run.
type RunConfig struct {
	Bin      string
	Nodes    int
	Dir      string // data directories, node logs, porcupine's visualizations
	Netns    bool   // each node in a namespace of its own (needed by partitions and isolate)
	Duration time.Duration
	Settle   time.Duration // the driver goes on this long after the last fault healed
	Workload Workload
	Nemesis  NemesisConfig // no Kinds: no faults
	Extra    []string      // more serve flags
	Peers    bool          // a cluster starts from a static --peers list
	// DiskSize, when set, puts each node's data directory on a tmpfs of
	// this many bytes (needed by disk-full).
	DiskSize int64
	// Late: how long past its deadline a lease may still be reported live
	// (a cluster may run a lease late across a failover, never early);
	// LateThroughFaults adds the time of every fault overlapping the lease
	// (a cluster without a quorum cannot end one).
	Late              time.Duration
	LateThroughFaults bool
	// UnknownWithin: an operation of unknown outcome takes effect within
	// this long of its call, or never (0: no bound; see Lateness.Within).
	UnknownWithin time.Duration
	CheckTimeout  time.Duration // porcupine's time per key
	// Wrap, when set, wraps the target: the control runs plant a bug there.
	Wrap func(Target) Target
	Logf func(format string, args ...interface{})
}

// Summary is what a run did and found.
type Summary struct {
	Started      time.Time
	Nodes        int
	Clients      int
	Elapsed      time.Duration
	Ops          int
	Stats        DriverStats
	Faults       []FaultRecord
	Linearizable []KeyResult
	Violations   []Violation
	Late         Lateness
	Dir          string
}

// Failed reports whether the run found a violation (porcupine's Illegal
// included); a porcupine timeout (Unknown) is not one.
func (s Summary) Failed() bool {
	if len(s.Violations) > 0 {
		return true
	}
	for _, r := range s.Linearizable {
		if r.Result == porcupine.Illegal {
			return true
		}
	}
	return false
}

// Run starts the nodes, drives them under the nemesis, checks the history
// and cleans up everything it started, also on SIGINT/SIGTERM.
func Run(ctx context.Context, cfg RunConfig) (sum Summary, err error) {
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...interface{}) {}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum = Summary{Started: time.Now().UTC(), Nodes: cfg.Nodes, Clients: cfg.Workload.Clients, Dir: cfg.Dir}
	ccfg := ClusterConfig{Bin: cfg.Bin, Nodes: cfg.Nodes, Dir: cfg.Dir, Extra: cfg.Extra, Peers: cfg.Peers, DiskSize: cfg.DiskSize}
	if cfg.Netns {
		SweepStale()
		nw, err := NewNetwork(cfg.Nodes)
		if err != nil {
			return sum, err
		}
		defer nw.Close()
		ccfg.Net = nw
	}
	c, err := NewCluster(ccfg)
	if err != nil {
		return sum, err
	}
	defer c.Close()
	if err := c.StartAll(ctx); err != nil {
		return sum, err
	}
	var target Target = &RedisTarget{Addrs: c.Addrs(), Timeout: cfg.Workload.OpTimeout + cfg.Workload.MaxWait + time.Second}
	if cfg.Wrap != nil {
		target = cfg.Wrap(target)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = Setup(sctx, target, cfg.Workload.Keys)
	cancel()
	if err != nil {
		return sum, err
	}

	h := NewHistory()
	start := time.Now()
	driveCtx, stopDrive := context.WithCancel(ctx)
	defer stopDrive()
	statsc := make(chan DriverStats, 1)
	go func() { statsc <- Drive(driveCtx, target, cfg.Workload, h) }()
	if len(cfg.Nemesis.Kinds) > 0 {
		// The nemesis stops starting faults early enough for the last one to
		// run its course and the driver to see the recovery.
		longest := max(cfg.Nemesis.Hold, cfg.Nemesis.Pause)
		nctx, ncancel := context.WithTimeout(ctx, max(cfg.Duration-longest-cfg.Settle, time.Second))
		sum.Faults = RunNemesis(nctx, c, h, cfg.Nemesis)
		ncancel()
	}
	select {
	case <-ctx.Done():
	case <-time.After(max(time.Until(start.Add(cfg.Duration)), cfg.Settle)):
	}
	stopDrive()
	sum.Stats = <-statsc
	sum.Elapsed = time.Since(start)
	if ctx.Err() != nil {
		return sum, fmt.Errorf("chaos: run interrupted: %w", ctx.Err())
	}

	ops := h.Ops()
	sum.Ops = len(ops)
	Recoveries(sum.Faults, ops)
	logf("checking %d operations", len(ops))
	late := Lateness{Base: cfg.Late, Within: cfg.UnknownWithin}
	if cfg.LateThroughFaults {
		for _, f := range sum.Faults {
			late.Outages = append(late.Outages, [2]int64{f.Start, f.End})
		}
	}
	sum.Late = late
	sum.Linearizable = Linearizable(ops, late, cfg.CheckTimeout)
	sum.Violations = Check(ops, late)
	for _, r := range sum.Linearizable {
		if r.Result == porcupine.Illegal {
			path := filepath.Join(cfg.Dir, "porcupine-"+r.Key+".html")
			if err := porcupine.VisualizePath(Model(late), r.Info, path); err == nil {
				logf("porcupine's view of %s: %s", r.Key, path)
			}
		}
	}
	inconclusive := false
	for _, r := range sum.Linearizable {
		inconclusive = inconclusive || r.Result == porcupine.Unknown
	}
	if sum.Failed() || inconclusive {
		if f, err := os.Create(filepath.Join(cfg.Dir, "history.txt")); err == nil {
			for _, o := range ops {
				fmt.Fprintln(f, o)
			}
			f.Close()
		}
		if f, err := os.Create(filepath.Join(cfg.Dir, "history.json")); err == nil {
			enc := json.NewEncoder(f)
			_ = enc.Encode(late)
			for _, o := range ops {
				_ = enc.Encode(o)
			}
			f.Close()
		}
	}
	return sum, nil
}

func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run %s: %d node(s), %d clients, %v\n", s.Started.Format("2006-01-02 15:04 MST"), s.Nodes, s.Clients, s.Elapsed.Round(100*time.Millisecond))
	kinds := make([]string, 0, len(s.Stats.ByKind))
	for k, n := range s.Stats.ByKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Fprintf(&b, "histories (keys): %d; operations: %d recorded, %d sent (%s); granted %d (MACQUIRE %d), unknown outcome %d, refused %d\n",
		len(s.Linearizable), s.Ops, s.Stats.Ops, strings.Join(kinds, ", "), s.Stats.Granted, s.Stats.MGranted, s.Stats.Unknown, s.Stats.Refused)
	if len(s.Stats.Unexpected) > 0 {
		fmt.Fprintf(&b, "unexpected error replies: %v\n", s.Stats.Unexpected)
		for w, o := range s.Stats.Sample {
			fmt.Fprintf(&b, "  %s, e.g. %s\n", w, o)
		}
	}
	byKind := map[string]int{}
	for _, f := range s.Faults {
		if !f.Skipped {
			byKind[f.Kind]++
		}
	}
	fmt.Fprintf(&b, "faults injected: %d %v\n", len(s.Faults), byKind)
	for _, f := range s.Faults {
		rec := "no grant after it"
		if f.Recovery >= 0 {
			rec = "first grant " + f.Recovery.Round(time.Millisecond).String() + " after"
		}
		switch {
		case f.Skipped:
			rec = "skipped: not supported by the server yet"
		case f.Err != "":
			rec += "; error: " + f.Err
		}
		fmt.Fprintf(&b, "  %-34s %-12s at %6.1fs for %5.1fs: %s\n", f.Kind, strings.Join(f.Nodes, ","), float64(f.Start)/1e9, float64(f.End-f.Start)/1e9, rec)
		if f.Note != "" {
			fmt.Fprintf(&b, "    %s\n", f.Note)
		}
	}
	for _, r := range s.Linearizable {
		fmt.Fprintf(&b, "porcupine %s: %s (%d ops)\n", r.Key, r.Result, r.Ops)
	}
	fmt.Fprintf(&b, "lateness allowed: %v", s.Late.Base)
	if len(s.Late.Outages) > 0 {
		fmt.Fprintf(&b, " plus the faults overlapping a lease")
	}
	fmt.Fprintf(&b, "\nviolations: %d\n", len(s.Violations))
	for i, v := range s.Violations {
		if i == 10 {
			fmt.Fprintf(&b, "  ... %d more\n", len(s.Violations)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", v)
	}
	return b.String()
}

// ReadHistory reads a history.json a failed run wrote (the lateness it was
// checked with, then the operations), to check it again.
func ReadHistory(path string) ([]Op, Lateness, error) {
	var late Lateness
	f, err := os.Open(path)
	if err != nil {
		return nil, late, err
	}
	defer f.Close()
	var ops []Op
	dec := json.NewDecoder(f)
	if err := dec.Decode(&late); err != nil {
		return nil, late, err
	}
	for dec.More() {
		var o Op
		if err := dec.Decode(&o); err != nil {
			return nil, late, err
		}
		ops = append(ops, o)
	}
	return ops, late, nil
}
