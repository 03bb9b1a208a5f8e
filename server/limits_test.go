package server

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLimitsDocMatchesInfo keeps docs/limits.md and INFO limits alike:
// every field the section shows has a row in the page, and every row's
// field is in the section.
func TestLimitsDocMatchesInfo(t *testing.T) {
	doc, err := os.ReadFile("../docs/limits.md")
	if err != nil {
		t.Fatal(err)
	}
	// A row's second cell names its INFO field: "| limit | `field` | ...".
	row := regexp.MustCompile("(?m)^\\|[^|\\n]*\\| `([a-z_]+)` \\|")
	var documented []string
	for _, m := range row.FindAllSubmatch(doc, -1) {
		documented = append(documented, string(m[1]))
	}

	ts := startServer(t)
	var shown []string
	for _, line := range strings.Split(do(t, ts.client(), "INFO", "limits").Text(), "\r\n") {
		if field, _, ok := strings.Cut(line, ":"); ok {
			shown = append(shown, field)
		}
	}
	if len(shown) == 0 {
		t.Fatal("INFO limits shows nothing")
	}
	for _, f := range shown {
		if !slices.Contains(documented, f) {
			t.Errorf("INFO limits shows %s, which docs/limits.md has no row for", f)
		}
	}
	for _, f := range documented {
		if !slices.Contains(shown, f) {
			t.Errorf("docs/limits.md has a row for %s, which INFO limits does not show", f)
		}
	}
}
