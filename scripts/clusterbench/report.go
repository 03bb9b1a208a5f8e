package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/scripts/internal/hist"
)

// line is any JSON line of a run: cycle and failover results, and the
// script's {"mode":"meta","note":...} lines of context.
type line struct {
	Mode       string       `json:"mode"`
	Label      string       `json:"label"`
	Note       string       `json:"note"`
	Pipeline   int          `json:"pipeline"`
	Conns      int          `json:"conns"`
	Cycles     float64      `json:"cycles"`
	CyclesPerS float64      `json:"cycles_per_s"`
	Latency    hist.Latency `json:"latency"`
	ClientCPUS float64      `json:"client_cpu_s"`
	ServerCPUS float64      `json:"server_cpu_s"`
	Ms         float64      `json:"ms"`
	ElectedMs  float64      `json:"elected_ms"`
}

func reportMain(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	in := fs.String("in", "", "the run's JSON lines (required)")
	cluster := fs.String("cluster", "leasehold, 3 nodes", "the label of the leasehold cluster's rows")
	alt := fs.String("cluster-alt", "leasehold, 3 nodes, raft-boltdb", "the label of the rows of the leasehold cluster on the other log store (--raft-log-store bolt)")
	lib := fs.String("cluster-lib", "leasehold, 3 nodes, library cycle", "the label of the rows of the leasehold cluster running a Redis lock library's cycle")
	etcdLabel := fs.String("etcd", "etcd, 3 nodes", "the label of etcd's rows")
	single := fs.String("single", "leasehold, 1 node", "the label of the single node's rows")
	goal := fs.String("goal", "1=7,16=25", "the cluster/etcd ratios aimed at, by -P: P=ratio,... (issue 25's)")
	failGoalMs := fs.Float64("failover-goal-ms", 3000, "the leasehold failover p99 aimed at, ms")
	if err := fs.Parse(args); err != nil {
		return err
	}
	goals, err := parseGoals(*goal)
	if err != nil {
		return err
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	lines, err := readLines(f)
	if err != nil {
		return err
	}
	r := reporter{w: os.Stdout, lines: lines}
	r.meta()
	r.cycles([]string{*cluster, *alt, *lib}, *etcdLabel, *single, goals)
	r.failovers(*cluster, *failGoalMs)
	return nil
}

func readLines(rd io.Reader) ([]line, error) {
	var out []line
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		var l line
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

type reporter struct {
	w     io.Writer
	lines []line
}

func (r reporter) meta() {
	for _, l := range r.lines {
		if l.Mode == "meta" {
			fmt.Fprintf(r.w, "- %s\n", l.Note)
		}
	}
	fmt.Fprintln(r.w)
}

// medianOf is the median of f over ls (0 for none).
func medianOf(ls []line, f func(line) float64) float64 {
	v := make([]float64, len(ls))
	for i, l := range ls {
		v[i] = f(l)
	}
	return median(v)
}

// median of v (0 for none); v is sorted in place.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// cycles prints the cycle rows, then the ratios of each of clusters (those
// that ran) to etcd and to the single node.
func (r reporter) cycles(clusters []string, etcdLabel, single string, goals map[int]float64) {
	type key struct {
		p     int
		label string
	}
	var order []key
	runs := map[key][]line{}
	for _, l := range r.lines {
		if l.Mode != "cycle" {
			continue
		}
		k := key{l.Pipeline, l.Label}
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], l)
	}
	if len(order) == 0 {
		return
	}
	slices.SortStableFunc(order, func(a, b key) int { return a.p - b.p })
	fmt.Fprintln(r.w, "| lock cycle | system | cycles/s | p50 ms | p99 ms | server CPU µs/cycle | client CPU µs/cycle | runs |")
	fmt.Fprintln(r.w, "|---|---|--:|--:|--:|--:|--:|--:|")
	cps := map[key]float64{}
	for _, k := range order {
		ls := runs[k]
		cps[k] = medianOf(ls, func(l line) float64 { return l.CyclesPerS })
		per := func(cpu func(line) float64) func(line) float64 {
			return func(l line) float64 {
				if l.Cycles == 0 {
					return 0
				}
				return cpu(l) / l.Cycles * 1e6
			}
		}
		fmt.Fprintf(r.w, "| -P %d (%d conns) | %s | %.0f | %s | %s | %.1f | %.1f | %d |\n",
			k.p, ls[0].Conns, k.label, cps[k],
			fmtMs(medianOf(ls, func(l line) float64 { return l.Latency.P50Ms })),
			fmtMs(medianOf(ls, func(l line) float64 { return l.Latency.P99Ms })),
			medianOf(ls, per(func(l line) float64 { return l.ServerCPUS })),
			medianOf(ls, per(func(l line) float64 { return l.ClientCPUS })),
			len(ls))
	}
	fmt.Fprintln(r.w)
	fmt.Fprintln(r.w, "| ratio | -P | value | goal | met |")
	fmt.Fprintln(r.w, "|---|--:|--:|---|---|")
	var ps []int
	for _, k := range order {
		if !slices.Contains(ps, k.p) {
			ps = append(ps, k.p)
		}
	}
	for _, p := range ps {
		for _, cluster := range clusters {
			c, e, s := cps[key{p, cluster}], cps[key{p, etcdLabel}], cps[key{p, single}]
			if c > 0 && e > 0 {
				goal, met := "", ""
				if g, ok := goals[p]; ok {
					goal, met = fmt.Sprintf("≥ %g×", g), "yes"
					if c/e < g {
						met = "NO"
					}
				}
				fmt.Fprintf(r.w, "| %s / %s | %d | %.1f× | %s | %s |\n", cluster, etcdLabel, p, c/e, goal, met)
			}
			if c > 0 && s > 0 {
				fmt.Fprintf(r.w, "| %s / %s | %d | %.2f× | | |\n", cluster, single, p, c/s)
			}
		}
	}
	fmt.Fprintln(r.w)
}

func (r reporter) failovers(cluster string, goalMs float64) {
	var order []string
	runs := map[string][]float64{}
	elected := map[string][]float64{}
	for _, l := range r.lines {
		if l.Mode != "failover" {
			continue
		}
		if _, ok := runs[l.Label]; !ok {
			order = append(order, l.Label)
		}
		runs[l.Label] = append(runs[l.Label], l.Ms)
		if l.ElectedMs > 0 {
			elected[l.Label] = append(elected[l.Label], l.ElectedMs)
		}
	}
	if len(order) == 0 {
		return
	}
	fmt.Fprintln(r.w, "| failover: leader killed → first lock granted | runs | p50 ms | max ms | each, ms | a survivor says it leads, p50 ms | goal | met |")
	fmt.Fprintln(r.w, "|---|--:|--:|--:|---|--:|---|---|")
	for _, label := range order {
		ms := runs[label]
		each := make([]string, len(ms))
		for i, v := range ms {
			each[i] = fmt.Sprintf("%.0f", v)
		}
		s := slices.Clone(ms)
		p50 := median(s) // sorts s
		el := ""
		if e := elected[label]; len(e) > 0 {
			el = fmt.Sprintf("%.0f", median(e))
		}
		goal, met := "", ""
		if label == cluster {
			// With fewer than 100 runs the p99 is the largest.
			goal = fmt.Sprintf("p99 ≤ %g ms", goalMs)
			met = "yes"
			if s[len(s)-1] > goalMs {
				met = "NO"
			}
		}
		fmt.Fprintf(r.w, "| %s | %d | %.0f | %.0f | %s | %s | %s | %s |\n", label, len(s), p50, s[len(s)-1], strings.Join(each, ", "), el, goal, met)
	}
	fmt.Fprintln(r.w)
}

// fmtMs is a latency with three significant digits, without an exponent.
func fmtMs(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// parseGoals reads -goal: P=ratio pairs, comma-separated.
func parseGoals(v string) (map[int]float64, error) {
	goals := map[int]float64{}
	for _, pair := range strings.Split(v, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		ps, rs, ok := strings.Cut(pair, "=")
		p, perr := strconv.Atoi(ps)
		r, rerr := strconv.ParseFloat(rs, 64)
		if !ok || perr != nil || rerr != nil || p < 1 || r <= 0 {
			return nil, fmt.Errorf("-goal: %q is not P=ratio", pair)
		}
		goals[p] = r
	}
	return goals, nil
}
