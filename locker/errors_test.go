package locker

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/testutil"
)

// TestErrorsListsEverySentinel: every Err variable in this package's sources
// is in Errors, once, so that protocol and lockfsm, which map them all
// through it, cannot miss a new one. Each is found by its text, read from
// its errors.New in the source.
func TestErrorsListsEverySentinel(t *testing.T) {
	listed := map[string]int{}
	for n, err := range Errors {
		if err == nil {
			t.Fatalf("Errors[%d] is nil", n)
		}
		if prev, ok := listed[err.Error()]; ok {
			t.Errorf("Errors[%d] and Errors[%d] are both %q", prev, n, err)
		}
		listed[err.Error()] = n
	}

	fset, files := testutil.ParseSources(t, false)
	found := 0
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Err") || id.Name == "Errors" {
						continue
					}
					found++
					text, ok := errorsNewText(vs, i)
					if !ok {
						t.Errorf("%s (%s): not errors.New with a string literal; check it is in Errors and teach this test to read it",
							id.Name, fset.Position(id.Pos()))
						continue
					}
					if _, ok := listed[text]; !ok {
						t.Errorf("%s (%s) is not in Errors: append it there", id.Name, fset.Position(id.Pos()))
					}
				}
			}
		}
	}
	if found != len(Errors) {
		t.Errorf("%d Err variables in the sources, %d in Errors", found, len(Errors))
	}
}

// errorsNewText returns the text of vs's i-th value if it is errors.New of
// a string literal.
func errorsNewText(vs *ast.ValueSpec, i int) (string, bool) {
	if i >= len(vs.Values) {
		return "", false
	}
	call, ok := vs.Values[i].(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "New" {
		return "", false
	}
	if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "errors" {
		return "", false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	text, err := strconv.Unquote(lit.Value)
	return text, err == nil
}
