package admin

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// metricRowRE is a row of docs/operations.md's metric tables: the name, with
// its labels in braces if it has any, and the type.
var metricRowRE = regexp.MustCompile("(?m)^\\| `(leasehold_[a-z_]+)(?:\\{([a-z,]+)\\})?` \\| (counter|gauge|histogram) \\|")

// allGroups is groups and the command path's metrics of one series
// (commandmetrics.go).
func allGroups() []group { return append(slices.Clip(groups), group{always, trafficMetrics}) }

// TestDocsListEveryMetric: docs/operations.md lists every metric the
// collector exports, with its type and label, and no other.
func TestDocsListEveryMetric(t *testing.T) {
	md, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{} // name{label} -> type
	for _, m := range metricRowRE.FindAllStringSubmatch(string(md), -1) {
		documented[seriesName(m[1], m[2])] = m[3]
	}
	exported := map[string]string{
		seriesName(namespace+"_build_info", "version"):               "gauge",
		seriesName(namespace+"_commands_total", "command,result"):    "counter",
		seriesName(namespace+"_command_duration_seconds", "command"): "histogram",
	}
	for _, g := range allGroups() {
		for _, m := range g.metrics {
			label := ""
			for l := range m.labels {
				label = l
			}
			kind := "gauge"
			if m.kind == prometheus.CounterValue {
				kind = "counter"
			}
			exported[seriesName(namespace+"_"+m.name, label)] = kind
		}
	}
	for _, h := range histograms {
		exported[namespace+"_"+h.name] = "histogram"
	}
	for name, kind := range exported {
		if documented[name] != kind {
			t.Errorf("%s: a %s, documented as %q", name, kind, documented[name])
		}
	}
	for name := range documented {
		if _, ok := exported[name]; !ok {
			t.Errorf("%s is documented but not exported", name)
		}
	}
	if len(documented) < 20 {
		t.Errorf("only %d metrics found in docs/operations.md: the table's shape changed", len(documented))
	}
}

func seriesName(name, label string) string {
	if label == "" {
		return name
	}
	return name + "{" + label + "}"
}

// TestMetricNames: leasehold's names follow Prometheus's conventions:
// counters, and only they, end in _total; sizes are in _bytes.
func TestMetricNames(t *testing.T) {
	for _, g := range allGroups() {
		for _, m := range g.metrics {
			if isCounter := m.kind == prometheus.CounterValue; isCounter != strings.HasSuffix(m.name, "_total") {
				t.Errorf("%s: counter %v, but counters and only they end in _total", m.name, isCounter)
			}
			if strings.Contains(m.name, "size") || strings.HasSuffix(m.name, "_us") || strings.HasSuffix(m.name, "_ms") {
				t.Errorf("%s: use base units, _bytes and _seconds", m.name)
			}
		}
	}
}
