package config

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// ---- parsing one config file: entries, syntax errors, types, hashes, JSONC ----

func TestConfigInvalidEntries(t *testing.T) {
	fixture, err := filepath.Abs("testdata/mixed.json")
	if err != nil {
		t.Fatal(err)
	}
	lc := Load(Sources{Flags: []string{fixture}, LookupEnv: envMap{"GH_PAT": "ghp_secret"}.lookup, Home: "/home/u"})
	if len(lc.Observed.Errors) != 0 {
		t.Fatalf("errors: %q", lc.Observed.Errors)
	}
	tests := []struct {
		name      string
		invalid   string // substring; "" = valid
		transport events.Transport
	}{
		{"files", "", events.TransportStdio},
		{"github", "", events.TransportHTTP},
		{"events", "", events.TransportSSE},
		{"parked", "", events.TransportStdio}, // disabled: not expanded, so ${MISSING} is fine
		{"nothing", `server "nothing": "command" is empty: set "command" for a stdio server or "url" for a remote one (` + fixture + ":19:16)", ""},
		{"both", `both "command" and "url" are set`, ""},
		{"websocket", `"type" "ws" is not supported: use "stdio", "http"`, ""},
		{"ftp", `"url" must be an absolute http:// or https:// URL`, events.TransportHTTP},
		{"negative", `"timeout" is negative`, events.TransportStdio},
		{"fraction", `"timeout" must be a whole number`, events.TransportStdio},
		{"numargs", `"args"[1] must be a string: quote it`, events.TransportStdio},
		{"numenv", `"env" key "PORT" must have a string value: quote it`, events.TransportStdio},
		{"notobject", `the entry must be a JSON object`, ""},
		{"stdiourl", `"type" is "stdio" but only "url" is set: set "command"`, events.TransportStdio},
		{"httpnourl", `"type" is "http" but "url" is empty: set "url"`, events.TransportHTTP},
		{"duphdr", `headers "X-Key" and "x-key" are the same HTTP header: keep one`, events.TransportHTTP},
		{"autoversion", "", events.TransportStdio},
		{"pinned", "", events.TransportStdio},
		{"badversion", `"protocolVersion" is "latest": write "auto" (the default) or a protocol version like "2025-11-25"`, events.TransportStdio},
	}
	if len(lc.Observed.Servers) != len(tests) {
		t.Errorf("%d servers, want %d", len(lc.Observed.Servers), len(tests))
	}
	for _, tt := range tests {
		s := server(t, lc, tt.name)
		if tt.invalid == "" && s.Invalid != "" || !strings.Contains(s.Invalid, tt.invalid) {
			t.Errorf("%s: Invalid = %q, want %q", tt.name, s.Invalid, tt.invalid)
		}
		if tt.invalid != "" && !strings.HasPrefix(s.Invalid, `server "`+tt.name+`": `) {
			t.Errorf("%s: Invalid %q does not name the server", tt.name, s.Invalid)
		}
		if s.Transport != tt.transport {
			t.Errorf("%s: transport %q, want %q", tt.name, s.Transport, tt.transport)
		}
		_, hasSpec := lc.Specs[tt.name]
		if want := tt.invalid == "" && !s.Disabled; hasSpec != want {
			t.Errorf("%s: spec present %v, want %v", tt.name, hasSpec, want)
		}
		if s.Hash == "" || s.Hash != events.ConfigHash(&s) {
			t.Errorf("%s: Hash %q is not ConfigHash", tt.name, s.Hash)
		}
	}
	files := server(t, lc, "files")
	if !slices.Equal(files.ExcludeTools, []string{"delete_file", "write_file"}) || files.TimeoutMs != 30000 {
		t.Errorf("files: exclude %q timeout %d", files.ExcludeTools, files.TimeoutMs)
	}
	if !slices.ContainsFunc(lc.Warnings, func(w string) bool {
		return strings.Contains(w, `server "files": unknown fields ignored: "autoApprove"`)
	}) {
		t.Errorf("no unknown-field warning for files: %q", lc.Warnings)
	}
	if !server(t, lc, "parked").Disabled {
		t.Error("parked not disabled")
	}
}

func TestConfigSyntaxError(t *testing.T) {
	tests := []struct {
		name, content, want string // want: after "path:"
	}{
		{"missing colon", "{\n  \"mcpServers\": {\n    \"a\" {}\n  }\n}\n", `3:9: invalid character '{' after object key`},
		{"trailing garbage", "{\"mcpServers\": {}} x", `1:20: invalid character 'x' after top-level value`},
		{"double comma", "{\n  \"mcpServers\": {\n    \"a\": {\"args\": [1,\n  2,,]}}}", `4:5: invalid character ',' looking for beginning of value`},
		{"truncated", "{\n  \"mcpServers\": {\n", `3:1: unexpected end of JSON input`},
		{"comment kept columns", "// header\n{\"mcpServers\": /* x */ {\"a\": tru}}", `2:33: invalid character '}' in literal true (expecting 'e')`},
		{"unterminated comment", "{\"mcpServers\": {}} /* x", `1:20: invalid character '/' after top-level value`},
		{"top-level array", "\n  [1, 2]", `2:3: the file must hold a JSON object`},
		{"servers not object", "{\"mcpServers\": [\"a\"]}", `1:16: "mcpServers" must be an object mapping server names`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, user := configDirs(t)
			bad := filepath.Join(ws, ".mcp.json")
			writeConfig(t, bad, tt.content)
			writeConfig(t, filepath.Join(user, "config.json"), servers(`"ok": `+stdio("ok")))
			lc := Load(Sources{Workspace: ws, UserDir: user})
			if len(lc.Observed.Errors) != 1 || !strings.HasPrefix(lc.Observed.Errors[0], bad+":"+tt.want) {
				t.Fatalf("errors %q, want one starting %q", lc.Observed.Errors, bad+":"+tt.want)
			}
			if len(lc.Observed.Servers) != 1 || lc.Observed.Servers[0].Name != "ok" {
				t.Errorf("servers %+v, want only the user's", lc.Observed.Servers)
			}
		})
	}
}

func TestConfigTypes(t *testing.T) {
	tests := []struct {
		entry string
		want  events.Transport
	}{
		{`{"command": "x"}`, events.TransportStdio},
		{`{"type": "stdio", "command": "x"}`, events.TransportStdio},
		{`{"url": "https://h/mcp"}`, events.TransportHTTP},
		{`{"type": "http", "url": "https://h/mcp"}`, events.TransportHTTP},
		{`{"type": "streamable-http", "url": "https://h/mcp"}`, events.TransportHTTP},
		{`{"type": "streamableHttp", "url": "https://h/mcp"}`, events.TransportHTTP},
		{`{"type": "sse", "url": "http://h/sse"}`, events.TransportSSE},
		{`{"type": "SSE", "url": "http://h/sse"}`, events.TransportSSE},
	}
	for _, tt := range tests {
		f := parseConfigFile("/c.json", []byte(servers(`"s": `+tt.entry)), events.ScopeUser, true)
		if len(f.servers) != 1 || f.servers[0].cfg.Transport != tt.want || len(f.servers[0].problems) > 0 {
			t.Errorf("%s: got %+v, want transport %q", tt.entry, f.servers, tt.want)
		}
	}
	f := parseConfigFile("/vscode.json", mustRead(t, "testdata/vscode.json"), events.ScopeFlag, false)
	if len(f.errs) > 0 || len(f.servers) != 2 {
		t.Fatalf("vscode.json: errs %q servers %+v", f.errs, f.servers)
	}
	if m := f.servers[0].cfg; m.Name != "memory" || m.Transport != events.TransportStdio || len(m.Args) != 2 {
		t.Errorf("memory = %+v", m)
	}
	if r := f.servers[1].cfg; r.Name != "remote" || r.Transport != events.TransportHTTP || r.Invalid != "" {
		t.Errorf("remote = %+v", r)
	}
	if !slices.ContainsFunc(f.warnings, func(w string) bool { return strings.Contains(w, `unknown top-level key "inputs"`) }) {
		t.Errorf("warnings %q lack the ignored inputs key", f.warnings)
	}
}

func TestConfigHashStable(t *testing.T) {
	a := `{"mcpServers": {"s": {"command": "srv", "args": ["a", "b"], "env": {"X": "1", "Y": "2"}, "headers": {"H": "v"}}}}`
	b := `{"mcpServers": {"s": {"headers": {"H": "v"}, "env": {"Y": "2", "X": "1"}, "args": ["a", "b"], "command": "srv", "timeout": 5000}}}`
	c := `{"mcpServers": {"s": {"command": "srv", "args": ["b", "a"], "env": {"X": "1", "Y": "2"}, "headers": {"H": "v"}}}}`
	hash := func(s string) string {
		f := parseConfigFile("/x.json", []byte(s), events.ScopeUser, true)
		return f.servers[0].cfg.Hash
	}
	if hash(a) != hash(b) {
		t.Error("hash depends on key order")
	}
	if hash(a) == hash(c) {
		t.Error("hash ignores args order")
	}
}

func TestConfigJSONCOffsets(t *testing.T) {
	in := []byte("\xef\xbb\xbf{ // c\n \"a\": [1, /* x,\n */ 2,], \"s\": \"//,]\",\n}")
	out := stripJSONC(in)
	if len(out) != len(in) || bytes.Count(out, []byte("\n")) != bytes.Count(in, []byte("\n")) {
		t.Fatalf("length or lines changed: %q", out)
	}
	var v struct {
		A []int
		S string
	}
	if err := json.Unmarshal(out, &v); err != nil || !slices.Equal(v.A, []int{1, 2}) || v.S != "//,]" {
		t.Errorf("stripJSONC(%q) = %q: %v %+v", in, out, err, v)
	}
	for _, bad := range []string{"[,]", "{,}", "[1,,]"} {
		if json.Valid(stripJSONC([]byte(bad))) {
			t.Errorf("stripJSONC made %q valid", bad)
		}
	}
}

// TestConfigMaxResultChars: "maxResultChars" is carried in the entry's
// call settings (0 included: no bound); anything but a whole number of 0
// or more makes the entry invalid with a message saying what to write.
func TestConfigMaxResultChars(t *testing.T) {
	path := filepath.Join(t.TempDir(), "servers.json")
	writeConfig(t, path, servers(
		`"big": {"command": "x", "maxResultChars": 200000}`,
		`"whole": {"command": "x", "maxResultChars": 0}`,
		`"unset": {"command": "x"}`,
		`"negative": {"command": "x", "maxResultChars": -1}`,
		`"fraction": {"command": "x", "maxResultChars": 1.5}`,
		`"text": {"command": "x", "maxResultChars": "100k"}`,
		`"huge": {"command": "x", "maxResultChars": 1e15}`))
	lc := Load(Sources{Flags: []string{path}, Home: "/home/u"})
	for name, want := range map[string]int{"big": 200000, "whole": 0} {
		got := lc.Specs[name].Call.MaxResultChars
		if got == nil || *got != want {
			t.Errorf("%s: MaxResultChars %v, want %d", name, got, want)
		}
	}
	if got := lc.Specs["unset"].Call.MaxResultChars; got != nil {
		t.Errorf("unset: MaxResultChars %d, want none", *got)
	}
	for _, name := range []string{"negative", "fraction", "text", "huge"} {
		s := server(t, lc, name)
		if !strings.Contains(s.Invalid, `"maxResultChars" must be a whole number of characters, 0 or more, like 100000 (0: results are not bounded)`) {
			t.Errorf("%s: Invalid = %q", name, s.Invalid)
		}
		if _, ok := lc.Specs[name]; ok {
			t.Errorf("%s: an invalid entry has a spec", name)
		}
	}
}
