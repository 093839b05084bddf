package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// engineFuncs parses the package's non-test files and returns its
// functions.
func engineFuncs(t *testing.T) []*ast.FuncDecl {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*ast.FuncDecl
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					out = append(out, fd)
				}
			}
		}
	}
	return out
}

func receiver(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
		if id, ok := star.X.(*ast.Ident); ok {
			return id.Name
		}
	}
	return ""
}

// The commit path keeps its shape: an execution's steps share the task's
// state through the execution (and a try's through a trial) rather than
// through long positional parameter lists, and the early claim is let go in
// one place, releaseEarly, so that no path can leak or release it twice.
func TestCommitPathShape(t *testing.T) {
	const maxParams = 3 // ctx and two more
	var releases []string
	for _, fd := range engineFuncs(t) {
		if receiver(fd) == "execution" && fd.Type.Params.NumFields() > maxParams {
			t.Errorf("(*execution).%s takes %d parameters: keep what a task's tries share in execution, what one try computes under in trial",
				fd.Name.Name, fd.Type.Params.NumFields())
		}
		if fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "release" {
					releases = append(releases, fd.Name.Name)
				}
			}
			return true
		})
	}
	if len(releases) != 1 || releases[0] != "releaseEarly" {
		t.Errorf("the early claim is released from %v; want one call, in releaseEarly", releases)
	}
}
