// Command gendocs refreshes the generated sections of docs/commands.md (the
// command table and the error codes) from the protocol package.
package main

import (
	"fmt"
	"os"

	"github.com/leasehold/leasehold/protocol"
)

func main() {
	path := "docs/commands.md"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	if err := run(path); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := protocol.FillGenerated(string(doc))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
