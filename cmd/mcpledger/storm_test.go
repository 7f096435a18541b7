package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// stormSetup writes a config with a healthy server (good) and one that
// crashes on start (loop), and points HOME and XDG_CONFIG_HOME at a temp
// dir; it returns the dir, config and journal paths.
func stormSetup(t *testing.T) (dir, cfg, jp string) {
	t.Helper()
	dir = t.TempDir()
	bin := runtimetest.BuildServer(t)
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"good": map[string]any{"command": bin},
		"loop": map[string]any{"command": bin, "env": map[string]string{"MCPTEST_CRASH_ON_START": "1"}},
	}})
	cfg = filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	return dir, cfg, filepath.Join(dir, "journal.db")
}

// spawnsPerSession counts server's process.spawned in each session of
// the journal at jp, in session order, and returns each session's
// command.
func spawnsPerSession(t *testing.T, jp, server string) (spawns []int, commands []string) {
	t.Helper()
	j, err := store.Open(jp, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	idx := map[uuid.UUID]int{}
	err = j.ReadAll(t.Context(), 0, func(e events.Event) error {
		i, ok := idx[e.Session]
		if !ok {
			i = len(spawns)
			idx[e.Session] = i
			spawns, commands = append(spawns, 0), append(commands, "")
		}
		switch p := e.Payload.(type) {
		case *events.SessionStarted:
			commands[i] = p.Command
		case *events.ProcessSpawned:
			if e.Server == server {
				spawns[i]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return spawns, commands
}

// TestOneShotCallsStayHealthy: ten one-shot `mcpledger call`s in a row
// (each launches the servers, calls, stops them: expected exits) with the
// default storm breaker (5 per 30 s) never hold the server: it is
// launched and answers every time.
func TestOneShotCallsStayHealthy(t *testing.T) {
	dir, cfg, jp := stormSetup(t)
	os.WriteFile(cfg, []byte(`{"mcpServers":{"good":{"command":"`+runtimetest.BuildServer(t)+`"}}}`), 0o600)
	const n = 10
	for i := range n {
		r := runCLI(t, "call", "mcp__good__echo", "--args", `{"message":"hi"}`, "--journal", jp, "--mcp-config", cfg, "--workspace", dir)
		if r.err != nil || strings.TrimSpace(r.stdout) != "hi" {
			t.Fatalf("call %d: %v\n%s%s", i+1, r.err, r.stdout, r.stderr)
		}
	}
	spawns, _ := spawnsPerSession(t, jp, "good")
	if len(spawns) != n {
		t.Fatalf("%d sessions, want %d", len(spawns), n)
	}
	for i, s := range spawns {
		if s != 1 {
			t.Errorf("call %d launched good %d times, want 1", i+1, s)
		}
	}
	if r := runCLI(t, "log", "--journal", jp, "--kind", "admission.decided"); strings.Contains(r.stdout, "storm_hold") {
		t.Errorf("a clean server was held:\n%s", r.stdout)
	}
}

// TestStormHoldClearedOffline: a server that crashes on start is held
// after storm_limit crashes across one-shot calls, and the hold says
// which command clears it; `mcpledger reconnect loop` with no mcpledger
// running journals the reconnect in a session of its own, after which
// the next sessions launch the server again, counting only the crashes
// after the reconnect (held again at the fourth), and the reconnect
// session verifies.
func TestStormHoldClearedOffline(t *testing.T) {
	dir, cfg, jp := stormSetup(t)
	t.Setenv("MCPLEDGER_DECIDER", `{"backoff_base_ms":10,"backoff_max_ms":20,"max_attempts":2,"storm_limit":4,"storm_window_ms":600000}`)
	call := func() result {
		return runCLI(t, "call", "mcp__loop__echo", "--args", `{"message":"hi"}`, "--journal", jp, "--mcp-config", cfg, "--workspace", dir)
	}
	for i := 1; i <= 2; i++ { // two crashes each: failed, not held
		if r := call(); r.err == nil || strings.Contains(r.err.Error(), "storm_hold") {
			t.Fatalf("call %d: %v, want a failure that is no storm hold", i, r.err)
		}
	}
	r := call()
	if r.err == nil || !strings.Contains(r.err.Error(), "storm_hold") || !strings.Contains(r.err.Error(), "mcpledger reconnect loop (with mcpledger running or not") {
		t.Fatalf("call 3: %v, want a storm hold naming mcpledger reconnect loop", r.err)
	}
	r = runCLI(t, "reconnect", "loop", "--journal", jp, "--mcp-config", cfg, "--workspace", dir)
	if r.err != nil || !strings.Contains(r.stdout, "reconnect loop: recorded") {
		t.Fatalf("offline reconnect: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	if r := runCLI(t, "reconnect", "nope", "--journal", jp, "--mcp-config", cfg, "--workspace", dir); r.err == nil || !strings.Contains(r.err.Error(), `no server "nope"`) {
		t.Errorf("offline reconnect of an unknown server: %v", r.err)
	}
	for i := 1; i <= 2; i++ {
		if r := call(); r.err == nil || strings.Contains(r.err.Error(), "storm_hold") {
			t.Errorf("call %d after the offline reconnect: %v, want the server launched (and failing) again", i, r.err)
		}
	}
	if r := call(); r.err == nil || !strings.Contains(r.err.Error(), "storm_hold") {
		t.Errorf("call after four new crashes: %v, want a storm hold", r.err)
	}
	spawns, commands := spawnsPerSession(t, jp, "loop")
	want := []int{2, 2, 0, 0, 2, 2, 0}
	if strings.Join(commands, ",") != "call,call,call,reconnect,call,call,call" || len(spawns) != len(want) {
		t.Fatalf("sessions %v with spawns %v", commands, spawns)
	}
	for i := range want {
		if spawns[i] != want[i] {
			t.Errorf("launches of loop per session: %v, want %v", spawns, want)
			break
		}
	}
	if r := runCLI(t, "verify", "--journal", jp); r.err != nil {
		t.Errorf("verify: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	j, err := store.Open(jp, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := j.Sessions(t.Context())
	j.Close()
	if err != nil || len(ss) != 7 {
		t.Fatalf("sessions: %v %d", err, len(ss))
	}
	if r := runCLI(t, "replay", ss[3].Session.String(), "--verify", "--journal", jp); r.err != nil {
		t.Errorf("replay --verify of the reconnect session: %v\n%s", r.err, r.stderr)
	}
}
