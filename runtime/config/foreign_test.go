package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestForeignFiles: where each client keeps its servers, per OS.
func TestForeignFiles(t *testing.T) {
	fe := ForeignEnv{Workspace: "/w", Home: "/h", ClaudeFile: "/h/.claude.json"}
	cases := []struct {
		from, goos string
		env        envMap
		want       []string // path:key
	}{
		{"claude-desktop", "linux", envMap{}, []string{"/h/.config/Claude/claude_desktop_config.json:mcpServers"}},
		{"claude-desktop", "linux", envMap{"XDG_CONFIG_HOME": "/x"}, []string{"/x/Claude/claude_desktop_config.json:mcpServers"}},
		{"claude-desktop", "darwin", envMap{}, []string{"/h/Library/Application Support/Claude/claude_desktop_config.json:mcpServers"}},
		{"claude-desktop", "windows", envMap{"APPDATA": "/appdata"}, []string{"/appdata/Claude/claude_desktop_config.json:mcpServers"}},
		{"vscode", "linux", envMap{}, []string{"/w/.vscode/mcp.json:servers", "/h/.config/Code/User/mcp.json:servers"}},
		{"vscode", "darwin", envMap{}, []string{"/w/.vscode/mcp.json:servers", "/h/Library/Application Support/Code/User/mcp.json:servers"}},
		{"cursor", "linux", envMap{}, []string{"/w/.cursor/mcp.json:mcpServers", "/h/.cursor/mcp.json:mcpServers"}},
		{"claude-code", "linux", envMap{}, []string{"/h/.claude.json:projects/" + canon("/w") + "/mcpServers", canon("/w") + "/.mcp.json:mcpServers", "/h/.claude.json:mcpServers"}},
	}
	for _, c := range cases {
		fe.GOOS, fe.LookupEnv = c.goos, c.env.lookup
		places, err := ForeignFiles(c.from, fe)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range places {
			got = append(got, filepath.ToSlash(p.Path)+":"+strings.Join(p.Keys, "/"))
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s on %s:\n got %q\nwant %q", c.from, c.goos, got, c.want)
		}
	}
	if _, err := ForeignFiles("windsurf", fe); err == nil || !strings.Contains(err.Error(), "claude-desktop, claude-code, vscode, cursor") {
		t.Errorf("unknown source: %v", err)
	}
}

func canon(p string) string { c, _ := canonicalPath(p); return c }

// TestForeign: VS Code's and Cursor's variables are written out or
// turned into ${VAR}; what only the other client can resolve is skipped
// with why; a remote entry gets the "type" Claude Code needs; key order
// is kept.
func TestForeign(t *testing.T) {
	fe := ForeignEnv{Workspace: `/w/my "ws"`, Home: "/h"}
	cases := []struct {
		in, want, skip string
	}{
		{`{"type":"stdio","command":"node","args":["${workspaceFolder}/s.js","${userHome}/x"],"env":{"T":"${env:TOKEN}","D":"${DB:-x}"}}`,
			`{"type":"stdio","command":"node","args":["/w/my \"ws\"/s.js","/h/x"],"env":{"T":"${TOKEN}","D":"${DB:-x}"}}`, ""},
		{`{"url":"https://x.example/mcp","headers":{"A":"b"}}`, `{"type":"http","url":"https://x.example/mcp","headers":{"A":"b"}}`, ""},
		{`{"type":"sse","url":"https://x.example/sse"}`, `{"type":"sse","url":"https://x.example/sse"}`, ""},
		{`{"type":"http","url":"https://x","headers":{"Authorization":"Bearer ${input:token}"}}`, "", "${input:token}"},
		{`{"command":"x","args":["${command:pickFile}"]}`, "", "${command:pickFile}"},
		{`{"command":"x","envFile":"${workspaceFolder}/.env"}`, "", `"envFile"`},
		{`[1]`, "", "not a JSON object"},
	}
	for _, c := range cases {
		out, _, skip := Foreign([]byte(c.in), fe)
		switch {
		case c.skip != "" && !strings.Contains(skip, c.skip):
			t.Errorf("%s: skip %q, want one naming %s", c.in, skip, c.skip)
		case c.skip == "" && (skip != "" || string(out) != c.want):
			t.Errorf("%s:\n got %s (skip %q)\nwant %s", c.in, out, skip, c.want)
		}
	}
	// Without a workspace, ${workspaceFolder} cannot be written out.
	if _, _, skip := Foreign([]byte(`{"command":"${workspaceFolder}/x"}`), ForeignEnv{}); !strings.Contains(skip, "${workspaceFolder}") {
		t.Errorf("no workspace: skip %q", skip)
	}
}
