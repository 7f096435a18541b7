package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestCallArgsFromFileAndStdin: `call --args @FILE` and `--args -` pass
// arguments too large for a command line (10 MB: the kernel refuses an
// argv that size with "Argument list too long") to a real server, whole;
// a missing file, invalid JSON, JSON that is not an object and empty
// input are usage errors (exit 2) that say where the arguments came from
// and what they must be, and nothing is called.
func TestCallArgsFromFileAndStdin(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"good": map[string]any{"command": bin}}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPLEDGER_JOURNAL", filepath.Join(dir, "j.db"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	t.Setenv("HOME", dir)
	call := func(stdin string, args ...string) result {
		var out, errb bytes.Buffer
		args = append([]string{"call", "mcp__good__echo", "--json", "--mcp-config", cfg, "--workspace", dir}, args...)
		err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
		return result{out.String(), errb.String(), err}
	}
	echoed := func(r result) string {
		t.Helper()
		if r.err != nil {
			t.Fatalf("call: %v\n%s", r.err, r.stderr)
		}
		var res struct {
			Content []struct{ Text string } `json:"content"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Content) == 0 {
			t.Fatalf("result %.200q: %v", r.stdout, err)
		}
		return res.Content[0].Text
	}

	big := strings.Repeat("0123456789", 1<<20) // 10 MiB
	file := filepath.Join(dir, "args.json")
	b, _ = json.Marshal(map[string]string{"message": big})
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := echoed(call("", "--args", "@"+file)); got != big {
		t.Errorf("--args @FILE: echoed %d bytes, want the %d sent", len(got), len(big))
	}
	if got := echoed(call(`{"message":"from stdin"}`, "--args", "-")); got != "from stdin" {
		t.Errorf("--args -: echoed %q", got)
	}
	if got := echoed(call("", "--args", `{"message":"inline"}`)); got != "inline" {
		t.Errorf("--args JSON: echoed %q", got)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"message": "x",}`), 0o600)
	for _, tc := range []struct {
		stdin string
		args  []string
		want  []string
	}{
		{"", []string{"--args", "@" + filepath.Join(dir, "missing.json")}, []string{"--args @" + filepath.Join(dir, "missing.json"), "no such file", "JSON object"}},
		{"", []string{"--args", "@"}, []string{"name the file after the @"}},
		{"", []string{"--args", "@" + bad}, []string{"--args @" + bad + " is not JSON", "at byte 17", `{"path": "README.md"}`}},
		{`["a"]`, []string{"--args", "-"}, []string{"--args - (standard input) is JSON but not an object"}},
		{"", []string{"--args", "-"}, []string{"--args - (standard input) is empty"}},
		{"", []string{"--args", "null"}, []string{"--args is JSON but not an object"}},
	} {
		r := call(tc.stdin, tc.args...)
		if exitCode(r.err) != 2 {
			t.Errorf("%q: exit %d (%v), want 2", tc.args, exitCode(r.err), r.err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.err.Error(), w) {
				t.Errorf("%q: error %q does not say %q", tc.args, r.err, w)
			}
		}
	}
	// Nothing was called for the refused ones: three calls journaled.
	r := runCLI(t, "log", "--kind", "call.started")
	if n := strings.Count(r.stdout, "call.started"); n != 3 {
		t.Errorf("%d calls journaled, want 3:\n%.2000s", n, r.stdout)
	}
}
