package protocol

import (
	"os"
	"strings"
	"testing"
)

// TestDocsMatchCommandTable keeps docs/commands.md in step with the command
// table and the error codes.
func TestDocsMatchCommandTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := FillGenerated(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != want {
		t.Fatal("docs/commands.md is out of date with protocol's tables: run `make docs`")
	}
}

// TestDocsListEveryErrorCode checks the generated error table itself, so that
// a code cannot be left out of the docs by a change to the generator.
func TestDocsListEveryErrorCode(t *testing.T) {
	doc, err := os.ReadFile("../docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, ec := range ErrorCodes {
		if row := "| `" + ec.Code + "` | " + ec.Meaning + " |\n"; !strings.Contains(string(doc), row) {
			t.Errorf("docs/commands.md has no row %q", row)
		}
	}
}
