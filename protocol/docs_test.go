package protocol

import (
	"os"
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
