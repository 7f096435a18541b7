package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// claudeHome returns a fresh workspace (canonical) and the path of a
// ~/.claude.json in a fresh home.
func claudeHome(t *testing.T) (ws, claude string) {
	t.Helper()
	ws, _ = configDirs(t)
	return ws, filepath.Join(filepath.Dir(ws), "home", ".claude.json")
}

// TestScopesRoundTrip: what Add writes in each scope is what Load reads,
// with Claude Code's scope and the right source; Remove takes it away.
// The project scope is gated, the local and user scopes are not.
func TestScopesRoundTrip(t *testing.T) {
	ws, claude := claudeHome(t)
	for _, scope := range []string{ScopeNameLocal, ScopeNameProject, ScopeNameUser} {
		p, err := PlaceOf(scope, ws, claude)
		if err != nil {
			t.Fatal(err)
		}
		name := "srv-" + scope
		if _, err := p.Add(name, StdioEntry("/bin/"+scope, []string{"-x"}, []events.KV{{Key: "K", Value: "v"}}), false); err != nil {
			t.Fatalf("%s: %v", scope, err)
		}
	}
	src := Sources{Workspace: ws, ClaudeFile: claude}
	lc := Load(src)
	if err := lc.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		scope  events.Scope
		source string
		gated  bool
	}{
		"srv-local":   {events.ScopeLocal, claude, false},
		"srv-project": {events.ScopeProject, filepath.Join(ws, ".mcp.json"), true},
		"srv-user":    {events.ScopeUser, claude, false},
	}
	for name, w := range want {
		s := server(t, lc, name)
		if s.Scope != w.scope || s.Source != w.source || s.Gated != w.gated || s.Invalid != "" {
			t.Errorf("%s: scope %s source %s gated %v invalid %q; want %+v", name, s.Scope, s.Source, s.Gated, s.Invalid, w)
		}
		spec, ok := lc.Specs[name]
		if !ok || spec.Command != "/bin/"+strings.TrimPrefix(name, "srv-") || !slices.Equal(spec.Args, []string{"-x"}) || !slices.Equal(spec.Env, []string{"K=v"}) {
			t.Errorf("%s: spec %+v", name, spec)
		}
	}
	if !slices.Contains(lc.Files, claude) {
		t.Errorf("Files %v lack %s: the watcher would not see an edit", lc.Files, claude)
	}
	for _, scope := range []string{ScopeNameLocal, ScopeNameProject, ScopeNameUser} {
		p, _ := PlaceOf(scope, ws, claude)
		if err := p.Remove("srv-" + scope); err != nil {
			t.Fatal(err)
		}
		if err := p.Remove("srv-" + scope); !errors.Is(err, ErrNoServer) {
			t.Errorf("removing %s twice: %v, want ErrNoServer", scope, err)
		}
	}
	if lc := Load(src); len(lc.Observed.Servers) != 0 {
		t.Errorf("after remove: %+v", lc.Observed.Servers)
	}
}

// TestClaudePrecedence: Claude Code's order (local, then project, then
// user) with mcpledger's own files placed: flags first, the user config
// and its drop-ins before ~/.claude.json's user scope. Another
// workspace's local servers are not read; "enableClaudeCodeConfig": false
// reads none of the file.
func TestClaudePrecedence(t *testing.T) {
	ws, claude := claudeHome(t)
	_, userDir := configDirs(t)
	writeConfig(t, claude, `{"numStartups": 1,
		"mcpServers": {"a": {"command": "claude-user"}, "b": {"command": "claude-user"}, "u": {"command": "claude-user"}},
		"projects": {
			"/elsewhere": {"mcpServers": {"other": {"command": "x"}}},
			"`+ws+`": {"allowedTools": [], "mcpServers": {"a": {"command": "claude-local"}, "l": {"command": "claude-local"}}}}}`)
	writeConfig(t, filepath.Join(ws, ".mcp.json"), servers(`"a": `+stdio("project"), `"b": `+stdio("project")))
	writeConfig(t, filepath.Join(userDir, "config.json"), servers(`"u": `+stdio("mcpledger-user")))
	src := Sources{Workspace: ws, ClaudeFile: claude, UserDir: userDir}
	lc := Load(src)
	got := map[string]string{}
	for _, s := range lc.Observed.Servers {
		got[s.Name] = s.Command + "/" + string(s.Scope)
	}
	want := map[string]string{"a": "claude-local/local", "b": "project/project", "u": "mcpledger-user/user", "l": "claude-local/local"}
	if !mapsEqual(got, want) {
		t.Errorf("servers %v, want %v", got, want)
	}
	if len(lc.Observed.Shadowed) != 4 { // a twice, b, u
		t.Errorf("shadowed %+v", lc.Observed.Shadowed)
	}
	for _, w := range lc.Warnings {
		if strings.Contains(w, "numStartups") || strings.Contains(w, "allowedTools") {
			t.Errorf("Claude Code's own keys warned about: %s", w)
		}
	}
	writeConfig(t, filepath.Join(userDir, "config.json"), `{"enableClaudeCodeConfig": false}`)
	lc = Load(src)
	for _, s := range lc.Observed.Servers {
		if s.Source == claude {
			t.Errorf("read %s with enableClaudeCodeConfig false", s.Name)
		}
	}
	if slices.Contains(lc.Files, claude) {
		t.Error("watching ~/.claude.json with enableClaudeCodeConfig false")
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestClaudeFileUnusable: a ~/.claude.json that is not JSON is unusable
// (with its position), as any config file; an empty or missing one holds
// no servers and is no error; its local scope is found through a
// symlinked workspace path too.
func TestClaudeFileUnusable(t *testing.T) {
	ws, claude := claudeHome(t)
	src := Sources{Workspace: ws, ClaudeFile: claude}
	if lc := Load(src); lc.Err() != nil {
		t.Errorf("missing file: %v", lc.Err())
	}
	writeConfig(t, claude, "  \n")
	if lc := Load(src); lc.Err() != nil {
		t.Errorf("empty file: %v", lc.Err())
	}
	writeConfig(t, claude, "{\n  \"mcpServers\": {,}\n}")
	lc := Load(src)
	if err := lc.Err(); err == nil || !strings.Contains(err.Error(), claude+":2:") || !strings.Contains(err.Error(), `"enableClaudeCodeConfig": false`) {
		t.Errorf("broken file: %v", err)
	}
	writeConfig(t, claude, `{"projects": {"`+ws+`": {"mcpServers": {"l": {"command": "x"}}}}}`)
	link := filepath.Join(filepath.Dir(ws), "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	lc = Load(Sources{Workspace: link, ClaudeFile: claude})
	if s := server(t, lc, "l"); s.Scope != events.ScopeLocal {
		t.Errorf("through a symlink: %+v", s)
	}
}

// TestAddRefusesExistingName: a name already in the scope is refused
// (the file untouched) unless force, which replaces the entry in place.
func TestAddRefusesExistingName(t *testing.T) {
	ws, claude := claudeHome(t)
	p, _ := PlaceOf(ScopeNameUser, ws, claude)
	writeConfig(t, claude, "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"old\"},\n    \"z\": {\"command\": \"z\"}\n  },\n  \"k\": 1\n}\n")
	before, _ := os.ReadFile(claude)
	if _, err := p.Add("a", StdioEntry("new", nil, nil), false); !errors.Is(err, ErrServerExists) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("Add over a: %v", err)
	}
	if after, _ := os.ReadFile(claude); string(after) != string(before) {
		t.Fatalf("refused add changed the file:\n%s", after)
	}
	replaced, err := p.Add("a", StdioEntry("new", nil, nil), true)
	if err != nil || !replaced {
		t.Fatalf("forced add: %v %v", replaced, err)
	}
	entries, err := p.Servers()
	if err != nil || len(entries) != 2 || entries[0].Name != "a" || !strings.Contains(string(entries[0].JSON), `"new"`) || entries[1].Name != "z" {
		t.Errorf("after force: %v %+v", err, entries)
	}
}

// TestEditFileModes: an existing file keeps its mode; a new project file
// is 0644 unless its entry holds env or header values (0600), a new
// ~/.claude.json is 0600; a symlinked file is edited through the link,
// which stays a link.
func TestEditFileModes(t *testing.T) {
	ws, claude := claudeHome(t)
	mode := func(path string) fs.FileMode {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}
	proj, _ := PlaceOf(ScopeNameProject, ws, claude)
	if _, err := proj.Add("a", StdioEntry("a", nil, nil), false); err != nil {
		t.Fatal(err)
	}
	if m := mode(proj.Path).Perm(); m != 0o644 {
		t.Errorf("new project file without secrets: %v", m)
	}
	os.Remove(proj.Path)
	if _, err := proj.Add("a", StdioEntry("a", nil, []events.KV{{Key: "TOKEN", Value: "t"}}), false); err != nil {
		t.Fatal(err)
	}
	if m := mode(proj.Path).Perm(); m != 0o600 {
		t.Errorf("new project file with env: %v", m)
	}
	user, _ := PlaceOf(ScopeNameUser, ws, claude)
	if _, err := user.Add("a", StdioEntry("a", nil, nil), false); err != nil {
		t.Fatal(err)
	}
	if m := mode(claude).Perm(); m != 0o600 {
		t.Errorf("new ~/.claude.json: %v", m)
	}
	if err := os.Chmod(claude, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := user.Add("b", StdioEntry("b", nil, nil), false); err != nil {
		t.Fatal(err)
	}
	if m := mode(claude).Perm(); m != 0o640 {
		t.Errorf("existing mode not kept: %v", m)
	}
	// A dotfiles manager's symlink.
	real := filepath.Join(filepath.Dir(ws), "dotfiles", "claude.json")
	writeConfig(t, real, `{"mcpServers": {}}`)
	link := filepath.Join(filepath.Dir(ws), "home2", ".claude.json")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	lp, _ := PlaceOf(ScopeNameUser, ws, link)
	if _, err := lp.Add("c", StdioEntry("c", nil, nil), false); err != nil {
		t.Fatal(err)
	}
	if mode(link)&fs.ModeSymlink == 0 {
		t.Error("the symlink was replaced by a file")
	}
	if b, _ := os.ReadFile(real); !strings.Contains(string(b), `"c"`) {
		t.Errorf("the link's target was not edited: %s", b)
	}
}

// TestEditFileRedoesOnConcurrentWrite: a file written by another program
// between the read and the rename (Claude Code saving ~/.claude.json) is
// not lost: the edit is redone on its new text. A file that never stops
// changing is left to the other writer, with ErrConcurrentEdit.
func TestEditFileRedoesOnConcurrentWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".claude.json")
	writeConfig(t, path, `{"numStartups": 1}`)
	calls := 0
	err := editFile(path, 0o600, func(old []byte) ([]byte, error) {
		calls++
		if calls == 1 { // the other writer, after our read
			writeConfig(t, path, `{"numStartups": 2}`)
		}
		d, err := newEditDoc(path, old)
		if err != nil {
			return nil, err
		}
		return d.set([]string{"mcpServers", "a"}, StdioEntry("a", nil, nil))
	})
	if err != nil || calls != 2 {
		t.Fatalf("editFile: %v after %d calls", err, calls)
	}
	got, _ := os.ReadFile(path)
	if !strings.Contains(string(got), `"numStartups": 2`) || !strings.Contains(string(got), `"a"`) {
		t.Errorf("lost an update:\n%s", got)
	}
	n := 0
	err = editFile(path, 0o600, func(old []byte) ([]byte, error) {
		n++
		writeConfig(t, path, `{"numStartups": `+strings.Repeat("9", n)+`}`)
		return []byte(`{"mine": true}`), nil
	})
	if !errors.Is(err, ErrConcurrentEdit) || n != editAttempts {
		t.Errorf("never-settling file: %v after %d calls", err, n)
	}
	if got, _ := os.ReadFile(path); strings.Contains(string(got), "mine") {
		t.Errorf("overwrote the other writer: %s", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// TestCheckEntry: an entry is checked as Load reads it before anything
// is written.
func TestCheckEntry(t *testing.T) {
	cases := []struct {
		entry, wantErr, wantWarn string
	}{
		{`{"type": "stdio", "command": "x", "args": ["${HOME}"]}`, "", ""},
		{`{"type": "http", "url": "https://x.example/mcp", "headers": {"Authorization": "Bearer ${T}"}}`, "", ""},
		{`{"type": "http"}`, `"url" is empty`, ""},
		{`{"command": 3}`, `"command" must be a string`, ""},
		{`[1]`, "must be a JSON object", ""},
		{`{"command": "x",}`, "invalid character", ""},
		{`{"command": "x", "alwaysAllow": []}`, "", `unknown fields ignored: "alwaysAllow"`},
	}
	for _, c := range cases {
		warns, err := CheckEntry("s", []byte(c.entry))
		switch {
		case c.wantErr == "" && err != nil, c.wantErr != "" && (!errors.Is(err, ErrInvalidEntry) || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want %q", c.entry, err, c.wantErr)
		case c.wantWarn != "" && (len(warns) != 1 || !strings.Contains(warns[0], c.wantWarn)):
			t.Errorf("%s: warnings %q, want %q", c.entry, warns, c.wantWarn)
		case c.wantWarn == "" && len(warns) > 0:
			t.Errorf("%s: unexpected warnings %q", c.entry, warns)
		}
	}
	for _, name := range []string{"", "a\x00b", "\xff"} {
		if _, err := CheckEntry(name, []byte(`{"command": "x"}`)); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("name %q: %v", name, err)
		}
	}
}

// TestPlaceOf: Claude Code's files and keys, $CLAUDE_CONFIG_DIR honoured.
func TestPlaceOf(t *testing.T) {
	ws, _ := configDirs(t)
	env := envMap{"CLAUDE_CONFIG_DIR": "/cfg"}
	if got := ClaudeFile(env.lookup, "/home/u"); got != "/cfg/.claude.json" {
		t.Errorf("ClaudeFile with CLAUDE_CONFIG_DIR: %s", got)
	}
	if got := ClaudeFile(envMap{"CLAUDE_CONFIG_DIR": "rel"}.lookup, "/home/u"); got != "/home/u/.claude.json" {
		t.Errorf("ClaudeFile with a relative CLAUDE_CONFIG_DIR: %s", got)
	}
	if got := ClaudeFile(nil, ""); got != "" {
		t.Errorf("ClaudeFile without home: %q", got)
	}
	cases := map[string]Place{
		ScopeNameProject: {ScopeNameProject, filepath.Join(ws, ".mcp.json"), []string{"mcpServers"}},
		ScopeNameUser:    {ScopeNameUser, "/h/.claude.json", []string{"mcpServers"}},
		ScopeNameLocal:   {ScopeNameLocal, "/h/.claude.json", []string{"projects", ws, "mcpServers"}},
	}
	for scope, want := range cases {
		got, err := PlaceOf(scope, ws, "/h/.claude.json")
		if err != nil || got.Path != want.Path || !slices.Equal(got.Keys, want.Keys) {
			t.Errorf("%s: %+v %v, want %+v", scope, got, err, want)
		}
	}
	if _, err := PlaceOf("global", ws, "/h/.claude.json"); err == nil {
		t.Error("unknown scope accepted")
	}
	if _, err := PlaceOf(ScopeNameUser, ws, ""); err == nil {
		t.Error("user scope without a home accepted")
	}
}

// TestSelfDisabled: an entry that runs the gateway itself (Sources.Self)
// is disabled with a warning naming it, whatever its source; the others
// run; without Self nothing is disabled.
func TestSelfDisabled(t *testing.T) {
	ws, claude := claudeHome(t)
	writeConfig(t, claude, `{"mcpServers": {"gw": {"type": "stdio", "command": "mcpledger", "args": ["serve", "--stdio"], "env": {}}, "other": {"command": "x"}}}`)
	self := func(command string, args []string) bool {
		return command == "mcpledger" && slices.Contains(args, "serve")
	}
	lc := Load(Sources{Workspace: ws, ClaudeFile: claude, Self: self})
	gw := server(t, lc, "gw")
	if !gw.Disabled || gw.Hash != events.ConfigHash(&gw) {
		t.Errorf("gw: disabled %v, hash %s (of its content: %s)", gw.Disabled, gw.Hash, events.ConfigHash(&gw))
	}
	if _, ok := lc.Specs["gw"]; ok {
		t.Error("gw would run")
	}
	if _, ok := lc.Specs["other"]; !ok {
		t.Error("other would not run")
	}
	if !slices.ContainsFunc(lc.Warnings, func(w string) bool { return strings.Contains(w, `server "gw" runs mcpledger serve`) }) {
		t.Errorf("no warning: %q", lc.Warnings)
	}
	if lc := Load(Sources{Workspace: ws, ClaudeFile: claude}); server(t, lc, "gw").Disabled {
		t.Error("disabled without Self")
	}
}

// TestLiteralValues: the env and header values written out, not taken
// from a variable.
func TestLiteralValues(t *testing.T) {
	got := LiteralValues([]byte(`{"env": {"A": "x", "B": "${B}", "C": "", "D": "pre-${D:-x}"}, "headers": {"Authorization": "Bearer t", "X": "${X}"}}`))
	if want := []string{"A", "Authorization"}; !slices.Equal(got, want) {
		t.Errorf("LiteralValues = %q, want %q", got, want)
	}
	if got := LiteralValues([]byte(`{"command": "x"}`)); len(got) != 0 {
		t.Errorf("no env: %q", got)
	}
}
