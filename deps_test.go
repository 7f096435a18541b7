package mcpledger_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mcpledger/mcpledger"

// allowed is the import table of architecture.md: which module packages
// and third-party modules each top-level package may import (the standard
// library is always allowed, except where the determinism guard says
// otherwise). uuid comes with events: its types are in the envelope.
var allowed = map[string][]string{
	"events":      {"github.com/vmihailenco/msgpack/v5", "github.com/google/uuid"},
	"fsm":         {"events", "github.com/looplab/fsm"},
	"store":       {"events", "go.etcd.io/bbolt", "github.com/google/uuid"},
	"projections": {"events"},
	"runtime":     {"events", "fsm", "projections", "github.com/modelcontextprotocol/go-sdk", "github.com/google/uuid", "github.com/google/jsonschema-go", "github.com/fsnotify/fsnotify", "golang.org/x/sys"},
	"replay":      {"events", "fsm", "projections", "github.com/google/uuid"},
	"cmd":         {"*"},
	"tools":       {}, // developer tools (the mutation check): standard library only
}

// topPackage returns the top-level directory a file belongs to.
func topPackage(path string) string { return strings.SplitN(filepath.ToSlash(path), "/", 2)[0] }

func isStd(imp string) bool { return !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") }

func permitted(top, imp string) bool {
	rules := allowed[top]
	if slices.Contains(rules, "*") || isStd(imp) {
		return true
	}
	if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
		dep := topPackage(rel)
		return dep == top || slices.Contains(rules, dep) // a package's own subpackages are fine
	}
	for _, r := range rules {
		if imp == r || strings.HasPrefix(imp, r+"/") {
			return true
		}
	}
	return false
}

func goFiles(t *testing.T, tests bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || filepath.Dir(path) == "." {
			return nil
		}
		if strings.HasSuffix(path, "_test.go") != tests {
			return nil
		}
		out = append(out, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportTable(t *testing.T) {
	fset := token.NewFileSet()
	files := goFiles(t, false)
	if len(files) == 0 {
		t.Fatal("no Go files found")
	}
	for _, path := range files {
		top := topPackage(path)
		if _, ok := allowed[top]; !ok {
			t.Errorf("%s: package %q is not in the architecture's package table", path, top)
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if !permitted(top, p) {
				t.Errorf("%s imports %s, which %s/ may not (architecture.md package table)", path, p, top)
			}
		}
	}
}

// TestDeterminismGuard keeps fsm/ and projections/ pure: no clock, no
// randomness, no I/O, no goroutines, no logging, and no range over a map
// unless a //determinism: comment on the line above says why its order
// cannot reach the output.
func TestDeterminismGuard(t *testing.T) {
	for _, dir := range []string{"fsm", "projections"} {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, v := range purityViolations(t, dir) {
			t.Error(v)
		}
	}
}

// TestDeterminismGuardCatches proves the guard fails on each kind of
// violation.
func TestDeterminismGuardCatches(t *testing.T) {
	got := strings.Join(purityViolations(t, filepath.Join("testdata", "purity", "impure")), "\n")
	for _, want := range []string{"imports math/rand", "range over a map", "go statement", "time.Now"} {
		if !strings.Contains(got, want) {
			t.Errorf("guard missed %q; it reported:\n%s", want, got)
		}
	}
}

func purityViolations(t *testing.T, dir string) []string {
	t.Helper()
	forbiddenImports := []string{"math/rand", "math/rand/v2", "crypto/rand", "os", "os/exec", "net", "net/http",
		"log", "log/slog", "io/ioutil", "syscall", "github.com/google/uuid", "go.etcd.io/bbolt"}
	forbiddenTime := []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}
	var out []string
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		var files []*ast.File
		for _, name := range slices.Sorted(maps.Keys(pkg.Files)) {
			files = append(files, pkg.Files[name])
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
		if _, err := conf.Check(pkg.Name, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", dir, err)
		}
		for _, f := range files {
			for _, imp := range f.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				if slices.Contains(forbiddenImports, p) {
					out = append(out, fmt.Sprintf("%s imports %s: %s must stay pure", fset.Position(imp.Pos()), p, dir))
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					out = append(out, fmt.Sprintf("%s: go statement in %s", fset.Position(n.Pos()), dir))
				case *ast.SelectorExpr:
					if obj := info.Uses[n.Sel]; obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == "time" && slices.Contains(forbiddenTime, obj.Name()) {
						out = append(out, fmt.Sprintf("%s: time.%s in %s: time must come from the input event", fset.Position(n.Pos()), obj.Name(), dir))
					}
				case *ast.RangeStmt:
					if tv, ok := info.Types[n.X]; ok {
						if _, isMap := tv.Type.Underlying().(*types.Map); isMap && !hasDeterminismNote(fset, f, n) {
							out = append(out, fmt.Sprintf("%s: range over a map in %s without a //determinism: note saying why order cannot reach the output", fset.Position(n.Pos()), dir))
						}
					}
				}
				return true
			})
		}
	}
	return out
}

func hasDeterminismNote(fset *token.FileSet, f *ast.File, n ast.Node) bool {
	line := fset.Position(n.Pos()).Line
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			l := fset.Position(c.Pos()).Line
			if (l == line-1 || l == line) && strings.Contains(c.Text, "determinism:") {
				return true
			}
		}
	}
	return false
}
