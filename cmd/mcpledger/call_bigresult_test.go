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

// TestCallBigResult: `mcpledger call` of a tool whose result is over the
// 16 MiB message limit prints its first 50,000 characters and the marker
// with the whole size, instead of failing.
func TestCallBigResult(t *testing.T) {
	if testing.Short() {
		t.Skip("20 MB through call")
	}
	bin := runtimetest.BuildServer(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"good": map[string]any{"command": bin}}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPLEDGER_JOURNAL", filepath.Join(dir, "j.db"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"call", "mcp__good__big", "--args", `{"bytes":20000000}`,
		"--mcp-config", cfg, "--workspace", dir}, nil, &out, &errb)
	if err != nil {
		t.Fatalf("call: %v\n%s", err, errb.String())
	}
	want := strings.Repeat("x", 50_000) + "\n[mcpledger: output truncated: 19950000 of 20000000 characters cut]\n"
	if out.String() != want {
		t.Errorf("printed %d bytes, ending %q", out.Len(), out.String()[max(0, out.Len()-100):])
	}
}
