package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	in := `{"mode":"meta","note":"date: today"}
{"mode":"cycle","label":"lh3","pipeline":1,"conns":50,"cycles":1000,"cycles_per_s":1000,"server_cpu_s":0.5,"latency":{"p50_ms":2,"p99_ms":9}}
{"mode":"cycle","label":"lh3","pipeline":1,"conns":50,"cycles":3000,"cycles_per_s":3000,"latency":{"p50_ms":1,"p99_ms":5}}
{"mode":"cycle","label":"lh3","pipeline":1,"conns":50,"cycles":2000,"cycles_per_s":2000,"latency":{"p50_ms":3,"p99_ms":7}}
{"mode":"cycle","label":"etcd","pipeline":1,"conns":50,"cycles":500,"cycles_per_s":500}
{"mode":"cycle","label":"lh1","pipeline":1,"conns":50,"cycles":8000,"cycles_per_s":8000}
{"mode":"cycle","label":"lh3","pipeline":16,"conns":50,"cycles":100,"cycles_per_s":11000}
{"mode":"cycle","label":"lh3wal","pipeline":16,"conns":50,"cycles":100,"cycles_per_s":15000}
{"mode":"cycle","label":"etcd","pipeline":16,"conns":50,"cycles":100,"cycles_per_s":1000}
{"mode":"failover","label":"lh3","ms":1000,"elected_ms":990}
{"mode":"failover","label":"lh3","ms":3500,"elected_ms":3400}
{"mode":"failover","label":"lh3","ms":2000,"elected_ms":1900}
{"mode":"failover","label":"etcd","ms":1200}
`
	lines, err := readLines(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := reporter{w: &out, lines: lines}
	r.meta()
	r.cycles([]string{"lh3", "lh3wal"}, "etcd", "lh1", map[int]float64{1: 7, 16: 12})
	r.failovers("lh3", 3000)
	for _, want := range []string{
		"- date: today\n",
		// medians over the three rounds
		"| -P 1 (50 conns) | lh3 | 2000 | 2 | 7 |",
		"| lh3 / etcd | 1 | 4.0× | ≥ 7× | NO |",
		"| lh3 / lh1 | 1 | 0.25× | | |",
		"| lh3 / etcd | 16 | 11.0× | ≥ 12× | NO |",
		"| lh3wal / etcd | 16 | 15.0× | ≥ 12× | yes |",
		"| lh3 | 3 | 2000 | 3500 | 1000, 3500, 2000 | 1900 | p99 ≤ 3000 ms | NO |",
		"| etcd | 1 | 1200 | 1200 | 1200 |  |  |  |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseGoals(t *testing.T) {
	goals, err := parseGoals("1=7, 16=25")
	if err != nil || len(goals) != 2 || goals[1] != 7 || goals[16] != 25 {
		t.Errorf("parseGoals = %v, %v", goals, err)
	}
	for _, bad := range []string{"7", "1=", "x=7", "0=7", "1=-2"} {
		if _, err := parseGoals(bad); err == nil {
			t.Errorf("parseGoals(%q) took it", bad)
		}
	}
}
