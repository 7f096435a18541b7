package main

import (
	"flag"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/runtime/config"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenFile compares got with testdata/name (rewritten under -update).
func goldenFile(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update if the change is right):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestImportFrom: each client's servers, from fixture files at the
// places the client keeps them, land in the project's .mcp.json (the
// default scope) in one edit each: what cannot be carried over (a VS Code
// input prompt, an envFile, an invalid entry, a name already there) is
// listed with why, variables are written out, the result loads with no
// invalid entry, --dry-run writes nothing and the sources are never
// written.
func TestImportFrom(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("the fixtures sit at the Linux paths")
	}
	home, ws, _ := serversEnv(t)
	fixture := func(name, dst string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "import", name))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), "$WS", ws))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	sources := []string{
		fixture("claude_desktop_config.json", filepath.Join(home, ".config", "Claude", "claude_desktop_config.json")),
		fixture("vscode_mcp.json", filepath.Join(ws, ".vscode", "mcp.json")),
		fixture("cursor_global_mcp.json", filepath.Join(home, ".cursor", "mcp.json")),
		fixture("cursor_project_mcp.json", filepath.Join(ws, ".cursor", "mcp.json")),
		fixture("claude.json", filepath.Join(home, ".claude.json")),
	}
	before := map[string]string{}
	for _, s := range sources {
		b, _ := os.ReadFile(s)
		before[s] = string(b)
	}
	mcp := filepath.Join(ws, ".mcp.json")
	var out strings.Builder
	r := runCLI(t, "import", "--from", "vscode", "--dry-run", "--workspace", ws)
	if r.err != nil {
		t.Fatal(r.err)
	}
	out.WriteString("$ import --from vscode --dry-run\n" + r.stdout)
	if _, err := os.Stat(mcp); !os.IsNotExist(err) {
		t.Fatalf("--dry-run wrote %s", mcp)
	}
	for _, from := range []string{"claude-desktop", "vscode", "cursor", "claude-code"} {
		r := runCLI(t, "import", "--from", from, "--workspace", ws)
		if r.err != nil {
			t.Fatalf("import --from %s: %v\n%s", from, r.err, r.stderr)
		}
		out.WriteString("$ import --from " + from + "\n" + r.stdout)
	}
	clean := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, ws, "$WS"), home, "$HOME") }
	goldenFile(t, "import/output.golden", clean(out.String()))
	written, err := os.ReadFile(mcp)
	if err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "import/mcp.json.golden", clean(string(written)))
	for _, s := range sources {
		if b, _ := os.ReadFile(s); string(b) != before[s] {
			t.Errorf("import wrote its source %s", s)
		}
	}
	// What was imported is what mcpledger reads: every entry valid, with
	// the variables the entries name set, as the user's would be.
	vars := map[string]string{"API_KEY": "k", "PGPASSWORD": "p"}
	lc := config.Load(config.Sources{Workspace: ws, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if len(lc.Observed.Servers) != 7 {
		t.Errorf("read %d servers from %s, want 7", len(lc.Observed.Servers), mcp)
	}
	for _, s := range lc.Observed.Servers {
		if s.Invalid != "" {
			t.Errorf("imported entry invalid: %s", s.Invalid)
		}
	}
	// Importing again adds nothing and says so.
	r = runCLI(t, "import", "--from", "cursor", "--workspace", ws)
	if r.err != nil || !strings.Contains(r.stdout, "imported 0 server(s)") || !strings.Contains(r.stdout, "skipped db: already in") {
		t.Errorf("second import: %v\n%s", r.err, r.stdout)
	}
	// --file reads another copy in the client's format (VS Code's
	// "servers"), not the usual files.
	other := filepath.Join(home, "insiders-mcp.json")
	if err := os.WriteFile(other, []byte(`{"servers": {"insiders": {"type": "stdio", "command": "i"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "import", "--from", "vscode", "--file", other, "--workspace", ws, "--scope", "user")
	if r.err != nil || !strings.Contains(r.stdout, "imported 1 server(s)") || !strings.Contains(r.stdout, "+ insiders  (from "+other+")") {
		t.Errorf("import --file: %v\n%s", r.err, r.stdout)
	}
	// The session import is still `import FILE`.
	if r := runCLI(t, "import", filepath.Join(ws, "missing.jsonl")); r.err == nil || strings.Contains(r.err.Error(), "--from") {
		t.Errorf("import FILE: %v", r.err)
	}
	if r := runCLI(t, "import", "--from", "windsurf"); exitCode(r.err) != 2 {
		t.Errorf("import --from windsurf: %v", r.err)
	}
}
