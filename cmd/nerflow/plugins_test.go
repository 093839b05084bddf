package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nerflow/nerflow/pipeline/spec"
	"github.com/nerflow/nerflow/stages"
	"github.com/nerflow/nerflow/storage"
)

// listed reads plugins.go: for each import, the plug-ins its line comment
// names ("stages: a, b", "methods: x"), by kind (stage, method, store).
func listed(t *testing.T) map[string]map[string][]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "plugins.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]string{}
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string][]string{}
		out[path] = kinds
		if imp.Comment == nil {
			t.Errorf("plugins.go: import %s has no comment naming what it registers", path)
			continue
		}
		kind, names, ok := strings.Cut(commentText(imp.Comment), ":")
		if !ok {
			t.Errorf("plugins.go: import %s: comment %q is not KIND: NAME, ...", path, commentText(imp.Comment))
			continue
		}
		kind = strings.TrimSuffix(strings.TrimSpace(kind), "s")
		for _, n := range strings.Split(names, ",") {
			// A store's comment may say its scheme with the separator.
			kinds[kind] = append(kinds[kind], strings.TrimSuffix(strings.TrimSpace(n), "://"))
		}
	}
	return out
}

func commentText(g *ast.CommentGroup) string { return strings.TrimSpace(g.Text()) }

// pkgOf returns the import path of the package that defines fn.
func pkgOf(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	slash := strings.LastIndex(name, "/")
	if dot := strings.Index(name[slash+1:], "."); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}

// The test-only stages are linked by teststages.go under a build tag and
// are no plug-ins of the binary users run.
const testStages = "github.com/nerflow/nerflow/pipeline/teststages"

// plugins.go names, on the import of each package, exactly the stages and
// methods that package registers, and the stores of every driver: a stage,
// method or store added without its line (or a line left after its
// removal) fails here. The test binary links what the command links.
func TestPluginsListEveryRegisteredPlugin(t *testing.T) {
	lists := listed(t)
	registered := map[string]map[string][]string{} // package -> kind -> names
	add := func(pkg, kind, name string) {
		if registered[pkg] == nil {
			registered[pkg] = map[string][]string{}
		}
		registered[pkg][kind] = append(registered[pkg][kind], name)
	}
	for _, s := range stages.All() {
		if pkg := pkgOf(s.Run); pkg != testStages {
			add(pkg, "stage", s.Name)
		}
	}
	for _, m := range spec.Methods() {
		add(pkgOf(m.Build), "method", m.Name)
	}
	for pkg, kinds := range registered {
		for kind, names := range kinds {
			slices.Sort(names)
			var got []string
			if l, ok := lists[pkg]; ok {
				got = slices.Sorted(slices.Values(l[kind]))
			}
			if !slices.Equal(got, names) {
				t.Errorf("plugins.go: import %s lists %ss %v; the package registers %v", pkg, kind, got, names)
			}
		}
	}
	var stores []string
	for pkg, kinds := range lists {
		for kind, names := range kinds {
			if kind == "store" {
				stores = append(stores, names...)
				continue
			}
			if len(registered[pkg][kind]) == 0 {
				t.Errorf("plugins.go: import %s lists %ss %v, which it does not register", pkg, kind, names)
			}
		}
	}
	if slices.Sort(stores); !slices.Equal(stores, storage.Schemes()) {
		t.Errorf("plugins.go lists stores %v; the drivers register %v", stores, storage.Schemes())
	}
}
