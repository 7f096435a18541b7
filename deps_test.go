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

// allowed is the import table of ARCHITECTURE.md: which module packages
// and third-party modules each package may import (the standard library
// is always allowed, except where the determinism guard says otherwise).
// A file belongs to the longest key that is a prefix of its directory; a
// package may import its own subpackages unless the table names it
// (runtime's subpackages are listed, so runtime may import only those it
// names: never runtime/gateway). uuid comes with events: its types are in
// the envelope.
var allowed = map[string][]string{
	"events":      {"github.com/vmihailenco/msgpack/v5", "github.com/google/uuid"},
	"fsm":         {"events", "github.com/looplab/fsm"},
	"store":       {"events", "go.etcd.io/bbolt", "github.com/google/uuid"},
	"projections": {"events"},
	"runtime": {"events", "fsm", "projections", "runtime/config", "runtime/guard", "runtime/internal", "runtime/internal/sdkjson", "runtime/oauth", "tracectx",
		"github.com/modelcontextprotocol/go-sdk", "github.com/google/uuid", "golang.org/x/sys", "go.opentelemetry.io/otel/trace"},
	// config: sources, precedence, parsing, expansion, watching; it
	// redacts what it journals with guard, and knows nothing of the Manager.
	"runtime/config": {"events", "runtime/guard", "github.com/fsnotify/fsnotify"},
	// guard: pure checks on a call's values, shared by the call path and
	// the gateway; nothing of the Manager, the journal or the network.
	// control: the control socket, over runtime's exported API.
	"runtime/control": {"events", "projections", "runtime", "github.com/google/uuid"},
	// gateway: `mcpledger serve`, over runtime's exported API; only cmd
	// imports it. oauth: sign-in, token store, refresh and revoke for
	// remote servers; it journals nothing and knows nothing of the Manager.
	"runtime/gateway":  {"events", "projections", "runtime", "runtime/guard", "runtime/internal/sdkjson", "github.com/modelcontextprotocol/go-sdk", "github.com/google/uuid"},
	"runtime/guard":    {"events", "runtime/internal", "github.com/modelcontextprotocol/go-sdk/mcp", "github.com/google/jsonschema-go"},
	"runtime/internal": {},
	// sdkjson: JSON decoded as go-sdk decodes it (segmentio's decoder, keys
	// matched exactly), for the call path's hot decodings.
	"runtime/internal/sdkjson": {"github.com/segmentio/encoding"},
	"runtime/oauth":            {"github.com/modelcontextprotocol/go-sdk", "golang.org/x/oauth2"},
	"runtime/runtimetest":      {"*"}, // test servers and helpers
	"replay":                   {"events", "fsm", "projections", "github.com/google/uuid"},
	// export/otlp: the journal as OpenTelemetry spans, logs and metrics, shipped
	// with the official SDK's OTLP exporters; it writes no event. grpc only
	// for the gRPC connection's reconnect backoff (protocol.go).
	"export/otlp": {"events", "tracectx", "github.com/google/uuid", "go.opentelemetry.io/otel", "google.golang.org/grpc"},
	// tracectx: the trace identity of the ledger's spans (IDs derived from
	// the journal, the W3C trace context in and out), shared by runtime
	// and export/otlp so both derive a call's span ID alike.
	"tracectx": {"github.com/google/uuid", "go.opentelemetry.io/otel/trace", "go.opentelemetry.io/otel/propagation"},
	"cmd":      {"*"},
	"tools":    {}, // developer tools (the mutation check): standard library only
	"bench":    {}, // benchmark scripts' programs (the gateway's table): standard library only
}

// unitOf returns the key of allowed that path (a file, or an import path
// relative to the module) belongs to: the longest key that is a prefix of
// its directory, or its top-level directory.
func unitOf(path string) string {
	dir := filepath.ToSlash(filepath.Dir(path))
	best := ""
	for k := range allowed {
		if (dir == k || strings.HasPrefix(dir, k+"/")) && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return strings.SplitN(dir, "/", 2)[0]
	}
	return best
}

func isStd(imp string) bool { return !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") }

func permitted(unit, imp string) bool {
	rules := allowed[unit]
	if slices.Contains(rules, "*") || isStd(imp) {
		return true
	}
	if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
		dep := unitOf(rel + "/x.go")
		return dep == unit || slices.Contains(rules, dep)
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
		unit := unitOf(path)
		if _, ok := allowed[unit]; !ok {
			t.Errorf("%s: package %q is not in the architecture's package table", path, unit)
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if !permitted(unit, p) {
				t.Errorf("%s imports %s, which %s/ may not (ARCHITECTURE.md package table)", path, p, unit)
			}
		}
	}
}

// TestImportTableRules: the table's rules as the split of runtime relies on
// them.
func TestImportTableRules(t *testing.T) {
	for _, c := range []struct {
		unit, imp string
		ok        bool
	}{
		{"runtime", module + "/runtime/guard", true},
		{"runtime", module + "/runtime/internal/swar", true},
		{"runtime/guard", module + "/runtime/internal/swar", true},
		{"runtime/guard", module + "/runtime", false},
		{"runtime/config", module + "/runtime", false},
		{"runtime/config", module + "/runtime/guard", true},
		{"runtime/guard", module + "/runtime/config", false},
		{"runtime", "github.com/fsnotify/fsnotify", false},
		{"runtime", module + "/runtime/control", false},
		{"runtime/control", module + "/runtime", true},
		{"runtime", module + "/runtime/gateway", false},
		{"runtime/control", module + "/runtime/gateway", false},
		{"runtime/gateway", module + "/runtime", true},
		{"runtime/gateway", module + "/store", false},
		{"runtime/guard", module + "/store", false},
		{"runtime/guard", "github.com/modelcontextprotocol/go-sdk/mcp", true},
		{"runtime/guard", "github.com/modelcontextprotocol/go-sdk/jsonrpc", false},
		{"runtime/internal", module + "/events", false},
		{"fsm", module + "/runtime", false},
		{"cmd", module + "/runtime/guard", true},
		{"runtime", module + "/runtime/oauth", true},
		{"runtime/oauth", module + "/runtime", false},
		{"runtime/oauth", module + "/events", false},
		{"runtime/oauth", "golang.org/x/oauth2", true},
		{"runtime", module + "/tracectx", true},
		{"runtime", "go.opentelemetry.io/otel/trace", true},
		{"runtime", "go.opentelemetry.io/otel/sdk/trace", false},
		{"runtime", module + "/export/otlp", false},
		{"export/otlp", module + "/tracectx", true},
		{"tracectx", module + "/events", false},
	} {
		if got := permitted(c.unit, c.imp); got != c.ok {
			t.Errorf("permitted(%q, %q) = %v, want %v", c.unit, c.imp, got, c.ok)
		}
	}
	if got := unitOf("runtime/guard/redact.go"); got != "runtime/guard" {
		t.Errorf("unitOf(runtime/guard/redact.go) = %q", got)
	}
	if got := unitOf("runtime/internal/swar/swar.go"); got != "runtime/internal" {
		t.Errorf("unitOf(runtime/internal/swar/swar.go) = %q", got)
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

// TestGuardIsPure keeps runtime/guard to pure functions on values: no
// clock, randomness, I/O, goroutines or logging. (Its map ranges are not
// held to the determinism rule: no recorded decision depends on them, and
// type-checking go-sdk's source for it would cost the suite 20 s.)
func TestGuardIsPure(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join("runtime", "guard"), func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil || len(pkgs) != 1 {
		t.Fatalf("parse runtime/guard: %d packages, %v", len(pkgs), err)
	}
	forbidden := []string{"time", "math/rand", "math/rand/v2", "crypto/rand", "os", "os/exec", "net", "net/http",
		"log", "log/slog", "io/ioutil", "syscall", "context"}
	for _, f := range pkgs["guard"].Files {
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); slices.Contains(forbidden, p) {
				t.Errorf("%s imports %s: runtime/guard must stay pure", fset.Position(imp.Pos()), p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: go statement in runtime/guard", fset.Position(g.Pos()))
			}
			return true
		})
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
