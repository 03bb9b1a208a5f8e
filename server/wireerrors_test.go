package server

import (
	"go/ast"
	gotoken "go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/leasehold/leasehold/protocol"
)

// wireErrorText matches a string literal that reads as a RESP error reply of
// its own: an optional '-' and a documented code word, then a space.
var wireErrorText = func() *regexp.Regexp {
	codes := make([]string, len(protocol.ErrorCodes))
	for i, ec := range protocol.ErrorCodes {
		codes[i] = regexp.QuoteMeta(ec.Code)
	}
	return regexp.MustCompile(`^-?(` + strings.Join(codes, "|") + `) `)
}()

// TestNoWireErrorsOutsideProtocol keeps protocol/errors.go the one place that
// decides what error text goes on the wire: the server's sources may return
// and write protocol's errors, never make their own, neither as a
// protocol.Error literal nor as a "-ERR ..." or "ERR ..." string.
func TestNoWireErrorsOutsideProtocol(t *testing.T) {
	fset, files := testutil.ParseSources(t, false)
	parsed := 0
	for _, f := range files {
		parsed++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "protocol" {
						t.Errorf("%s: builds a protocol.Error; add a named error or constructor to protocol/errors.go", fset.Position(n.Pos()))
					}
				}
			case *ast.BasicLit:
				if n.Kind != gotoken.STRING {
					return true
				}
				s, err := strconv.Unquote(n.Value)
				if err == nil && wireErrorText.MatchString(s) {
					t.Errorf("%s: %q reads as a wire error; put it in protocol/errors.go", fset.Position(n.Pos()), s)
				}
			}
			return true
		})
	}
	if parsed < 10 {
		t.Fatalf("parsed only %d files; is the test looking at the server's sources?", parsed)
	}
}
