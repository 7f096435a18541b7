package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// envMap is a process environment for tests.
type envMap map[string]string

func (e envMap) lookup(k string) (string, bool) { v, ok := e[k]; return v, ok }

func writeConfig(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// configDirs returns a fresh workspace and user config dir (canonical).
func configDirs(t *testing.T) (ws, user string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, user = filepath.Join(root, "ws"), filepath.Join(root, "xdg", "mcpledger")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws, user
}

func server(tb testing.TB, lc Reading, name string) events.ServerConfig {
	tb.Helper()
	for _, s := range lc.Observed.Servers {
		if s.Name == name {
			return s
		}
	}
	tb.Fatalf("no server %q in %+v", name, lc.Observed.Servers)
	return events.ServerConfig{}
}

func stdio(cmd string) string { return `{"command": "` + cmd + `"}` }

func servers(entries ...string) string {
	return `{"mcpServers": {` + strings.Join(entries, ", ") + `}}`
}

func TestConfigPrecedence(t *testing.T) {
	// Every source defines "shared"; present says which sources exist.
	tests := []struct {
		name      string
		present   []string // flag1, flag2, project, user, dropA, dropB
		wantScope events.Scope
		wantFrom  string
	}{
		{"all", []string{"flag1", "flag2", "project", "user", "dropA", "dropB"}, events.ScopeFlag, "flag1"},
		{"earlier flag wins", []string{"flag2", "project"}, events.ScopeFlag, "flag2"},
		{"project over user", []string{"project", "user", "dropA"}, events.ScopeProject, "project"},
		{"user over drop-ins", []string{"user", "dropA", "dropB"}, events.ScopeUser, "user"},
		{"earlier drop-in name wins", []string{"dropA", "dropB"}, events.ScopeDropIn, "dropA"},
		{"last drop-in alone", []string{"dropB"}, events.ScopeDropIn, "dropB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, user := configDirs(t)
			flagDir := t.TempDir()
			paths := map[string]string{
				"flag1":   filepath.Join(flagDir, "one.json"),
				"flag2":   filepath.Join(flagDir, "two.json"),
				"project": filepath.Join(ws, ".mcp.json"),
				"user":    filepath.Join(user, "config.json"),
				"dropA":   filepath.Join(user, "servers.d", "10-a.json"),
				"dropB":   filepath.Join(user, "servers.d", "20-b.json"),
			}
			for _, p := range tt.present {
				writeConfig(t, paths[p], servers(`"shared": `+stdio(p), `"only-`+p+`": `+stdio(p)))
			}
			// A dot file and a non-JSON file in servers.d are skipped.
			writeConfig(t, filepath.Join(user, "servers.d", ".#00.json"), servers(`"shared": `+stdio("lock")))
			writeConfig(t, filepath.Join(user, "servers.d", "00.json.bak"), servers(`"shared": `+stdio("bak")))

			lc := Load(Sources{
				Flags:     []string{paths["flag1"], paths["flag2"]},
				Workspace: ws, UserDir: user, Home: "/home/u",
			})
			got := server(t, lc, "shared")
			if got.Scope != tt.wantScope || got.Source != paths[tt.wantFrom] || got.Command != tt.wantFrom {
				t.Errorf("shared = scope %q source %q command %q; want %q from %s", got.Scope, got.Source, got.Command, tt.wantScope, paths[tt.wantFrom])
			}
			if got.Gated != (tt.wantScope == events.ScopeProject) {
				t.Errorf("Gated = %v for scope %q", got.Gated, got.Scope)
			}
			for _, p := range tt.present {
				s := server(t, lc, "only-"+p)
				if s.Source != paths[p] {
					t.Errorf("only-%s from %s, want %s", p, s.Source, paths[p])
				}
			}
			if n := len(lc.Observed.Servers); n != len(tt.present)+1 {
				t.Errorf("%d servers, want %d", n, len(tt.present)+1)
			}
			if !slices.IsSortedFunc(lc.Observed.Servers, func(a, b events.ServerConfig) int { return strings.Compare(a.Name, b.Name) }) {
				t.Error("servers not sorted by name")
			}
			// Each entry of "shared" but the winner is journaled as
			// shadowed, in source order, naming the winner's entry.
			var losers []string
			for _, p := range []string{"flag1", "flag2", "project", "user", "dropA", "dropB"} {
				if slices.Contains(tt.present, p) && p != tt.wantFrom {
					losers = append(losers, paths[p])
				}
			}
			if len(lc.Observed.Shadowed) != len(losers) {
				t.Fatalf("shadowed %+v, want %d entries", lc.Observed.Shadowed, len(losers))
			}
			for i, sh := range lc.Observed.Shadowed {
				if sh.Name != "shared" || sh.At != losers[i]+":1:27" || sh.Winner != paths[tt.wantFrom]+":1:27" {
					t.Errorf("shadowed[%d] = %+v, want shared at %s:1:27 lost to %s:1:27", i, sh, losers[i], paths[tt.wantFrom])
				}
			}
			// Only the explicitly named flag files are errors when missing.
			wantErrs := 0
			for _, f := range []string{"flag1", "flag2"} {
				if !slices.Contains(tt.present, f) {
					wantErrs++
				}
			}
			if len(lc.Observed.Errors) != wantErrs {
				t.Errorf("errors %q, want %d (missing flag files)", lc.Observed.Errors, wantErrs)
			}
			for _, p := range []string{"project", "user", "dropA", "dropB"} {
				if slices.Contains(tt.present, p) && !slices.Contains(lc.Files, paths[p]) {
					t.Errorf("Files %q lacks %s", lc.Files, paths[p])
				}
			}
			if !slices.Contains(lc.Files, filepath.Join(user, "servers.d")) {
				t.Errorf("Files %q lacks the drop-in directory", lc.Files)
			}
		})
	}
}

func TestConfigProjectDisabled(t *testing.T) {
	for _, enable := range []string{"true", "false", `"no"`} {
		t.Run(enable, func(t *testing.T) {
			ws, user := configDirs(t)
			writeConfig(t, filepath.Join(ws, ".mcp.json"), servers(`"proj": `+stdio("p")))
			writeConfig(t, filepath.Join(user, "config.json"), `{"enableProjectConfig": `+enable+`, "mcpServers": {"mine": `+stdio("m")+`}}`)
			lc := Load(Sources{Workspace: ws, UserDir: user})
			names := []string{}
			for _, s := range lc.Observed.Servers {
				names = append(names, s.Name)
			}
			want := []string{"mine", "proj"}
			if enable != "true" {
				want = []string{"mine"} // a malformed value fails closed
			}
			if !slices.Equal(names, want) {
				t.Errorf("servers %q, want %q", names, want)
			}
			if enable == `"no"` && (len(lc.Observed.Errors) != 1 || !strings.Contains(lc.Observed.Errors[0], "enableProjectConfig")) {
				t.Errorf("errors %q, want one about enableProjectConfig", lc.Observed.Errors)
			}
		})
	}
}

func mustRead(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestConfigExpansion(t *testing.T) {
	proc := envMap{"GH_PAT": "ghp_fromprocess", "TOKEN": "process-token", "EMPTY": "", "DIR": "/srv"}
	tests := []struct {
		name    string
		entry   string
		invalid string // substring; "" = valid
		check   func(t *testing.T, s Spec)
	}{
		{"header from server env", `{"url": "https://h/mcp", "env": {"TOKEN": "${GH_PAT}"}, "headers": {"Authorization": "Bearer ${TOKEN}"}}`, "",
			func(t *testing.T, s Spec) {
				if got := s.Headers["Authorization"]; got != "Bearer ghp_fromprocess" {
					t.Errorf("Authorization = %q, want the server env's TOKEN", got)
				}
			}},
		{"header never from process env", `{"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}`,
			`header "Authorization" uses ${TOKEN}, which the server's "env" block does not set: add "TOKEN" to "env"`, nil},
		{"url from server env", `{"url": "https://h/${P}/mcp", "env": {"P": "v1"}}`, "",
			func(t *testing.T, s Spec) {
				if s.URL != "https://h/v1/mcp" {
					t.Errorf("URL = %q", s.URL)
				}
			}},
		{"url never from process env", `{"url": "https://h/${DIR}/mcp"}`, `"url" uses ${DIR}, which the server's "env" block does not set`, nil},
		{"unresolved in args", `{"command": "srv", "args": ["--token", "${NOPE}"]}`,
			`"args"[1] uses ${NOPE}, which is not set: set NOPE in mcpledger's environment or write ${NOPE:-default}`, nil},
		{"unresolved in env", `{"command": "srv", "env": {"K": "${NOPE}"}}`, `"env" key "K" uses ${NOPE}, which is not set`, nil},
		{"malformed", `{"command": "srv", "args": ["${1X}"]}`, `"args"[0] has a malformed ${...}: write ${NAME} or ${NAME:-default}`, nil},
		{"defaults", `{"command": "${DIR}/bin/${NAME:-srv}", "args": ["${EMPTY:-fallback}", "${EMPTY}", "$HOME", "${DIR:-x}"], "cwd": "${DIR}/work"}`, "",
			func(t *testing.T, s Spec) {
				want := []string{"fallback", "", "$HOME", "/srv"}
				if s.Command != "/srv/bin/srv" || !slices.Equal(s.Args, want) || s.Cwd != "/srv/work" {
					t.Errorf("command %q args %q cwd %q; want /srv/bin/srv %q /srv/work", s.Command, s.Args, s.Cwd, want)
				}
			}},
		{"tilde", `{"command": "~/bin/srv", "cwd": "~"}`, "",
			func(t *testing.T, s Spec) {
				if s.Command != "/home/u/bin/srv" || s.Cwd != "/home/u" {
					t.Errorf("command %q cwd %q", s.Command, s.Cwd)
				}
			}},
		{"cwd relative and default", `{"command": "srv", "env": {"B": "2", "A": "${DIR}"}}`, "",
			func(t *testing.T, s Spec) {
				if !filepath.IsAbs(s.Cwd) || filepath.Base(s.Cwd) != "ws" {
					t.Errorf("cwd %q, want the workspace", s.Cwd)
				}
				if !slices.Equal(s.Env, []string{"A=/srv", "B=2"}) {
					t.Errorf("env %q", s.Env)
				}
			}},
		{"header line break", `{"url": "https://h/mcp", "env": {"V": "a\r\nX-Evil: 1"}, "headers": {"X": "${V}"}}`, `header "X" has a line break`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, _ := configDirs(t)
			writeConfig(t, filepath.Join(ws, "c.json"), servers(`"s": `+tt.entry))
			lc := Load(Sources{Flags: []string{filepath.Join(ws, "c.json")}, Workspace: ws, LookupEnv: proc.lookup, Home: "/home/u"})
			s := server(t, lc, "s")
			if tt.invalid == "" && s.Invalid != "" || !strings.Contains(s.Invalid, tt.invalid) {
				t.Fatalf("Invalid = %q, want %q", s.Invalid, tt.invalid)
			}
			spec, ok := lc.Specs["s"]
			if ok != (tt.invalid == "") {
				t.Fatalf("spec present %v", ok)
			}
			if tt.check != nil {
				tt.check(t, spec)
			}
			// The journaled form keeps the text as written.
			if strings.Contains(tt.entry, `"command": "~/bin/srv"`) && s.Command != "~/bin/srv" {
				t.Errorf("journaled command %q, want as written", s.Command)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	env := envMap{"A": "x", "E": ""}.lookup
	tests := []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"$A ${A}$", "$A x$", ""},
		{"${A}${A}", "xx", ""},
		{"${B:-d e}-${A:-no}", "d e-x", ""},
		{"${E:-d}|${E}", "d|", ""},
		{"${B:-}", "", ""},
		{"${B}", "", "${B} is not set"},
		{"${", "", "malformed"},
		{"${A", "", "malformed"},
		{"${A:-x", "", "malformed"},
		{"${A-x}", "", "malformed"},
		{"${}", "", "malformed"},
		{"${9}", "", "malformed"},
	}
	for _, tt := range tests {
		got, err := expand(tt.in, env)
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("expand(%q) = %q, %v; want %q, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// TestConfigRedaction plants secrets in env and headers, literally and
// through ${VAR}, and checks that neither the JSON nor the journal
// encoding of the observation, nor any warning, holds one.
func TestConfigRedaction(t *testing.T) {
	secrets := []string{"lit-env-S3CRET", "proc-env-S3CRET", "lit-header-S3CRET", "proc-header-S3CRET", "url-S3CRET",
		"arg-S3CRET-1", "arg-S3CRET-2", "arg-S3CRET-3", "arg-S3CRET-4", "lit-url-S3CRET", "lit-urlpw-S3CRET"}
	ws, user := configDirs(t)
	writeConfig(t, filepath.Join(ws, ".mcp.json"), servers(
		`"local": {"command": "srv", "env": {"A": "lit-env-S3CRET", "B": "${PROC_ENV}"},
		   "args": ["--api-key", "arg-S3CRET-1", "--password=arg-S3CRET-2", "--db", "postgres://u:arg-S3CRET-3@h/db",
		            "--token", "${GH_TOKEN}", "--max-tokens", "100", "--token-file", "/run/tok", "--password", "$arg-S3CRET-4"]}`,
		`"literal": {"url": "https://h/mcp?api_key=lit-url-S3CRET"}`,
		`"userinfo": {"url": "https://bot:lit-urlpw-S3CRET@h/mcp"}`,
		`"remote": {"url": "https://h/mcp?k=${K}", "env": {"K": "url-S3CRET", "T": "${PROC_HDR}"},
		   "headers": {"X-Lit": "lit-header-S3CRET", "Authorization": "Bearer ${T}"}, "bogus": 1}`,
		`"broken": {"url": "https://h/mcp", "env": {"T": "${PROC_HDR}"}, "headers": {"X": "${T}", "Y": "${U}"}}`,
	))
	lc := Load(Sources{Workspace: ws, UserDir: user, LookupEnv: envMap{"PROC_ENV": "proc-env-S3CRET", "PROC_HDR": "proc-header-S3CRET", "GH_TOKEN": "gh-value"}.lookup})
	obs := lc.Observed
	obs.Trigger = "start"
	js, err := json.Marshal(obs)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := events.Encode(&events.Event{Kind: events.KindConfigObserved, Payload: &obs})
	if err != nil {
		t.Fatal(err)
	}
	warn := []byte(strings.Join(lc.Warnings, "\n"))
	for _, s := range secrets {
		for what, b := range map[string][]byte{"json": js, "msgpack": mp, "warnings": warn} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds secret %q", what, s)
			}
		}
	}
	// The runtime still gets them.
	if got := lc.Specs["local"].Args; !slices.Equal(got, []string{"--api-key", "arg-S3CRET-1", "--password=arg-S3CRET-2", "--db",
		"postgres://u:arg-S3CRET-3@h/db", "--token", "gh-value", "--max-tokens", "100", "--token-file", "/run/tok", "--password", "$arg-S3CRET-4"}) {
		t.Errorf("resolved args %q", got)
	}
	if got := lc.Specs["literal"].URL; got != "https://h/mcp?api_key=lit-url-S3CRET" {
		t.Errorf("resolved url %q", got)
	}
	// What holds no secret is journaled as written.
	if got := server(t, lc, "local").Args; got[5] != "--token" || got[6] != "${GH_TOKEN}" || got[8] != "100" || got[10] != "/run/tok" {
		t.Errorf("journaled args %q", got)
	}
	if got := lc.Specs["remote"].Headers["Authorization"]; got != "Bearer proc-header-S3CRET" {
		t.Errorf("resolved Authorization = %q", got)
	}
	if !slices.Contains(lc.Specs["local"].Env, "B=proc-env-S3CRET") {
		t.Errorf("resolved env %q", lc.Specs["local"].Env)
	}
	if got := server(t, lc, "broken").Invalid; !strings.Contains(got, "${U}") {
		t.Errorf("broken.Invalid = %q", got)
	}
	remote := server(t, lc, "remote")
	for _, kv := range append(remote.Env, remote.Headers...) {
		if !events.IsHashedValue(kv.Value) {
			t.Errorf("remote %s = %q is not a digest", kv.Key, kv.Value)
		}
	}
	if remote.Headers[0].Key != "Authorization" || remote.Headers[0].Value != events.HashValue("Bearer ${T}") {
		t.Errorf("headers %+v: want the as-written value's digest, sorted", remote.Headers)
	}
}

func TestConfigTrust(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"real/proj/sub", "realx/proj", "home/code/p"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	tests := []struct {
		name      string
		workspace string
		trusted   []string
		want      bool
		wantErr   string
	}{
		{"workspace through symlink", "link/proj", []string{"real"}, true, ""},
		{"trusted folder through symlink", "real/proj/sub", []string{"link/proj"}, true, ""},
		{"equal", "real/proj", []string{"real/proj"}, true, ""},
		{"sibling with common prefix", "realx/proj", []string{"real"}, false, ""},
		{"parent of trusted", "real", []string{"real/proj"}, false, ""},
		{"tilde", "home/code/p", []string{"~/code"}, true, ""},
		{"relative entry", "real/proj", []string{"real"}, false, "is not absolute"},
		{"none", "real/proj", nil, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user := filepath.Join(t.TempDir(), "mcpledger")
			var folders []string
			for _, f := range tt.trusted {
				if !strings.HasPrefix(f, "~") && tt.wantErr == "" {
					f = filepath.Join(root, f)
				}
				folders = append(folders, f)
			}
			b, _ := json.Marshal(map[string]any{"trustedFolders": folders})
			writeConfig(t, filepath.Join(user, "config.json"), string(b))
			lc := Load(Sources{Workspace: filepath.Join(root, tt.workspace), UserDir: user, Home: home})
			if lc.Observed.Trusted != tt.want {
				t.Errorf("Trusted = %v, want %v", lc.Observed.Trusted, tt.want)
			}
			if want, _ := filepath.EvalSymlinks(filepath.Join(root, tt.workspace)); lc.Observed.Workspace != want {
				t.Errorf("Workspace = %q, want canonical %q", lc.Observed.Workspace, want)
			}
			if tt.wantErr != "" && (len(lc.Observed.Errors) != 1 || !strings.Contains(lc.Observed.Errors[0], tt.wantErr)) {
				t.Errorf("errors %q, want %q", lc.Observed.Errors, tt.wantErr)
			}
		})
	}
}

func TestConfigSettings(t *testing.T) {
	tests := []struct {
		name        string
		user        string
		wantAllowed []string
		wantHas     bool
		wantExcl    []string
		wantErr     string
	}{
		{"absent", `{}`, nil, false, nil, ""},
		{"null is absent", `{"allowed": null}`, nil, false, nil, ""},
		{"empty denies all", `{"allowed": []}`, []string{}, true, nil, ""},
		{"sorted set", `{"allowed": ["b", "a", "b"], "excluded": ["z", "y"]}`, []string{"a", "b"}, true, []string{"y", "z"}, ""},
		{"malformed allowed denies all", `{"allowed": "github"}`, []string{}, true, nil, `"allowed" must be an array of server names; every server is denied`},
		{"malformed excluded", `{"excluded": [1]}`, nil, false, nil, `"excluded" must be an array`},
		{"unusable file has no settings", `{"allowed": ["a"], "mcpServers": 5}`, nil, false, nil, `"mcpServers" must be an object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, user := configDirs(t)
			writeConfig(t, filepath.Join(user, "config.json"), tt.user)
			// Settings in a project file never count.
			writeConfig(t, filepath.Join(ws, ".mcp.json"), `{"allowed": ["evil"], "trustedFolders": ["/"], "mcpServers": {}}`)
			lc := Load(Sources{Workspace: ws, UserDir: user, LaunchBound: []string{"b", "a"}, HasLaunchBound: true})
			o := lc.Observed
			if !reflect.DeepEqual(o.Allowed, tt.wantAllowed) || o.HasAllowed != tt.wantHas || !reflect.DeepEqual(o.Excluded, tt.wantExcl) {
				t.Errorf("allowed %#v (has %v) excluded %#v; want %#v (%v) %#v", o.Allowed, o.HasAllowed, o.Excluded, tt.wantAllowed, tt.wantHas, tt.wantExcl)
			}
			if o.Trusted {
				t.Error("a project file trusted itself")
			}
			if !slices.Equal(o.LaunchBound, []string{"a", "b"}) || !o.HasLaunchBound {
				t.Errorf("launch bound %q %v", o.LaunchBound, o.HasLaunchBound)
			}
			if tt.wantErr == "" && len(o.Errors) > 0 || tt.wantErr != "" && (len(o.Errors) != 1 || !strings.Contains(o.Errors[0], tt.wantErr)) {
				t.Errorf("errors %q, want %q", o.Errors, tt.wantErr)
			}
			if !slices.ContainsFunc(lc.Warnings, func(w string) bool { return strings.Contains(w, `"allowed" is read only from the user config`) }) {
				t.Errorf("no warning about settings in the project file: %q", lc.Warnings)
			}
		})
	}
}

func TestConfigMissingSources(t *testing.T) {
	ws, user := configDirs(t)
	lc := Load(Sources{Workspace: ws, UserDir: user})
	if len(lc.Observed.Errors) != 0 || len(lc.Observed.Servers) != 0 {
		t.Errorf("no files: errors %q servers %+v", lc.Observed.Errors, lc.Observed.Servers)
	}
	lc = Load(Sources{Flags: []string{filepath.Join(ws, "nope.json")}})
	if len(lc.Observed.Errors) != 1 || !strings.Contains(lc.Observed.Errors[0], "nope.json: --mcp-config file does not exist: check the path") {
		t.Errorf("errors %q", lc.Observed.Errors)
	}
	lc = Load(Sources{Flags: []string{ws}})
	if len(lc.Observed.Errors) != 1 || !strings.Contains(lc.Observed.Errors[0], "cannot read: is a directory") {
		t.Errorf("errors %q", lc.Observed.Errors)
	}
}

func TestConfigEqual(t *testing.T) {
	base := func() events.ConfigObserved {
		f := parseConfigFile("/x.json", mustRead(t, "testdata/mixed.json"), events.ScopeUser, true)
		o := events.ConfigObserved{Trigger: "start", Workspace: "/w", Excluded: []string{"a", "b"}}
		for _, s := range f.servers {
			o.Servers = append(o.Servers, s.cfg)
		}
		return o
	}
	tests := []struct {
		name   string
		mutate func(o *events.ConfigObserved)
		want   bool
	}{
		{"identical", func(o *events.ConfigObserved) {}, true},
		{"trigger ignored", func(o *events.ConfigObserved) { o.Trigger = "watch" }, true},
		{"server order", func(o *events.ConfigObserved) { slices.Reverse(o.Servers) }, true},
		{"env order", func(o *events.ConfigObserved) {
			o.Servers[0].Env = append(o.Servers[0].Env, events.KV{Key: "ZZ", Value: "1"})
			slices.Reverse(o.Servers[0].Env)
		}, false},
		{"approval, launches and crashes ignored", func(o *events.ConfigObserved) {
			o.Servers[0].Approval = events.ApprovalFact{Decision: "approve"}
			o.Servers[0].RecentLaunches, o.Servers[0].RecentCrashes = []int64{1}, []int64{2}
		}, true},
		{"args order", func(o *events.ConfigObserved) { slices.Reverse(o.Servers[0].Args) }, false},
		{"tool filter order", func(o *events.ConfigObserved) { slices.Reverse(o.Servers[0].ExcludeTools) }, true},
		{"server removed", func(o *events.ConfigObserved) { o.Servers = o.Servers[1:] }, false},
		{"server renamed", func(o *events.ConfigObserved) { o.Servers[0].Name = "other" }, false},
		{"field changed", func(o *events.ConfigObserved) { o.Servers[1].TimeoutMs = 1 }, false},
		{"excluded as set", func(o *events.ConfigObserved) { o.Excluded = []string{"b", "a", "a"} }, true},
		{"excluded changed", func(o *events.ConfigObserved) { o.Excluded = []string{"a"} }, false},
		{"allowed absent vs empty", func(o *events.ConfigObserved) { o.Allowed, o.HasAllowed = []string{}, true }, false},
		{"launch bound absent vs empty", func(o *events.ConfigObserved) { o.HasLaunchBound = true }, false},
		{"trust", func(o *events.ConfigObserved) { o.Trusted = true }, false},
		{"errors", func(o *events.ConfigObserved) { o.Errors = []string{"x:1:1: bad"} }, false},
		{"shadowed", func(o *events.ConfigObserved) {
			o.Shadowed = []events.ShadowedServer{{Name: "a", At: "/y.json:1:1", Winner: "/x.json:2:2"}}
		}, false},
	}
	for _, tt := range tests {
		a, b := base(), base()
		tt.mutate(&b)
		if got := Equal(a, b); got != tt.want {
			t.Errorf("%s: Equal = %v, want %v", tt.name, got, tt.want)
		}
		if got := Equal(b, a); got != tt.want {
			t.Errorf("%s (swapped): Equal = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Shadowed entries compare as a set of (name, at, winner).
	sh := func(at ...string) events.ConfigObserved {
		var o events.ConfigObserved
		for _, a := range at {
			o.Shadowed = append(o.Shadowed, events.ShadowedServer{Name: "n", At: a, Winner: "/w.json:1:1"})
		}
		return o
	}
	for _, tt := range []struct {
		a, b events.ConfigObserved
		want bool
	}{
		{sh("/a:1:1", "/b:1:1"), sh("/b:1:1", "/a:1:1"), true},
		{sh("/a:1:1"), sh("/b:1:1"), false},
		{sh("/a:1:1"), events.ConfigObserved{Shadowed: []events.ShadowedServer{{Name: "n", At: "/a:1:1", Winner: "/v.json:1:1"}}}, false},
		{sh("/a:1:1"), events.ConfigObserved{Shadowed: []events.ShadowedServer{{Name: "m", At: "/a:1:1", Winner: "/w.json:1:1"}}}, false},
	} {
		if got := Equal(tt.a, tt.b); got != tt.want {
			t.Errorf("Equal(%+v, %+v) = %v, want %v", tt.a.Shadowed, tt.b.Shadowed, got, tt.want)
		}
	}
	// Absent servers and excluded lists equal empty ones.
	if !Equal(events.ConfigObserved{}, events.ConfigObserved{Servers: []events.ServerConfig{}, Excluded: []string{}}) {
		t.Error("nil servers != empty servers")
	}
	if !Equal(events.ConfigObserved{Allowed: []string{"a", "b"}, HasAllowed: true}, events.ConfigObserved{Allowed: []string{"b", "a"}, HasAllowed: true}) {
		t.Error("allowed compared by order")
	}
	// A reading compares equal to a second reading of the same files.
	ws, user := configDirs(t)
	writeConfig(t, filepath.Join(user, "config.json"), string(mustRead(t, "testdata/claude.json")))
	src := Sources{Workspace: ws, UserDir: user, LookupEnv: envMap{"PGPASSWORD": "pw"}.lookup, Home: "/home/u"}
	if !Equal(Load(src).Observed, Load(src).Observed) {
		t.Error("two readings of the same files differ")
	}
}

func TestUserConfigDir(t *testing.T) {
	tests := []struct {
		env  envMap
		home string
		want string
	}{
		{envMap{"XDG_CONFIG_HOME": "/x"}, "/h", "/x/mcpledger"},
		{envMap{"XDG_CONFIG_HOME": "rel"}, "/h", "/h/.config/mcpledger"},
		{envMap{}, "/h", "/h/.config/mcpledger"},
		{envMap{}, "", ""},
	}
	for _, tt := range tests {
		if got := UserDir(tt.env.lookup, tt.home); got != tt.want {
			t.Errorf("UserDir(%v, %q) = %q, want %q", tt.env, tt.home, got, tt.want)
		}
	}
}

// TestConfigUnusable: every file that cannot be used is reported in
// Unusable (and Observed.Errors) with its path, the position where one
// applies, and what to do, and contributes nothing; Err lists them.
func TestConfigUnusable(t *testing.T) {
	tests := []struct {
		name    string
		content *string // nil: the path does not exist
		dir     bool
		want    string // after the path
	}{
		{"missing", nil, false, ": --mcp-config file does not exist: check the path"},
		{"directory", nil, true, ": cannot read: is a directory; check that it is a readable file"},
		{"invalid JSON", ptr("{\n  \"mcpServers\": {\n"), false, ":3:1: unexpected end of JSON input; fix the JSON syntax"},
		{"array", ptr("[]"), false, `:1:1: the file must hold a JSON object like {"mcpServers"`},
		{"empty", ptr(""), false, `: the file is empty (or holds only comments); write {"mcpServers": {}} for a file without servers, or remove it`},
		{"only a comment", ptr("// nothing yet\n"), false, `: the file is empty (or holds only comments)`},
		{"mcpServers null", ptr(`{"mcpServers":null}`), false, `:1:15: "mcpServers" is null; write an object mapping server names to entries`},
		{"servers null", ptr(`{"servers": null}`), false, `:1:13: "servers" is null; write an object`},
		{"mcpServers array", ptr(`{"mcpServers": []}`), false, `:1:16: "mcpServers" must be an object mapping server names to entries`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, user := configDirs(t)
			p := filepath.Join(ws, "c.json")
			switch {
			case tt.dir:
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
			case tt.content != nil:
				writeConfig(t, p, *tt.content)
			}
			writeConfig(t, filepath.Join(user, "config.json"), servers(`"ok": `+stdio("ok")))
			lc := Load(Sources{Flags: []string{p}, Workspace: ws, UserDir: user})
			if len(lc.Unusable) != 1 || lc.Unusable[0] != p+tt.want && !strings.HasPrefix(lc.Unusable[0], p+tt.want) {
				t.Fatalf("unusable %q, want one starting %q", lc.Unusable, p+tt.want)
			}
			if !slices.Equal(lc.Observed.Errors, lc.Unusable) {
				t.Errorf("errors %q, want the unusable file's", lc.Observed.Errors)
			}
			if len(lc.Observed.Servers) != 1 || lc.Observed.Servers[0].Name != "ok" {
				t.Errorf("servers %+v, want only the user's", lc.Observed.Servers)
			}
			err := lc.Err()
			if !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), "\n  "+lc.Unusable[0]) {
				t.Errorf("Err() = %v, want ErrUnusable listing %q", err, lc.Unusable[0])
			}
		})
	}
	// A usable reading has no Err; a malformed setting is an error of
	// the reading (it fails closed) but leaves the file usable.
	ws, user := configDirs(t)
	writeConfig(t, filepath.Join(user, "config.json"), `{"allowed": 5, "mcpServers": {}}`)
	writeConfig(t, filepath.Join(ws, ".mcp.json"), `{}`)
	lc := Load(Sources{Workspace: ws, UserDir: user})
	if err := lc.Err(); err != nil || len(lc.Unusable) != 0 || len(lc.Observed.Errors) != 1 {
		t.Errorf("Err() = %v, unusable %q, errors %q; want nil, none, one (the setting)", err, lc.Unusable, lc.Observed.Errors)
	}
}

func ptr(s string) *string { return &s }

// TestConfigSizeLimit: a file over the limit is refused before it is
// parsed, with the limit and how to raise it; one at the limit is read.
func TestConfigSizeLimit(t *testing.T) {
	ws, _ := configDirs(t)
	p := filepath.Join(ws, "c.json")
	body := servers(`"a": ` + stdio("srv"))
	pad := func(n int) string { return body + strings.Repeat(" ", n-len(body)) }

	writeConfig(t, p, pad(1000))
	lc := Load(Sources{Flags: []string{p}, MaxFileBytes: 1000})
	if lc.Err() != nil || len(lc.Observed.Servers) != 1 {
		t.Fatalf("a file at the limit: %v, servers %+v", lc.Err(), lc.Observed.Servers)
	}
	writeConfig(t, p, pad(1001))
	lc = Load(Sources{Flags: []string{p}, MaxFileBytes: 1000, RaiseLimit: "set LIMIT=BYTES"})
	want := p + ": the file is larger than the 1000 bytes limit for a config file; it is not read: shrink it (one file per server in servers.d/ works too), or set LIMIT=BYTES"
	if !slices.Equal(lc.Unusable, []string{want}) || len(lc.Observed.Servers) != 0 {
		t.Fatalf("unusable %q servers %+v, want %q", lc.Unusable, lc.Observed.Servers, want)
	}
	// The default is 1 MiB; a pipe (no size to stat) is cut after it.
	big := pad(DefaultMaxFileBytes + 1)
	writeConfig(t, p, big)
	lc = Load(Sources{Flags: []string{p}})
	if len(lc.Unusable) != 1 || !strings.Contains(lc.Unusable[0], "larger than the 1 MiB limit") || strings.Contains(lc.Unusable[0], ", or ") {
		t.Errorf("default limit: %q", lc.Unusable)
	}
	fifo := filepath.Join(ws, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	go func() { // the reader stops after limit+1 bytes: closing ends the writer
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = f.WriteString(big)
	}()
	lc = Load(Sources{Flags: []string{fifo}, MaxFileBytes: 1 << 10})
	if len(lc.Unusable) != 1 || !strings.Contains(lc.Unusable[0], "larger than the 1 KiB limit") {
		t.Errorf("pipe over the limit: %q", lc.Unusable)
	}
}

// TestConfigResolveProblemPosition: a problem found when expanding an
// entry (an unset ${VAR}, a URL that is malformed after expansion, a line
// break in a header) names the entry's file:line:col, as parse problems do.
func TestConfigResolveProblemPosition(t *testing.T) {
	ws, _ := configDirs(t)
	p := filepath.Join(ws, "c.json")
	writeConfig(t, p, "{\"mcpServers\": {\n  \"a\": {\"command\": \"${NOPE}\"},\n  \"b\": {\"url\": \"${U}\", \"env\": {\"U\": \"ht!tp://\"}},\n  \"c\": {\"url\": \"http://h/\", \"env\": {\"V\": \"a\\r\\nb\"}, \"headers\": {\"X\": \"${V}\"}}\n}}")
	lc := Load(Sources{Flags: []string{p}, Workspace: ws})
	for name, want := range map[string]string{
		"a": `server "a": "command" uses ${NOPE}, which is not set: set NOPE in mcpledger's environment or write ${NOPE:-default} (` + p + ":2:8)",
		"b": `server "b": "url" must be an absolute http:// or https:// URL after expansion (` + p + ":3:8)",
		"c": `server "c": header "X" has a line break in its value: remove it (` + p + ":4:8)",
	} {
		if got := server(t, lc, name).Invalid; got != want {
			t.Errorf("%s: Invalid = %q\nwant %q", name, got, want)
		}
	}
}
