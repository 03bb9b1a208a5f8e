package command

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBinBuildsStamped: whatever writes bin/leasehold stamps it as make build
// does (-X main.version=, from git describe). The benchmark scripts used to
// rebuild it with a plain go build, so after make build and then a
// benchmark, bin/leasehold said "dev" (in a git worktree, where Go embeds no
// revision) or a pseudo-version, not the tag make build had stamped. The
// tests themselves build into temporary directories (testutil.BuildLeasehold
// and the like) and leave bin/ alone.
func TestBinBuildsStamped(t *testing.T) {
	files := []string{filepath.Join("..", "Makefile")}
	scripts, err := filepath.Glob(filepath.Join("..", "scripts", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, scripts...)
	intoBin := regexp.MustCompile(`-o\s+(\$\(BIN\)|\S*bin/leasehold)(\s|$)`)
	// The Makefile's build line says $(LDFLAGS), checked below.
	stamped := regexp.MustCompile(`-X main\.version=\S|-ldflags "\$\(LDFLAGS\)"`)
	builds := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "go build") && !strings.Contains(line, "$(GO) build") || !intoBin.MatchString(line) {
				continue
			}
			builds++
			if !stamped.MatchString(line) {
				t.Errorf("%s:%d builds bin/leasehold without the version make build stamps (-ldflags \"-X main.version=...\"):\n\t%s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^LDFLAGS\s*:?=\s*-X main\.version=\$\(VERSION\)$`).Match(mk) {
		t.Errorf("the Makefile's LDFLAGS no longer stamp main.version with $(VERSION)")
	}
	if builds < 2 {
		t.Fatalf("found %d builds of bin/leasehold in the Makefile and scripts/; the test no longer sees them", builds)
	}
}
