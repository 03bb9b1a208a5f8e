package main

import (
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	in := `{"test":"rb acquire -P1","target":"leasehold","round":1,"value":80,"p50_ms":0.5,"p99_ms":2,"ops":100,"srv_cpu_s":0.001,"cli_cpu_s":0.002,"goal":"ratio>=1.0"}
{"test":"rb acquire -P1","target":"redis","round":1,"value":100,"p50_ms":0.4,"p99_ms":1,"ops":100}
{"test":"rb acquire -P1","target":"leasehold","round":2,"value":120,"ops":100}
{"test":"rb acquire -P1","target":"leasehold","round":3,"value":90,"ops":100}
{"test":"rb ping -P1","target":"leasehold","round":1,"value":100}
{"test":"ACQUIRE/PING -P1","target":"leasehold","derive":"rb acquire -P1/rb ping -P1","goal":"value>=0.9"}
{"test":"machine","target":"meta","note":"2 cores"}
`
	recs, err := readRecords(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	rows, meta := buildRows(recs)
	if len(rows) != 3 || len(meta) != 1 {
		t.Fatalf("%d rows, %d meta lines", len(rows), len(meta))
	}
	acq := rows[0]
	if *acq.Leasehold != 90 || *acq.Ratio != 0.9 || acq.Met != "NO" || acq.Rounds != 3 {
		t.Fatalf("acquire row %+v", acq)
	}
	if *acq.LhSrvUs != 10 || *acq.LhCliUs != 20 {
		t.Fatalf("cpu per op %v %v", *acq.LhSrvUs, *acq.LhCliUs)
	}
	if d := rows[2]; *d.Leasehold != 0.9 || d.Met != "yes" {
		t.Fatalf("derived row %+v", d)
	}
	var sb strings.Builder
	writeMarkdown(&sb, rows, meta)
	if !strings.Contains(sb.String(), "| rb acquire -P1 | ops/s | 90 | 100 | 0.90× |") {
		t.Fatalf("table:\n%s", sb.String())
	}
}
