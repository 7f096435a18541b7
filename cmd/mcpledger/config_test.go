package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/store"
)

// configEnv points the journal, HOME and the user config into a fresh
// directory and returns it and the journal's path.
func configEnv(t *testing.T) (dir, jp string) {
	t.Helper()
	dir = t.TempDir()
	jp = filepath.Join(dir, "j.db")
	t.Setenv("MCPLEDGER_JOURNAL", jp)
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	t.Setenv("MCPLEDGER_DECIDER", `{"backoff_base_ms":10,"backoff_max_ms":20,"max_attempts":2}`)
	return dir, jp
}

func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// journalEvents returns the events of the journal at jp (none when the
// file does not exist).
func journalEvents(t *testing.T, jp string) []events.Event {
	t.Helper()
	if _, err := os.Stat(jp); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	j, err := store.Open(jp, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var out []events.Event
	if err := j.ReadAll(t.Context(), 1, func(e events.Event) error { out = append(out, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// lastConfig returns the last config.observed of the journal at jp.
func lastConfig(t *testing.T, jp string) *events.ConfigObserved {
	t.Helper()
	var last *events.ConfigObserved
	for _, e := range journalEvents(t, jp) {
		if p, ok := e.Payload.(*events.ConfigObserved); ok {
			last = p
		}
	}
	if last == nil {
		t.Fatal("no config.observed in the journal")
	}
	return last
}

// TestConfigUnusableRefusesStart: run, serve, call (and an offline
// approve of a server it cannot find) refuse a config file
// that cannot be used with exit status 4 and an error naming the file
// (with line:col where one applies) and what to do; nothing is journaled.
func TestConfigUnusableRefusesStart(t *testing.T) {
	tests := []struct {
		name    string
		content *string // nil: no such file
		dir     bool
		want    string // after the path
	}{
		{"missing", nil, false, ": --mcp-config file does not exist: check the path"},
		{"directory", nil, true, ": cannot read: is a directory; check that it is a readable file"},
		{"invalid JSON", strPtr("{\n  \"mcpServers\": {\"a\": {\"command\" \"x\"}}\n}"), false, `:2:34: invalid character '"' after object key; fix the JSON syntax`},
		{"array", strPtr("[]"), false, `:1:1: the file must hold a JSON object like {"mcpServers": {"name": {"command": "..."}}}`},
		{"empty", strPtr(""), false, `: the file is empty (or holds only comments); write {"mcpServers": {}} for a file without servers, or remove it`},
		{"mcpServers null", strPtr(`{"mcpServers":null}`), false, `:1:15: "mcpServers" is null; write an object mapping server names to entries`},
		{"mcpServers not an object", strPtr(`{"mcpServers": "x"}`), false, `:1:16: "mcpServers" must be an object mapping server names to entries`},
		{"over the size limit", strPtr(`{"mcpServers": {"a": {"command": "x", "args": ["` + strings.Repeat("y", 1<<20) + `"]}}}`), false,
			": the file is larger than the 1 MiB limit for a config file; it is not read: shrink it (one file per server in servers.d/ works too), or raise the limit: MCPLEDGER_CONFIG_MAX_BYTES=BYTES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, jp := configEnv(t)
			cfg := filepath.Join(dir, "c.json")
			switch {
			case tt.dir:
				if err := os.Mkdir(cfg, 0o755); err != nil {
					t.Fatal(err)
				}
			case tt.content != nil:
				write(t, cfg, *tt.content)
			}
			for _, args := range [][]string{
				{"run", "--once"}, {"run"}, {"serve", "--stdio"}, {"call", "mcp__a__echo"}, {"approve", "a"},
			} {
				r := runCLI(t, append(args, "--mcp-config", cfg, "--workspace", dir)...)
				if code := exitCode(r.err); code != 4 {
					t.Errorf("%v: exit %d (%v), want 4", args, code, r.err)
					continue
				}
				if msg := r.err.Error(); !strings.Contains(msg, "\n  "+cfg+tt.want) || !strings.HasSuffix(msg, "nothing was started: fix the file(s) above and run the command again") {
					t.Errorf("%v: error\n%s\nwant a line %q and what to do", args, msg, cfg+tt.want)
				}
			}
			if evs := journalEvents(t, jp); len(evs) != 0 {
				t.Errorf("the journal holds %d events: a refused config must not start a session", len(evs))
			}
		})
	}
}

func strPtr(s string) *string { return &s }

// TestConfigExitCodesOfTheProcess: the statuses reach the shell: 4 for a
// config that cannot be used, 5 for one that admits no server, and the
// help documents them.
func TestConfigExitCodesOfTheProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	dir, jp := configEnv(t)
	env := []string{"MCPLEDGER_JOURNAL=" + jp}
	code, stderr := runCLIProcess(t, env, "run", "--once", "--mcp-config", filepath.Join(dir, "nope.json"), "--workspace", dir)
	if code != 4 || !strings.Contains(stderr, "nope.json: --mcp-config file does not exist") {
		t.Errorf("missing config: exit %d, %s", code, stderr)
	}
	bad := write(t, filepath.Join(dir, "bad.json"), `{"mcpServers": {"a": {"type": "grpc", "url": "http://x/"}}}`)
	code, stderr = runCLIProcess(t, env, "run", "--once", "--mcp-config", bad, "--workspace", dir)
	if code != 5 || !strings.Contains(stderr, "no server can run: every entry of the config is skipped") {
		t.Errorf("only invalid entries: exit %d, %s", code, stderr)
	}
	r := runCLI(t, "help")
	for _, line := range []string{"  0    ok\n", "  2    bad command line\n", "  4    a config file cannot be used", "  5    run --once: the config names no server, or only invalid entries\n", "  130  interrupted"} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("help lacks %q:\n%s", line, r.stdout)
		}
	}
}

// skipConfig holds one entry of each kind a reading skips (unknown type,
// unset ${NOPE}, malformed URL, CRLF in a header), each on its own line,
// plus a disabled one.
const skipConfig = `{"mcpServers": {
  "grpc": {"type": "grpc", "url": "http://x/"},
  "nope": {"command": "${NOPE_UNSET_FOR_TEST}"},
  "badurl": {"url": "ht!tp://"},
  "crlf": {"url": "http://127.0.0.1:1/", "headers": {"X": "a\r\nb"}},
  "off": {"command": "x", "disabled": true}
}}`

// wantSkipped are the lines run and serve print for skipConfig at path.
func wantSkipped(path string) []string {
	return []string{
		`config: skipped badurl (invalid_config): "url" must be an absolute http:// or https:// URL (` + path + `:4:13)`,
		`config: skipped crlf (invalid_config): header "X" has a line break in its value: remove it (` + path + `:5:11)`,
		`config: skipped grpc (invalid_config): "type" "grpc" is not supported: use "stdio", "http" (also "streamable-http", "streamableHttp") or "sse" (` + path + `:2:11)`,
		`config: skipped nope (invalid_config): "command" uses ${NOPE_UNSET_FOR_TEST}, which is not set: set NOPE_UNSET_FOR_TEST in mcpledger's environment or write ${NOPE_UNSET_FOR_TEST:-default} (` + path + `:3:11)`,
	}
}

// TestRunOnceSkippedReasons: every skipped entry is printed on stderr, one
// line with its name, reason, what to do and file:line:col; run --once
// exits 1 when some entries are invalid and 5 when all are; status (text
// and --json) shows them from the journal.
func TestRunOnceSkippedReasons(t *testing.T) {
	dir, _ := configEnv(t)
	cfg := write(t, filepath.Join(dir, "c.json"), skipConfig)
	r := runCLI(t, "run", "--once", "--mcp-config", cfg, "--workspace", dir)
	if r.err == nil || exitCode(r.err) != 1 || r.err.Error() != "4 server(s) skipped as invalid (see above)" {
		t.Fatalf("run --once: %v (exit %d), want 4 skipped as invalid, exit 1\n%s", r.err, exitCode(r.err), r.stderr)
	}
	for _, line := range wantSkipped(cfg) {
		if n := strings.Count(r.stderr, line+"\n"); n != 1 {
			t.Errorf("stderr has %d times %q:\n%s", n, line, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "skipped off") {
		t.Errorf("a disabled server is reported as skipped:\n%s", r.stderr)
	}
	// No server was admitted: the disabled one says what to do.
	if !strings.Contains(r.stderr, "no server can run until a decision or a config change admits one\n  off is stopped (disabled): remove \"disabled\": true from its config\n") {
		t.Errorf("stderr lacks why nothing runs:\n%s", r.stderr)
	}

	r = runCLI(t, "status")
	var lines []string
	for _, l := range wantSkipped(cfg) {
		lines = append(lines, "  "+strings.TrimPrefix(l, "config: skipped "))
	}
	if want := "config entries skipped:\n" + strings.Join(lines, "\n") + "\n"; r.err != nil || !strings.HasSuffix(r.stdout, want) {
		t.Errorf("status: %v\n%s\nwant it to end with\n%s", r.err, r.stdout, want)
	}
	r = runCLI(t, "status", "--json")
	var st statusOut
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatal(err, r.stdout)
	}
	if len(st.Config.Skipped) != 4 || st.Config.Skipped[0].Name != "badurl" || st.Config.Skipped[0].Reason != events.ReasonInvalidConfig ||
		!strings.HasSuffix(st.Config.Skipped[0].Detail, "("+cfg+":4:13)") {
		t.Errorf("status --json config: %+v", st.Config)
	}

	// Only invalid entries: nothing can run, exit 5.
	only := write(t, filepath.Join(dir, "only.json"), strings.Replace(skipConfig, `"off": {"command": "x", "disabled": true}`, `"grpc2": {"type": "ws", "url": "http://x/"}`, 1))
	r = runCLI(t, "run", "--once", "--mcp-config", only, "--workspace", dir)
	if code := exitCode(r.err); code != 5 || !strings.Contains(r.stderr, "config: skipped grpc2 (invalid_config)") {
		t.Errorf("only invalid: exit %d (%v)\n%s", code, r.err, r.stderr)
	}
}

// TestRunOnceNothingConfigured: no config at all is exit 5, naming the
// files mcpledger read.
func TestRunOnceNothingConfigured(t *testing.T) {
	dir, _ := configEnv(t)
	r := runCLI(t, "run", "--once", "--workspace", dir)
	user := filepath.Join(dir, "xdg", "mcpledger", "config.json")
	if exitCode(r.err) != 5 || !strings.Contains(r.err.Error(), "no server is configured: add one to a config file (mcpledger read "+user) {
		t.Errorf("exit %d: %v", exitCode(r.err), r.err)
	}
}

// TestDuplicateAcrossConfigFiles: a name defined by two sources is
// warned about on stderr and journaled (shadowed, reason duplicate,
// naming the entry that wins), and the winner follows the precedence: a
// --mcp-config file over the user config, an earlier flag over a later.
func TestDuplicateAcrossConfigFiles(t *testing.T) {
	dir, jp := configEnv(t)
	// The winner is disabled, the losers are invalid: the state tells
	// which entry won.
	one := write(t, filepath.Join(dir, "one.json"), `{"mcpServers": {"x": {"command": "a", "disabled": true}}}`)
	two := write(t, filepath.Join(dir, "two.json"), `{"mcpServers": {"x": {"type": "ws"}}}`)
	user := write(t, filepath.Join(dir, "xdg", "mcpledger", "config.json"), `{"mcpServers": {"x": {"type": "ws"}}}`)
	r := runCLI(t, "run", "--once", "--mcp-config", one, "--mcp-config", two, "--workspace", dir)
	if r.err != nil {
		t.Fatalf("run --once: %v\n%s", r.err, r.stderr)
	}
	for _, loser := range []string{two, user} {
		line := fmt.Sprintf("config: skipped x (duplicate): server \"x\" at %s:1:22 is not used: the one at %s:1:22 has priority; rename or remove one\n", loser, one)
		if strings.Count(r.stderr, line) != 1 {
			t.Errorf("stderr lacks %q:\n%s", line, r.stderr)
		}
	}
	want := []events.ShadowedServer{{Name: "x", At: two + ":1:22", Winner: one + ":1:22"}, {Name: "x", At: user + ":1:22", Winner: one + ":1:22"}}
	if got := lastConfig(t, jp); len(got.Servers) != 1 || got.Servers[0].Source != one || fmt.Sprint(got.Shadowed) != fmt.Sprint(want) {
		t.Errorf("journaled servers %+v shadowed %+v, want x from %s and %+v", got.Servers, got.Shadowed, one, want)
	}
	r = runCLI(t, "status", "--json")
	var st statusOut
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatal(err, r.stdout)
	}
	if len(st.Servers) != 1 || st.Servers[0].Reason != events.ReasonDisabled || len(st.Config.Skipped) != 2 || st.Config.Skipped[0].Reason != events.ReasonDuplicate {
		t.Errorf("status --json: servers %+v config %+v", st.Servers, st.Config)
	}
}

// TestConfigSizeLimitRaised: MCPLEDGER_CONFIG_MAX_BYTES raises the limit
// (a 5 MB config is then read) and a malformed value is refused.
func TestConfigSizeLimitRaised(t *testing.T) {
	dir, jp := configEnv(t)
	big := write(t, filepath.Join(dir, "big.json"), `{"mcpServers": {"a": {"command": "x", "disabled": true, "args": ["`+strings.Repeat("y", 5<<20)+`"]}}}`)
	if r := runCLI(t, "run", "--once", "--mcp-config", big, "--workspace", dir); exitCode(r.err) != 4 {
		t.Fatalf("5 MB config: %v", r.err)
	}
	if evs := journalEvents(t, jp); len(evs) != 0 {
		t.Fatalf("a refused config journaled %d events", len(evs))
	}
	t.Setenv(maxConfigEnv, "x")
	if r := runCLI(t, "run", "--once", "--mcp-config", big, "--workspace", dir); r.err == nil || !strings.Contains(r.err.Error(), `MCPLEDGER_CONFIG_MAX_BYTES="x": want a number of bytes above 0`) {
		t.Errorf("malformed limit: %v", r.err)
	}
	t.Setenv(maxConfigEnv, fmt.Sprint(6<<20))
	if r := runCLI(t, "run", "--once", "--mcp-config", big, "--workspace", dir); r.err != nil {
		t.Errorf("raised limit: %v\n%s", r.err, r.stderr)
	}
	if got := lastConfig(t, jp); len(got.Servers) != 1 || len(got.Servers[0].Args[0]) != 5<<20 {
		t.Errorf("the raised limit did not read the file: %+v", got.Servers)
	}
}

// TestServeReportsSkipped: serve prints each skipped entry and, with
// nothing to serve, says so and serves on (here until its stdio client,
// an empty stdin, disconnects).
func TestServeReportsSkipped(t *testing.T) {
	dir, _ := configEnv(t)
	cfg := write(t, filepath.Join(dir, "c.json"), skipConfig)
	r := runCLI(t, "serve", "--stdio", "--mcp-config", cfg, "--workspace", dir)
	if r.err != nil {
		t.Fatalf("serve: %v\n%s", r.err, r.stderr)
	}
	for _, line := range wantSkipped(cfg) {
		if n := strings.Count(r.stderr, line+"\n"); n != 1 {
			t.Errorf("stderr has %d times %q:\n%s", n, line, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, "no server can run until a decision or a config change admits one; serving an empty catalog until a reload or a decision admits one\n") {
		t.Errorf("stderr lacks why nothing is served:\n%s", r.stderr)
	}
}

// TestRunReportsSkippedLive: a running `run` answers status with the
// skipped entries (control socket), and a reload that adds one prints it
// and shows it, without a restart.
func TestRunReportsSkippedLive(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	dir, jp := configEnv(t)
	cfg := write(t, filepath.Join(dir, "c.json"), `{"mcpServers": {"off": {"command": "x", "disabled": true}, "grpc": {"type": "grpc"}}}`)
	cmd, stderr := cliProcess(t, nil, "run", "--journal", jp, "--mcp-config", cfg, "--workspace", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; stderr:\n%s", what, stderr.String())
			}
		}
	}
	waitFor("the session", func() bool { return strings.Contains(stderr.String(), "session ") })
	if !strings.Contains(stderr.String(), "config: skipped grpc (invalid_config)") ||
		!strings.Contains(stderr.String(), "mcpledger keeps running: it reloads when a config file changes, and on `mcpledger reload`") {
		t.Errorf("start: stderr\n%s", stderr.String())
	}
	status := func() statusOut {
		r := runCLI(t, "status", "--json", "--journal", jp)
		var st statusOut
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || !st.Running {
			t.Fatalf("status --json: %v running %v %s", err, st.Running, r.stdout)
		}
		return st
	}
	if got := status().Config.Skipped; len(got) != 1 || got[0].Name != "grpc" {
		t.Errorf("running status: skipped %+v", got)
	}
	write(t, cfg, `{"mcpServers": {"off": {"command": "x", "disabled": true}, "grpc": {"type": "grpc"}, "ws": {"type": "ws"}}}`)
	waitFor("the reload's report", func() bool { return strings.Contains(stderr.String(), "config: skipped ws (invalid_config)") })
	if n := strings.Count(stderr.String(), "config: skipped grpc"); n != 1 {
		t.Errorf("a reload printed grpc again (%d times):\n%s", n, stderr.String())
	}
	var names []string
	for _, s := range status().Config.Skipped {
		names = append(names, s.Name)
	}
	if fmt.Sprint(names) != "[grpc ws]" {
		t.Errorf("status after the reload: skipped %v", names)
	}
	stopRun(t, cmd)
}

// TestPrintConfigReport: only what was not printed before is printed.
func TestPrintConfigReport(t *testing.T) {
	a := projections.SkippedServer{Name: "a", Reason: events.ReasonInvalidConfig, Detail: `server "a": bad (/c.json:1:2)`}
	b := projections.SkippedServer{Name: "b", Reason: events.ReasonDuplicate, Detail: `server "b" at /d.json:1:1 is not used`}
	var w strings.Builder
	n := printConfigReport(&w, projections.ConfigView{Errors: []string{"e1", "e2"}, Skipped: []projections.SkippedServer{a, b}},
		projections.ConfigView{Errors: []string{"e1"}, Skipped: []projections.SkippedServer{a}})
	want := "config: e2\nconfig: skipped b (duplicate): server \"b\" at /d.json:1:1 is not used\n"
	if n != 2 || w.String() != want {
		t.Errorf("printed %d lines:\n%s\nwant\n%s", n, w.String(), want)
	}
}
