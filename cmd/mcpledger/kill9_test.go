package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestKill9LeavesNoServerProcess runs the real binary, kills it with
// SIGKILL while its servers run (servers that ignore stdin EOF and
// SIGTERM, one behind `sh -c`, each with a child of its own), and requires
// every process of every server's group to be gone; the next run records
// the killed session as interrupted.
func TestKill9LeavesNoServerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	srv := runtimetest.BuildServer(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpledger")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	stubborn := map[string]string{"MCPTEST_IGNORE_EOF": "1", "MCPTEST_IGNORE_SIGTERM": "1", "MCPTEST_SPAWN_CHILD": "1"}
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"direct":  map[string]any{"command": srv, "env": stubborn},
		"wrapped": map[string]any{"command": "/bin/sh", "args": []string{"-c", srv + "; :"}, "env": stubborn},
	}})
	os.WriteFile(cfg, b, 0o600)
	jp := filepath.Join(dir, "j.db")
	env := append(os.Environ(), "MCPLEDGER_JOURNAL="+jp, "XDG_CONFIG_HOME="+filepath.Join(dir, "xdg"))
	run := exec.Command(bin, "run", "--mcp-config", cfg, "--workspace", dir)
	run.Env = env
	var stderr bytes.Buffer
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	// Wait until both servers are ready, through the control socket.
	var pgids []int
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && len(pgids) < 2 {
		time.Sleep(100 * time.Millisecond)
		st := exec.Command(bin, "status", "--json")
		st.Env = env
		out, err := st.Output()
		if err != nil || !strings.Contains(string(out), `"running`) && !bytes.Contains(out, []byte(`"state":"ready"`)) {
			continue
		}
		var res struct {
			Servers []struct {
				State string `json:"state"`
				PID   int    `json:"pid"`
			} `json:"servers"`
		}
		json.Unmarshal(out, &res)
		pgids = pgids[:0]
		for _, s := range res.Servers {
			if s.State == "ready" && s.PID > 0 {
				pgids = append(pgids, s.PID)
			}
		}
	}
	if len(pgids) < 2 {
		t.Fatalf("servers not ready; mcpledger said:\n%s", stderr.String())
	}
	var members []int
	for i := 0; i < 50; i++ {
		members = members[:0]
		for _, g := range pgids {
			ps, _ := runtimetest.ProcessesInGroup(g)
			members = append(members, ps...)
		}
		if len(members) >= 5 { // (shim,) server, child; (shim,) sh, server, child
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(members) < 5 {
		t.Fatalf("want at least 5 server processes, have %v", members)
	}
	if err := run.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	run.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if left := runtimetest.WaitGone(ctx, members); len(left) > 0 {
		t.Fatalf("server processes outlived kill -9 of mcpledger: %v", left)
	}
	// The next run closes the killed session as interrupted and carries on.
	once := exec.Command(bin, "run", "--once", "--mcp-config", cfg, "--workspace", dir)
	once.Env = env
	if out, err := once.CombinedOutput(); err != nil {
		t.Fatalf("next run: %v\n%s", err, out)
	}
	lg := exec.Command(bin, "log", "--kind", "stop.requested", "--json")
	lg.Env = env
	out, _ := lg.Output()
	if !strings.Contains(string(out), `"reason":"interrupted"`) {
		t.Errorf("no interrupted stop in the log:\n%s", out)
	}
	vf := exec.Command(bin, "verify")
	vf.Env = env
	if out, err := vf.CombinedOutput(); err != nil {
		t.Errorf("verify after the kill: %v\n%s", err, out)
	}
}
