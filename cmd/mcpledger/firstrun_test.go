package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// firstRunWorkspace is a new workspace whose .mcp.json names the test
// server as each of names, in a fresh HOME, user config and journal
// (configEnv); it returns the workspace (canonical) and the journal.
func firstRunWorkspace(t *testing.T, bin string, names ...string) (ws, jp string) {
	t.Helper()
	dir, jp := configEnv(t)
	ws = filepath.Join(dir, "ws")
	writeProject(t, ws, bin, names...)
	ws, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	return ws, jp
}

func writeProject(t *testing.T, ws, bin string, names ...string) {
	t.Helper()
	servers := map[string]any{}
	for _, n := range names {
		servers[n] = map[string]any{"command": bin}
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	write(t, filepath.Join(ws, ".mcp.json"), string(b))
}

// TestFirstRunSaysTheNextCommand: on a new workspace, run --once, status
// and serve name the exact command that admits the servers waiting for
// trust and approval (approve --trust, with --workspace since the test
// runs elsewhere); approve on an untrusted workspace says trust is needed
// too; approve takes several names and --all; approve --trust --all
// trusts the workspace and approves what waits, after which the servers
// run and nothing is suggested; a new server that waits for an approval
// only is offered approve alone.
func TestFirstRunSaysTheNextCommand(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	ws, _ := firstRunWorkspace(t, bin, "a", "b")
	next := "next: mcpledger approve --trust --workspace " + ws + " a b\n"

	r := runCLI(t, "run", "--once", "--workspace", ws)
	if r.err != nil || !strings.Contains(r.stderr, next) ||
		!strings.Contains(r.stderr, "  a is stopped (untrusted): the workspace "+ws+" is not trusted\n") ||
		!strings.Contains(r.stderr, "in two steps: mcpledger trust "+ws+"; mcpledger approve --workspace "+ws+" a b") {
		t.Fatalf("run --once on a new workspace: %v\n%s", r.err, r.stderr)
	}
	if r := runCLI(t, "status"); r.err != nil || !strings.Contains(r.stdout, next) {
		t.Errorf("status: %v\n%s", r.err, r.stdout)
	}
	if r := runCLI(t, "serve", "--stdio", "--workspace", ws); r.err != nil || !strings.Contains(r.stderr, next) ||
		!strings.Contains(r.stderr, "no server can run until a decision or a config change admits one; serving an empty catalog") {
		t.Errorf("serve --stdio: %v\n%s", r.err, r.stderr)
	}

	// approve on an untrusted workspace records the decision and says
	// what else is needed.
	r = runCLI(t, "approve", "a", "--workspace", ws)
	if r.err != nil || !strings.Contains(r.stdout, "a: approved by") ||
		!strings.Contains(r.stderr, "a cannot start yet: the workspace "+ws+" is not trusted") ||
		!strings.Contains(r.stderr, "mcpledger trust "+ws+"\n") {
		t.Fatalf("approve on an untrusted workspace: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	// Names and --all together, --trust on reject, and nothing named are
	// usage errors; an unknown name among known ones records nothing.
	for _, args := range [][]string{{"approve", "a", "--all"}, {"reject", "--trust", "a"}, {"approve", "--workspace", ws}} {
		if r := runCLI(t, args...); exitCode(r.err) != 2 {
			t.Errorf("%q: exit %d (%v), want 2", args, exitCode(r.err), r.err)
		}
	}
	if r := runCLI(t, "approve", "b", "nosuch", "--workspace", ws); r.err == nil || !strings.Contains(r.err.Error(), "nothing was recorded") {
		t.Errorf("approve b nosuch: %v", r.err)
	}

	// --trust --all: trusts, and approves b, the only one still waiting.
	r = runCLI(t, "approve", "--trust", "--all", "--workspace", ws)
	if r.err != nil || !strings.Contains(r.stdout, "b: approved by") || strings.Contains(r.stdout, "a: approved") ||
		!strings.Contains(r.stdout, "trusted "+ws) {
		t.Fatalf("approve --trust --all: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	r = runCLI(t, "run", "--once", "--workspace", ws)
	if r.err != nil || strings.Count(r.stdout, " ready ") != 2 || strings.Contains(r.stderr, "next:") {
		t.Fatalf("run --once after approve --trust --all: %v\n%s%s", r.err, r.stdout, r.stderr)
	}

	// Trusted: new servers wait for an approval only; several names at once.
	writeProject(t, ws, bin, "a", "b", "c", "d")
	r = runCLI(t, "run", "--once", "--workspace", ws)
	if r.err != nil || !strings.Contains(r.stderr, "next: mcpledger approve --workspace "+ws+" c d\n") {
		t.Fatalf("run --once with two new servers: %v\n%s", r.err, r.stderr)
	}
	if r := runCLI(t, "approve", "c", "--workspace", ws, "d"); r.err != nil || !strings.Contains(r.stdout, "c: approved") || !strings.Contains(r.stdout, "d: approved") {
		t.Fatalf("approve c d: %v\n%s", r.err, r.stdout)
	}
	if r := runCLI(t, "run", "--once", "--workspace", ws); r.err != nil || strings.Count(r.stdout, " ready ") != 4 {
		t.Fatalf("run --once after approve c d: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
}

// TestApproveTrustThroughRunning: with `run` running on an untrusted
// workspace, approve --trust NAME acts through it: it approves, trusts
// the workspace and has it read the config again, and the server becomes
// ready without a restart.
func TestApproveTrustThroughRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	bin := runtimetest.BuildServer(t)
	ws, jp := firstRunWorkspace(t, bin, "a")
	cmd, stderr := cliProcess(t, nil, "run", "--watch=false", "--journal", jp, "--workspace", ws)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s; stderr:\n%s", what, stderr.String())
			}
		}
	}
	waitUntil("the session", func() bool { return strings.Contains(stderr.String(), "session ") })
	if !strings.Contains(stderr.String(), "next: mcpledger approve --trust --workspace "+ws+" a\n") {
		t.Errorf("run does not say the next command:\n%s", stderr.String())
	}
	if r := runCLI(t, "status"); !strings.Contains(r.stdout, "(running)") || !strings.Contains(r.stdout, "next: mcpledger approve --trust") {
		t.Errorf("status of the running session: %v\n%s", r.err, r.stdout)
	}
	r := runCLI(t, "approve", "--trust", "a")
	if r.err != nil || !strings.Contains(r.stdout, "a: approved by") || !strings.Contains(r.stdout, "trusted "+ws) {
		t.Fatalf("approve --trust a: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	waitUntil("a ready", func() bool {
		r := runCLI(t, "status", "--json")
		return strings.Contains(r.stdout, `"name":"a","state":"ready"`)
	})
	if b, err := os.ReadFile(filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "mcpledger", "config.json")); err != nil || !strings.Contains(string(b), ws) {
		t.Errorf("user config: %v %s", err, b)
	}
	stopRun(t, cmd)
}

// TestServeSaysWhyNoTools: serve --stdio that serves no tool says why on
// stderr: no config at all (naming the files it read), or servers that
// are admitted but failed (each with its reason, error and recovery).
func TestServeSaysWhyNoTools(t *testing.T) {
	dir, _ := configEnv(t)
	empty := filepath.Join(dir, "empty")
	os.MkdirAll(empty, 0o755)
	r := runCLI(t, "serve", "--stdio", "--workspace", empty)
	user := filepath.Join(dir, "xdg", "mcpledger", "config.json")
	if r.err != nil || !strings.Contains(r.stderr, "no server is configured: add one to a config file (mcpledger read "+user) {
		t.Errorf("serve with no config: %v\n%s", r.err, r.stderr)
	}

	cfg := write(t, filepath.Join(dir, "c.json"), `{"mcpServers": {"gone": {"command": "mcp-server-doesnotexist"}}}`)
	r = runCLI(t, "serve", "--stdio", "--mcp-config", cfg, "--workspace", empty)
	want := "serving no tools yet: no server lists one (a server that becomes ready later adds its tools, announced with list_changed)\n" +
		`  gone is failed (not_found): not_found: command "mcp-server-doesnotexist" is not in any directory of $PATH (install it, or give its absolute path); fix its "command"`
	if r.err != nil || !strings.Contains(r.stderr, want) {
		t.Errorf("serve with a command not found: %v\n%s\nwant\n%s", r.err, r.stderr, want)
	}
}

// TestRunPrintsAnErrorOnce: run's state lines carry a server's error when
// it changes and on the line that ends in failed, not on every relaunch
// of a crash loop.
func TestRunPrintsAnErrorOnce(t *testing.T) {
	dir, _ := configEnv(t) // at most 2 attempts
	cfg := write(t, filepath.Join(dir, "c.json"), `{"mcpServers": {"crashy": {"command": "sh", "args": ["-c", "echo boom >&2; exit 3"]}}}`)
	r := runCLI(t, "run", "--once", "--mcp-config", cfg, "--workspace", dir)
	if exitCode(r.err) != 1 {
		t.Fatalf("run --once: %v\n%s", r.err, r.stderr)
	}
	var with []string
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, "exited with code 3") {
			with = append(with, strings.Fields(line)[2])
		}
	}
	if strings.Join(with, " ") != "reconnecting failed" {
		t.Errorf("the error is on the lines of states %v, want [reconnecting failed]:\n%s", with, r.stderr)
	}
}

// TestNextStepQuotes: the suggested command can be pasted into a shell
// as it is: a workspace or name with spaces or quotes is quoted, and
// --workspace is left out when the command runs in the workspace.
func TestNextStepQuotes(t *testing.T) {
	rows := []projections.ServerStatus{
		{Name: "it's", State: events.StateStopped, Reason: events.ReasonUntrusted},
		{Name: "web", State: events.StateStopped, Reason: events.ReasonPendingApproval},
		{Name: "ok", State: events.StateReady},
		{Name: "off", State: events.StateStopped, Reason: events.ReasonDisabled},
	}
	cmd, does := nextStep(rows, "/tmp/my ws", "/elsewhere")
	if want := `mcpledger approve --trust --workspace '/tmp/my ws' 'it'\''s' web`; cmd != want {
		t.Errorf("got  %s\nwant %s", cmd, want)
	}
	if want := `in two steps: mcpledger trust '/tmp/my ws'; mcpledger approve --workspace '/tmp/my ws' 'it'\''s' web`; !strings.HasSuffix(does, want) {
		t.Errorf("got  %s\nwant it to end with %s", does, want)
	}
	if cmd, _ := nextStep(rows[1:], "/tmp/my ws", "/tmp/my ws"); cmd != "mcpledger approve web" {
		t.Errorf("in the workspace, approval only: %s", cmd)
	}
	if cmd, _ := nextStep(rows[2:], "/w", "/w"); cmd != "" {
		t.Errorf("nothing waits, yet: %s", cmd)
	}
}

// TestTrustSaysWhatIsLeft: trust (the first of the two steps) names the
// approvals its workspace's servers still wait for, and nothing when
// none waits.
func TestTrustSaysWhatIsLeft(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	ws, _ := firstRunWorkspace(t, bin, "a", "b")
	if r := runCLI(t, "approve", "a", "--workspace", ws); r.err != nil {
		t.Fatal(r.err)
	}
	r := runCLI(t, "trust", ws)
	if want := "next: mcpledger approve --workspace " + ws + " b (their configs wait for an approval)\n"; r.err != nil || !strings.HasSuffix(r.stdout, want) {
		t.Errorf("trust: %v\n%s\nwant it to end with %s", r.err, r.stdout, want)
	}
	if r := runCLI(t, "approve", "b", "--workspace", ws); r.err != nil || r.stderr != "" {
		t.Errorf("approve b on a trusted workspace: %v %q", r.err, r.stderr)
	}
	os.Remove(filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "mcpledger", "config.json"))
	if r := runCLI(t, "trust", ws); r.err != nil || strings.Contains(r.stdout, "next:") {
		t.Errorf("trust with nothing waiting: %v\n%s", r.err, r.stdout)
	}
}
