package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// serversEnv is a fresh HOME (with ~/.claude.json and the user config
// in it), journal and workspace (canonical), never the real ones.
func serversEnv(t *testing.T) (home, ws, jp string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, ws, jp = filepath.Join(dir, "home"), filepath.Join(dir, "ws"), filepath.Join(dir, "j.db")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("MCPLEDGER_JOURNAL", jp)
	t.Setenv("MCPLEDGER_DECIDER", `{"backoff_base_ms":10,"backoff_max_ms":20,"max_attempts":2}`)
	return home, ws, jp
}

// getJSON runs get NAME --json.
func getJSON(t *testing.T, ws, name string) getOut {
	t.Helper()
	r := runCLI(t, "get", name, "--json", "--workspace", ws)
	if r.err != nil {
		t.Fatalf("get %s: %v %s", name, r.err, r.stderr)
	}
	var res getOut
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("get --json: %v %s", err, r.stdout)
	}
	return res
}

// TestAddRunOnceRoundTrip: a server added with add (the default local
// scope, in ~/.claude.json, Claude Code's key for the workspace) is the
// one `run --once` starts, without trust or approval; get shows where it
// comes from and its status from the journal; status NAME is get NAME;
// remove takes it out of the next run.
func TestAddRunOnceRoundTrip(t *testing.T) {
	home, ws, _ := serversEnv(t)
	bin := runtimetest.BuildServer(t)
	claude := filepath.Join(home, ".claude.json")
	if err := os.WriteFile(claude, []byte("{\n  \"numStartups\": 3,\n  \"projects\": {}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "add", "--workspace", ws, "echo", "--env", "MCPTEST_X=1", "--", bin, "-sse")
	if r.err != nil || !strings.Contains(r.stdout, `added server "echo" (local scope)`) {
		t.Fatalf("add: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	var doc struct {
		NumStartups int `json:"numStartups"`
		Projects    map[string]struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		} `json:"projects"`
	}
	b, _ := os.ReadFile(claude)
	if err := json.Unmarshal(b, &doc); err != nil || doc.NumStartups != 3 {
		t.Fatalf("~/.claude.json after add: %v\n%s", err, b)
	}
	entry := string(doc.Projects[ws].MCPServers["echo"])
	if want := `{"type":"stdio","command":"` + bin + `","args":["-sse"],"env":{"MCPTEST_X":"1"}}`; compact(entry) != want {
		t.Errorf("entry %s, want %s", compact(entry), want)
	}
	// The gateway Claude Code is configured with, in the same file: it
	// must not make run launch mcpledger serve.
	if r := runCLI(t, "add", "--scope", "user", "mcpledger", "--", "mcpledger", "serve", "--stdio"); r.err != nil || !strings.Contains(r.stdout, "mcpledger itself leaves it alone") {
		t.Fatalf("add the gateway: %v %s", r.err, r.stdout)
	}
	r = runCLI(t, "run", "--once", "--workspace", ws)
	if r.err != nil || !strings.Contains(r.stdout+r.stderr, "ready") || !strings.Contains(r.stderr, `server "mcpledger" runs mcpledger serve`) {
		t.Fatalf("run --once: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	res := getJSON(t, ws, "echo")
	if res.Config == nil || res.Config.Scope != "local" || res.Config.Source != claude || res.Status == nil || res.Status.State != "ready" || res.Status.Tools == 0 {
		t.Errorf("get after run: %+v %+v", res.Config, res.Status)
	}
	r = runCLI(t, "status", "echo", "--workspace", ws)
	if r.err != nil || !strings.Contains(r.stdout, "scope:     local ("+claude+")") || !strings.Contains(r.stdout, "status:") {
		t.Errorf("status echo: %v\n%s", r.err, r.stdout)
	}
	if r := runCLI(t, "remove", "echo", "--workspace", ws); r.err != nil || !strings.Contains(r.stdout, `removed server "echo" (local scope)`) {
		t.Fatalf("remove: %v %s%s", r.err, r.stdout, r.stderr)
	}
	if r := runCLI(t, "remove", "mcpledger"); r.err != nil {
		t.Fatal(r.err)
	}
	if r := runCLI(t, "run", "--once", "--workspace", ws); exitCode(r.err) != exitNothingToRun {
		t.Errorf("run --once after remove: %v (exit %d), want nothing to run", r.err, exitCode(r.err))
	}
	if b, _ := os.ReadFile(claude); !strings.Contains(string(b), `"numStartups": 3`) {
		t.Errorf("Claude Code's keys lost:\n%s", b)
	}
}

// compact is s without insignificant whitespace, its key order kept.
func compact(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

// TestAddHotReload: a running `mcpledger run` picks up a server added
// (and removed) in another process through its config watcher: no
// restart, no reload command.
func TestAddHotReload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	_, ws, jp := serversEnv(t)
	bin := runtimetest.BuildServer(t)
	if r := runCLI(t, "add", "--scope", "user", "first", "--", bin); r.err != nil {
		t.Fatal(r.err)
	}
	cmd, stderr := cliProcess(t, nil, "run", "--journal", jp, "--workspace", ws)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor := func(what string, ok func(getOut) bool, name string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			res := getJSON(t, ws, name)
			if res.Running && ok(res) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v %+v\nrun's stderr:\n%s", what, res.Config, res.Status, stderr.String())
			}
		}
	}
	ready := func(r getOut) bool { return r.Status != nil && r.Status.State == "ready" }
	waitFor("first never ready", ready, "first")
	r := runCLI(t, "add", "second", "--workspace", ws, "--", bin)
	if r.err != nil || !strings.Contains(r.stdout, "reloads its config by itself") {
		t.Fatalf("add beside run: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	waitFor("second never ready after add", ready, "second")
	if r := runCLI(t, "remove", "second", "--workspace", ws); r.err != nil {
		t.Fatal(r.err)
	}
	waitFor("second still configured after remove", func(r getOut) bool {
		return r.Config == nil && (r.Status == nil || r.Status.State == "stopped")
	}, "second")
	stopRun(t, cmd)
}

// TestAddRefusesBadTarget: a target file that is not JSON is refused
// with where and what to do, and loses nothing; so is a name already
// there (until --force).
func TestAddRefusesBadTarget(t *testing.T) {
	_, ws, _ := serversEnv(t)
	mcp := filepath.Join(ws, ".mcp.json")
	bad := "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"}\n  \n"
	if err := os.WriteFile(mcp, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "add", "--scope", "project", "--workspace", ws, "b", "--", "b")
	if r.err == nil || exitCode(r.err) != 1 || !strings.Contains(r.err.Error(), mcp+":4:3") || !strings.Contains(r.err.Error(), "fix the JSON syntax") {
		t.Errorf("add to a broken file: %v", r.err)
	}
	if b, _ := os.ReadFile(mcp); string(b) != bad {
		t.Errorf("the broken file changed:\n%s", b)
	}
	if err := os.WriteFile(mcp, []byte(`{"mcpServers": {"a": {"command": "a"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "add", "-s", "project", "--workspace", ws, "a", "--", "other")
	if r.err == nil || !strings.Contains(r.err.Error(), "--force") {
		t.Errorf("add over an existing name: %v", r.err)
	}
	r = runCLI(t, "add", "-s", "project", "--workspace", ws, "--force", "a", "--", "other")
	if r.err != nil || !strings.Contains(r.stdout, `replaced server "a"`) || !strings.Contains(r.stdout, "mcpledger approve a") {
		t.Errorf("add --force: %v\n%s", r.err, r.stdout)
	}
}

// TestAddUsage: command lines that cannot add anything are usage errors
// (exit 2) and write nothing.
func TestAddUsage(t *testing.T) {
	home, ws, _ := serversEnv(t)
	for _, args := range [][]string{
		{"add"},
		{"add", "x"},
		{"add", "--transport", "http", "x"},
		{"add", "--transport", "ftp", "x", "u"},
		{"add", "--env", "NOEQUALS", "x", "--", "cmd"},
		{"add", "--header", "X: y", "x", "--", "cmd"},
		{"add", "--transport", "http", "--env", "A=b", "x", "https://x.example"},
		{"add", "--scope", "global", "x", "--", "cmd"},
		{"add", "--scope", "project", "--workspace", filepath.Join(ws, "typo"), "x", "--", "cmd"},
		{"add-json", "x"},
		{"remove"},
		{"get"},
	} {
		r := runCLI(t, append(args, "--workspace", ws)...)
		if exitCode(r.err) != 2 {
			t.Errorf("%q: %v (exit %d), want a usage error", args, r.err, exitCode(r.err))
		}
	}
	r := runCLI(t, "add-json", "x", `{"type": "http"}`, "--workspace", ws)
	if r.err == nil || !strings.Contains(r.err.Error(), `"url" is empty`) || !strings.Contains(r.err.Error(), "nothing was written") {
		t.Errorf("add-json of an invalid entry: %v", r.err)
	}
	r = runCLI(t, "add", "--transport", "http", "-H", "Authorization: Bearer ${TOKEN}", "api", "https://api.example/mcp", "--scope", "user")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("files written in the workspace: %v", ents)
	}
	b, _ := os.ReadFile(filepath.Join(home, ".claude.json"))
	want := "{\n  \"mcpServers\": {\n    \"api\": {\n      \"type\": \"http\",\n      \"url\": \"https://api.example/mcp\",\n      \"headers\": {\n        \"Authorization\": \"Bearer ${TOKEN}\"\n      }\n    }\n  }\n}\n"
	if string(b) != want {
		t.Errorf("~/.claude.json:\n%s\nwant\n%s", b, want)
	}
}

// TestRemoveFindsTheScope: remove without --scope takes the name from
// the one scope that has it, and asks which when several do; add and
// remove say when another scope's entry of the name is the one in force.
func TestRemoveFindsTheScope(t *testing.T) {
	home, ws, _ := serversEnv(t)
	if r := runCLI(t, "add", "--scope", "project", "--workspace", ws, "dup", "--", "x"); r.err != nil || strings.Contains(r.stderr, "wins") {
		t.Fatalf("add dup to project: %v %s", r.err, r.stderr)
	}
	// The project scope wins over Claude Code's user scope: add says so.
	if r := runCLI(t, "add", "--scope", "user", "--workspace", ws, "dup", "--", "x"); r.err != nil || !strings.Contains(r.stderr, `"dup" from `+filepath.Join(ws, ".mcp.json")+" (project scope) wins over the one just added") {
		t.Fatalf("add dup to user: %v %s", r.err, r.stderr)
	}
	if r := runCLI(t, "add", "--scope", "user", "--workspace", ws, "once", "--", "x"); r.err != nil {
		t.Fatal(r.err)
	}
	r := runCLI(t, "remove", "dup", "--workspace", ws)
	if exitCode(r.err) != 2 || !strings.Contains(r.err.Error(), "project") || !strings.Contains(r.err.Error(), "user") {
		t.Errorf("remove of a name in two scopes: %v", r.err)
	}
	if r := runCLI(t, "remove", "once", "--workspace", ws); r.err != nil || !strings.Contains(r.stdout, "(user scope)") {
		t.Errorf("remove once: %v %s", r.err, r.stdout)
	}
	if r := runCLI(t, "remove", "dup", "--scope", "project", "--workspace", ws); r.err != nil || !strings.Contains(r.stdout, `"dup" is still configured in `+filepath.Join(home, ".claude.json")+" (user scope)") {
		t.Errorf("remove --scope project: %v %s", r.err, r.stdout)
	}
	if r := runCLI(t, "remove", "nosuch", "--workspace", ws); r.err == nil || !strings.Contains(r.err.Error(), "mcpledger get nosuch") {
		t.Errorf("remove of an unknown name: %v", r.err)
	}
}

// TestGetShape: get's text and --json, against golden files: where the
// server comes from, what it shadows, env and header names without their
// values, and no status without a journal.
func TestGetShape(t *testing.T) {
	home, ws, _ := serversEnv(t)
	for _, args := range [][]string{
		{"add", "--scope", "user", "--env", "TOKEN=s3cret-value", "gh", "--", "gh-mcp", "--read-only"},
		{"add", "--scope", "local", "--env", "TOKEN=other", "gh", "--", "gh-mcp"},
		{"add", "--scope", "project", "--transport", "http", "-H", "Authorization: Bearer s3cret-value", "api", "https://api.example/mcp"},
	} {
		r := runCLI(t, append([]string{args[0], "--workspace", ws}, args[1:]...)...)
		if r.err != nil {
			t.Fatalf("%v: %v", args, r.err)
		}
		// A value written out in the shared .mcp.json is pointed out.
		if shared := strings.Contains(r.stderr, `note: Authorization of "api" are written out in `+filepath.Join(ws, ".mcp.json")); shared != (args[2] == "project") {
			t.Errorf("%v: stderr %q", args, r.stderr)
		}
	}
	clean := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, ws, "$WS"), home, "$HOME") }
	var out strings.Builder
	for _, name := range []string{"gh", "api"} {
		r := runCLI(t, "get", name, "--workspace", ws)
		if r.err != nil {
			t.Fatal(r.err)
		}
		out.WriteString(r.stdout)
		r = runCLI(t, "get", name, "--json", "--workspace", ws)
		if r.err != nil {
			t.Fatal(r.err)
		}
		out.WriteString(r.stdout)
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("get shows a secret:\n%s", out.String())
	}
	goldenFile(t, "get.golden", clean(out.String()))
	if r := runCLI(t, "get", "nosuch", "--workspace", ws); r.err == nil || !strings.Contains(r.err.Error(), "mcpledger add nosuch") {
		t.Errorf("get nosuch: %v", r.err)
	}
}

// TestLoaderSources: run's loader reads Claude Code's ~/.claude.json
// (found through HOME, or CLAUDE_CONFIG_DIR); the demo's (flagsOnly)
// reads its own file alone, so it never launches the user's servers.
func TestLoaderSources(t *testing.T) {
	home, ws, _ := serversEnv(t)
	if r := runCLI(t, "add", "--scope", "user", "stray", "--", "/nonexistent-stray"); r.err != nil {
		t.Fatal(r.err)
	}
	alt := filepath.Join(home, "alt")
	t.Setenv("CLAUDE_CONFIG_DIR", alt)
	if r := runCLI(t, "add", "--scope", "user", "alt-stray", "--", "/nonexistent-alt"); r.err != nil {
		t.Fatal(r.err)
	}
	own := filepath.Join(ws, "own.json")
	if err := os.WriteFile(own, []byte(`{"mcpServers": {"own": {"command": "own"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{getenv: os.Getenv}
	names := func(cf configFlags) string {
		var out []string
		for _, s := range cf.loader(e)().Observed.Servers {
			out = append(out, s.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(configFlags{configs: []string{own}, workspace: ws}); got != "alt-stray,own" {
		t.Errorf("run's loader with CLAUDE_CONFIG_DIR: %s", got)
	}
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	if got := names(configFlags{configs: []string{own}, workspace: ws}); got != "own,stray" {
		t.Errorf("run's loader: %s", got)
	}
	if got := names(configFlags{configs: []string{own}, workspace: ws, flagsOnly: true}); got != "own" {
		t.Errorf("the demo's loader: %s", got)
	}
}
