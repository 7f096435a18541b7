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

func TestExportImportReplayWhy(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"good": map[string]any{"command": bin}}})
	os.WriteFile(cfg, b, 0o600)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	ctx := context.Background()
	do := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, args, nil, &out, &errb)
		return out.String() + errb.String(), err
	}
	src, dst := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	if out, err := do("run", "--once", "--journal", src, "--mcp-config", cfg, "--workspace", dir); err != nil {
		t.Fatalf("run: %v %s", err, out)
	}
	exported, err := do("export", "last", "--journal", src)
	if err != nil || strings.Count(exported, "\n") < 8 {
		t.Fatalf("export: %v %s", err, exported)
	}
	file := filepath.Join(dir, "s.jsonl")
	os.WriteFile(file, []byte(exported), 0o600)
	if out, err := do("import", file, "--journal", dst); err != nil || !strings.Contains(out, "verified") {
		t.Fatalf("import: %v %s", err, out)
	}
	if out, err := do("import", file, "--journal", dst); err != nil || !strings.Contains(out, "already imported") {
		t.Fatalf("re-import: %v %s", err, out)
	}
	if out, err := do("replay", "--verify", "--journal", dst); err != nil || !strings.Contains(out, "verifies") {
		t.Fatalf("replay --verify: %v %s", err, out)
	}
	out, err := do("replay", "last", "--until", "8", "--journal", dst)
	if err != nil || !strings.Contains(out, "after seq 8") {
		t.Fatalf("replay --until: %v %s", err, out)
	}
	out, err = do("why", "mcp__good__echo", "--journal", dst, "--at", "2")
	if err != nil || !strings.Contains(out, "was NOT in the catalog") {
		t.Fatalf("why early: %v %s", err, out)
	}
	// The last event before shutdown began: the tool was there.
	var seq string
	for _, l := range strings.Split(exported, "\n") {
		if strings.Contains(l, `"kind":"stop.requested"`) {
			var e struct {
				Seq json.Number `json:"seq"`
			}
			json.Unmarshal([]byte(l), &e)
			seq = string(e.Seq)
		}
	}
	out, err = do("why", "mcp__good__echo", "--journal", dst, "--at", seq)
	if err != nil || !strings.Contains(out, "was in the catalog") {
		t.Fatalf("why at %s: %v %s", seq, err, out)
	}
	// A bad journal is refused before anything is written.
	bad, _ := os.ReadFile(filepath.Join("..", "..", "testdata", "journals", "bad-different-delay.jsonl"))
	os.WriteFile(file, bad, 0o600)
	if out, err := do("import", file, "--unsealed", "--journal", filepath.Join(dir, "c.db")); err == nil || !strings.Contains(err.Error(), "does not replay") {
		t.Fatalf("bad import: %v %s", err, out)
	}
	if out, err := do("verify", "--journal", dst); err != nil || !strings.Contains(out, "every session replays") {
		t.Fatalf("verify: %v %s", err, out)
	}
}
