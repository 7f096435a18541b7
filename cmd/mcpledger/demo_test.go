package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDemoKeep runs the demo (its servers are this test binary, see
// TestMain) twice: without --keep its temporary directory is gone when it
// returns; with --keep it stays, says where, and its journal verifies.
func TestDemoKeep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo's three servers for a few seconds; skipped under -short")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(t.TempDir(), "xdg"))

	r := runCLI(t, "demo", "--for", "0s")
	if r.err != nil {
		t.Fatalf("demo: %v\n%s", r.err, r.stderr)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 || !strings.Contains(r.stderr, "mcpledger demo --keep keeps") {
		t.Errorf("demo without --keep left %v in TMPDIR; stderr:\n%s", left, r.stderr)
	}

	r = runCLI(t, "demo", "--keep", "--for", "0s")
	if r.err != nil {
		t.Fatalf("demo --keep: %v\n%s", r.err, r.stderr)
	}
	m := regexp.MustCompile(`Kept \(--keep\): (\S+); its journal is (\S+);`).FindStringSubmatch(r.stderr)
	if m == nil || filepath.Dir(m[1]) != tmp || filepath.Dir(m[2]) != m[1] {
		t.Fatalf("demo --keep does not say where it kept its directory:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(m[1], "timeline.html")); err != nil {
		t.Error(err)
	}
	if v := runCLI(t, "verify", "--journal", m[2]); v.err != nil || !strings.Contains(v.stdout, "every session replays") {
		t.Errorf("verify of the kept journal: %v\n%s", v.err, v.stdout)
	}
}
