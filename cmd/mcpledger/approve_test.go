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

// TestApproveOfflineAndTrust: approvals work without a running mcpledger
// (journaled as a session of their own), and trust lets a workspace's stdio
// servers spawn.
func TestApproveOfflineAndTrust(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"gh": map[string]any{"command": bin}}})
	if err := os.WriteFile(filepath.Join(ws, ".mcp.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPLEDGER_JOURNAL", filepath.Join(dir, "j.db"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	ctx := context.Background()
	do := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, args, nil, &out, &errb)
		return out.String() + errb.String(), err
	}
	approvals := func() []map[string]any {
		t.Helper()
		out, err := do("approvals", "--json", "--workspace", ws)
		if err != nil {
			t.Fatalf("approvals: %v %s", err, out)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("approvals --json: %v %s", err, out)
		}
		return rows
	}
	if rows := approvals(); len(rows) != 1 || rows[0]["state"] != "pending" {
		t.Fatalf("before: %v", rows)
	}
	if out, err := do("approve", "gh", "--workspace", ws); err != nil || !strings.Contains(out, "approved") {
		t.Fatalf("approve: %v %s", err, out)
	}
	if rows := approvals(); rows[0]["state"] != "approved" {
		t.Fatalf("after approve: %v", rows)
	}
	if out, err := do("approve", "nosuch", "--workspace", ws); err == nil {
		t.Errorf("approving an unknown server succeeded: %s", out)
	}
	// Approved, but the workspace is untrusted: its stdio server may not spawn.
	out, err := do("run", "--once", "--workspace", ws)
	if err != nil || !strings.Contains(out, "untrusted") {
		t.Fatalf("run before trust: %v\n%s", err, out)
	}
	if out, err := do("trust", ws); err != nil {
		t.Fatalf("trust: %v %s", err, out)
	}
	out, err = do("run", "--once", "--workspace", ws)
	if err != nil || !strings.Contains(out, "ready") {
		t.Fatalf("run after trust: %v\n%s", err, out)
	}
	if out, err := do("verify"); err != nil {
		t.Fatalf("verify: %v %s", err, out)
	}
}
