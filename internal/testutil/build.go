package testutil

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BuildLeasehold builds the leasehold binary (the module root's package
// main, as `go build -o DIR .` does) into a directory of t's, and returns
// that directory, for a test to put first on a child's PATH. Each call
// builds anew; the go build cache makes the repeats quick.
func BuildLeasehold(t testing.TB) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building leasehold: %v", err)
	}
	gomod, err := exec.Command(gobin, "env", "GOMOD").Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(gomod)), "go.mod") {
		t.Fatalf("building leasehold: no module root (go env GOMOD: %q, %v)", gomod, err)
	}
	dir := t.TempDir()
	build := exec.Command(gobin, "build", "-o", filepath.Join(dir, "leasehold"), ".")
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of leasehold: %v\n%s", err, out)
	}
	return dir
}
