package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// record is one measurement written by scripts/bench.sh, one JSON object a
// line. A test runs against both targets, usually several rounds; report
// takes the median over rounds of each field.
type record struct {
	Test   string   `json:"test"`
	Target string   `json:"target"` // leasehold, redis, or meta (Note is a line of context)
	Round  int      `json:"round"`
	Unit   string   `json:"unit"`           // of Value; "ops/s" when empty
	Goal   string   `json:"goal,omitempty"` // ratio>=X, ratio<=X, p99ratio<=X, value<=X, value>=X
	Value  *float64 `json:"value"`
	P50    *float64 `json:"p50_ms"`
	P99    *float64 `json:"p99_ms"`
	Ops    float64  `json:"ops"` // operations done, for CPU per operation
	SrvCPU *float64 `json:"srv_cpu_s"`
	CliCPU *float64 `json:"cli_cpu_s"`
	// Derive, "test A/test B", makes a row of the ratio of the two tests'
	// median values, for each target that has both.
	Derive string `json:"derive,omitempty"`
	Note   string `json:"note,omitempty"`
}

// row is one line of the table.
type row struct {
	Test      string   `json:"test"`
	Unit      string   `json:"unit"`
	Leasehold *float64 `json:"leasehold"`
	Redis     *float64 `json:"redis"`
	Ratio     *float64 `json:"ratio"` // leasehold / redis
	LhP50     *float64 `json:"leasehold_p50_ms"`
	LhP99     *float64 `json:"leasehold_p99_ms"`
	RdP50     *float64 `json:"redis_p50_ms"`
	RdP99     *float64 `json:"redis_p99_ms"`
	LhSrvUs   *float64 `json:"leasehold_server_cpu_us_per_op"`
	LhCliUs   *float64 `json:"leasehold_client_cpu_us_per_op"`
	RdSrvUs   *float64 `json:"redis_server_cpu_us_per_op"`
	RdCliUs   *float64 `json:"redis_client_cpu_us_per_op"`
	Rounds    int      `json:"rounds"`
	Goal      string   `json:"goal,omitempty"`
	Met       string   `json:"met,omitempty"` // yes, NO, or empty without a goal
	Note      string   `json:"note,omitempty"`
}

func reportMain(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	in := fs.String("in", "", "records, one JSON object a line (required)")
	jsonOut := fs.String("json", "", "also write the table as JSON here")
	csvOut := fs.String("csv", "", "also write the table as CSV here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" {
		return fmt.Errorf("report: -in is required")
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	recs, err := readRecords(f)
	if err != nil {
		return err
	}
	rows, meta := buildRows(recs)
	writeMarkdown(os.Stdout, rows, meta)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(map[string]any{"meta": meta, "rows": rows}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if *csvOut != "" {
		if err := writeCSV(*csvOut, rows); err != nil {
			return err
		}
	}
	return nil
}

func readRecords(r io.Reader) ([]record, error) {
	var recs []record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var rec record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		recs = append(recs, rec)
	}
	return recs, sc.Err()
}

// median of the non-nil values; nil when there are none.
func median(vs []float64) *float64 {
	if len(vs) == 0 {
		return nil
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return &m
}

// side collects one target's rounds of one test.
type side struct {
	value, p50, p99, srvUs, cliUs []float64
}

func (s *side) add(r record) {
	appendIf := func(dst *[]float64, v *float64) {
		if v != nil {
			*dst = append(*dst, *v)
		}
	}
	appendIf(&s.value, r.Value)
	appendIf(&s.p50, r.P50)
	appendIf(&s.p99, r.P99)
	if r.Ops > 0 {
		if r.SrvCPU != nil {
			s.srvUs = append(s.srvUs, *r.SrvCPU/r.Ops*1e6)
		}
		if r.CliCPU != nil {
			s.cliUs = append(s.cliUs, *r.CliCPU/r.Ops*1e6)
		}
	}
}

func buildRows(recs []record) ([]row, []string) {
	var order []string
	type group struct {
		lh, rd           side
		unit, goal, note string
		derive           string
		rounds           map[int]bool
	}
	groups := map[string]*group{}
	var meta []string
	for _, r := range recs {
		if r.Target == "meta" {
			meta = append(meta, r.Note)
			continue
		}
		g := groups[r.Test]
		if g == nil {
			g = &group{rounds: map[int]bool{}}
			groups[r.Test] = g
			order = append(order, r.Test)
		}
		g.rounds[r.Round] = true
		if r.Unit != "" {
			g.unit = r.Unit
		}
		if r.Goal != "" {
			g.goal = r.Goal
		}
		if r.Note != "" {
			g.note = r.Note
		}
		if r.Derive != "" {
			g.derive = r.Derive
			continue
		}
		if r.Target == "redis" {
			g.rd.add(r)
		} else {
			g.lh.add(r)
		}
	}
	var rows []row
	for _, name := range order {
		g := groups[name]
		rw := row{Test: name, Unit: g.unit, Goal: g.goal, Note: g.note, Rounds: len(g.rounds)}
		if rw.Unit == "" {
			rw.Unit = "ops/s"
		}
		if g.derive != "" {
			rw.Unit = "x"
			a, b, _ := strings.Cut(g.derive, "/")
			if ga, gb := groups[a], groups[b]; ga != nil && gb != nil {
				rw.Leasehold = quotient(median(ga.lh.value), median(gb.lh.value))
				rw.Redis = quotient(median(ga.rd.value), median(gb.rd.value))
			}
		} else {
			rw.Leasehold, rw.Redis = median(g.lh.value), median(g.rd.value)
			rw.LhP50, rw.LhP99 = median(g.lh.p50), median(g.lh.p99)
			rw.RdP50, rw.RdP99 = median(g.rd.p50), median(g.rd.p99)
			rw.LhSrvUs, rw.LhCliUs = median(g.lh.srvUs), median(g.lh.cliUs)
			rw.RdSrvUs, rw.RdCliUs = median(g.rd.srvUs), median(g.rd.cliUs)
			rw.Ratio = quotient(rw.Leasehold, rw.Redis)
		}
		rw.Met = checkGoal(rw)
		rows = append(rows, rw)
	}
	return rows, meta
}

// quotient is a/b, or nil when either is missing or b is 0.
func quotient(a, b *float64) *float64 {
	if a == nil || b == nil || *b == 0 {
		return nil
	}
	v := *a / *b
	return &v
}

// checkGoal evaluates "what<=X" or "what>=X"; what is ratio (leasehold/redis
// values), p99ratio (leasehold/redis p99) or value (leasehold's value).
func checkGoal(rw row) string {
	if rw.Goal == "" {
		return ""
	}
	op := ">="
	what, lim, ok := strings.Cut(rw.Goal, op)
	if !ok {
		op = "<="
		if what, lim, ok = strings.Cut(rw.Goal, op); !ok {
			return "?"
		}
	}
	limit, err := strconv.ParseFloat(lim, 64)
	if err != nil {
		return "?"
	}
	var v *float64
	switch what {
	case "ratio":
		v = rw.Ratio
	case "value":
		v = rw.Leasehold
	case "p99ratio":
		v = quotient(rw.LhP99, rw.RdP99)
	}
	if v == nil {
		return "?"
	}
	if (op == ">=" && *v >= limit) || (op == "<=" && *v <= limit) {
		return "yes"
	}
	return "NO"
}

// num formats a value for the table in a way that suits its size.
func num(v *float64) string {
	if v == nil || math.IsNaN(*v) {
		return "-"
	}
	a := math.Abs(*v)
	switch {
	case a >= 1000 || *v == math.Trunc(*v):
		return strconv.FormatFloat(*v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(*v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(*v, 'f', 2, 64)
	}
	return strconv.FormatFloat(*v, 'f', 3, 64)
}

func pair(a, b *float64) string {
	if a == nil && b == nil {
		return "-"
	}
	return num(a) + " / " + num(b)
}

func ratioText(v *float64) string {
	if v == nil {
		return "-"
	}
	prec := 2
	if math.Abs(*v) < 0.1 {
		prec = 3
	}
	return strconv.FormatFloat(*v, 'f', prec, 64) + "×"
}

func writeMarkdown(w io.Writer, rows []row, meta []string) {
	for _, m := range meta {
		fmt.Fprintf(w, "%s  \n", m)
	}
	if len(meta) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "| test | unit | leasehold | redis | lh/redis | lh p50 / p99 ms | redis p50 / p99 ms | lh CPU µs/op srv / cli | redis CPU µs/op srv / cli | goal | met |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|---|---|")
	for _, r := range rows {
		lhv, rdv := num(r.Leasehold), num(r.Redis)
		ratio := ratioText(r.Ratio)
		if r.Unit == "x" {
			// A derived row: its value is already a ratio.
			lhv, rdv, ratio = ratioText(r.Leasehold), ratioText(r.Redis), "-"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Test, r.Unit, lhv, rdv, ratio,
			pair(r.LhP50, r.LhP99), pair(r.RdP50, r.RdP99),
			pair(r.LhSrvUs, r.LhCliUs), pair(r.RdSrvUs, r.RdCliUs),
			strings.ReplaceAll(r.Goal, "|", "/"), r.Met)
	}
	notes := false
	for _, r := range rows {
		if r.Note != "" {
			if !notes {
				fmt.Fprintln(w)
				notes = true
			}
			fmt.Fprintf(w, "- %s: %s\n", r.Test, r.Note)
		}
	}
}

func writeCSV(path string, rows []row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	cw.Write([]string{"test", "unit", "leasehold", "redis", "ratio",
		"leasehold_p50_ms", "leasehold_p99_ms", "redis_p50_ms", "redis_p99_ms",
		"leasehold_server_cpu_us_per_op", "leasehold_client_cpu_us_per_op",
		"redis_server_cpu_us_per_op", "redis_client_cpu_us_per_op",
		"rounds", "goal", "met", "note"})
	plain := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'g', 6, 64)
	}
	for _, r := range rows {
		cw.Write([]string{r.Test, r.Unit, plain(r.Leasehold), plain(r.Redis), plain(r.Ratio),
			plain(r.LhP50), plain(r.LhP99), plain(r.RdP50), plain(r.RdP99),
			plain(r.LhSrvUs), plain(r.LhCliUs), plain(r.RdSrvUs), plain(r.RdCliUs),
			strconv.Itoa(r.Rounds), r.Goal, r.Met, r.Note})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
