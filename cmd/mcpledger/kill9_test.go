package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
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

// TestKill9LosesNoCallOutcome kills `run` with SIGKILL while calls made
// through it by concurrent `mcpledger call`s are in flight: every client
// is told the outcome is unknown (exit status 3), and once the next
// session has started, every call.started of the killed session has
// exactly one outcome, the ones in flight lost; replay, why and timeline
// show them, and the session still verifies.
func TestKill9LosesNoCallOutcome(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	srv := runtimetest.BuildServer(t)
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"s": map[string]any{"command": srv}}})
	os.WriteFile(cfg, b, 0o600)
	env := append(os.Environ(), "MCPLEDGER_JOURNAL="+filepath.Join(dir, "j.db"), "XDG_CONFIG_HOME="+filepath.Join(dir, "xdg"))
	cmd := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, args...)
		c.Env = env
		return c
	}
	run := cmd("run", "--mcp-config", cfg, "--workspace", dir)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if out, _ := cmd("status", "--json").Output(); bytes.Contains(out, []byte(`"state":"ready"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server s never ready")
		}
	}
	const done, hanging = 3, 12
	for i := range done {
		if out, err := cmd("call", "mcp__s__echo", "--args", fmt.Sprintf(`{"message":"m%d"}`, i)).CombinedOutput(); err != nil {
			t.Fatalf("call before the kill: %v\n%s", err, out)
		}
	}
	type client struct {
		c      *exec.Cmd
		stderr bytes.Buffer
	}
	var clients []*client
	for range hanging {
		c := &client{c: cmd("call", "mcp__s__slow", "--args", `{"ms":60000}`)}
		c.c.Stderr = &c.stderr
		if err := c.c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.c.Process.Kill()
		clients = append(clients, c)
	}
	started := func() int {
		out, _ := cmd("log", "--session", "last", "--kind", "call.started", "--json").Output()
		return bytes.Count(out, []byte(`"tool":"slow"`))
	}
	for deadline := time.Now().Add(20 * time.Second); started() < hanging; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls started", started(), hanging)
		}
	}
	if err := run.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	run.Wait()
	for i, c := range clients {
		err := c.c.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitOutcomeUnknown ||
			!strings.Contains(c.stderr.String(), "outcome of the call is unknown") || !strings.Contains(c.stderr.String(), "records the call as lost") {
			t.Errorf("client %d: %v, said %q; want exit status %d saying the outcome is unknown", i, err, c.stderr.String(), exitOutcomeUnknown)
		}
	}
	out, _ := cmd("sessions", "--json").Output()
	var sessions []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &sessions); err != nil || len(sessions) != 1 || sessions[0].ID == "" {
		t.Fatalf("sessions: %v %s", err, out)
	}
	killed := sessions[0].ID
	if out, err := cmd("run", "--once", "--mcp-config", cfg, "--workspace", dir).CombinedOutput(); err != nil {
		t.Fatalf("next run: %v\n%s", err, out)
	}
	out, err := cmd("log", "--session", killed, "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string][]string{}
	var order []string
	for line := range strings.Lines(string(out)) {
		var e struct {
			Kind    string `json:"kind"`
			Payload struct {
				CallID  string `json:"call_id"`
				Outcome string `json:"outcome"`
			} `json:"payload"`
		}
		json.Unmarshal([]byte(line), &e)
		switch e.Kind {
		case "call.started":
			order = append(order, e.Payload.CallID)
			outcomes[e.Payload.CallID] = outcomes[e.Payload.CallID][:0:0]
		case "call.finished":
			outcomes[e.Payload.CallID] = append(outcomes[e.Payload.CallID], e.Payload.Outcome)
		}
	}
	count := map[string]int{}
	for _, id := range order {
		if o := outcomes[id]; len(o) != 1 {
			t.Errorf("call %s has outcomes %v, want exactly one", id, o)
		} else {
			count[o[0]]++
		}
	}
	if count[events.OutcomeOK] != done || count[events.OutcomeLost] != hanging || len(order) != done+hanging {
		t.Errorf("outcomes of %d calls: %v, want %d ok and %d lost", len(order), count, done, hanging)
	}
	if out, err := cmd("replay", killed, "--verify").CombinedOutput(); err != nil {
		t.Errorf("replay --verify: %v\n%s", err, out)
	}
	if out, _ := cmd("replay", killed).Output(); !strings.Contains(string(out), fmt.Sprintf("calls lost (%d): the outcome is unknown", hanging)) {
		t.Errorf("replay shows no lost calls:\n%s", out)
	}
	if out, _ := cmd("why", "mcp__s__slow", "--session", killed).Output(); !strings.Contains(string(out), fmt.Sprintf("calls of mcp__s__slow lost by then (%d)", hanging)) ||
		!strings.Contains(string(out), "mcpledger was killed with the call in flight") {
		t.Errorf("why shows no lost calls:\n%s", out)
	}
	page := filepath.Join(dir, "t.html")
	if out, err := cmd("timeline", killed, "-o", page).CombinedOutput(); err != nil {
		t.Fatalf("timeline: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(page); bytes.Count(b, []byte("mcpledger was killed with it in flight: its outcome is unknown")) != hanging {
		t.Errorf("the timeline does not show the %d lost calls", hanging)
	}
}
