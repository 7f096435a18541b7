package runtime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestCommandNotFoundIsAConfigError: a stdio server whose command does
// not exist, cannot be executed (no execute permission, a directory, a
// script whose interpreter is missing) or whose working directory does
// not exist fails at its first launch with reason not_found or
// not_executable and one clear error: no backoff timer, no second
// launch. Fixing the config relaunches it at once (a reload verdict
// restart, no timer), and it becomes ready.
func TestCommandNotFoundIsAConfigError(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	w := newWorkspace(t)
	tmp := t.TempDir()
	noexec := filepath.Join(tmp, "server.sh")
	script := filepath.Join(tmp, "interp.sh")
	os.WriteFile(noexec, []byte("#!/bin/sh\nexit 0\n"), 0o644)
	os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o755)
	broken := map[string]any{
		"gone":   srv("mcp-server-doesnotexist"),
		"noexec": srv(noexec),
		"dir":    srv(tmp),
		"interp": srv(script),
		"nocwd":  map[string]any{"command": bin, "cwd": filepath.Join(tmp, "missing")},
	}
	w.flagFile(broken)
	m, _ := runtime.New(adapter, w.opts(true))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := map[string]struct {
		reason events.Reason
		says   string
	}{
		"gone":   {events.ReasonNotFound, `not_found: command "mcp-server-doesnotexist" is not in any directory of $PATH`},
		"noexec": {events.ReasonNotExecutable, "has no execute permission"},
		"dir":    {events.ReasonNotExecutable, "is a directory"},
		"interp": {events.ReasonNotFound, "interpreter on its #! line"},
		"nocwd":  {events.ReasonNotFound, "working directory"},
	}
	v := waitFor(t, m, "every server failed", func(v *runtime.View) bool {
		for name := range want {
			if state(v, name).State != events.StateFailed {
				return false
			}
		}
		return true
	})
	for name, w := range want {
		s := state(v, name)
		if s.Reason != w.reason || s.Attempt != 1 || !strings.Contains(s.Error, w.says) {
			t.Errorf("%s: %s (%s) attempt %d %q, want %s after one attempt, saying %q", name, s.State, s.Reason, s.Attempt, s.Error, w.reason, w.says)
		}
		if strings.Count(s.Error, "\n") > 0 {
			t.Errorf("%s: the error is not one line: %q", name, s.Error)
		}
	}
	evs := sessionEvents(t, j, m.Session())
	for _, e := range evs {
		if _, ok := e.Payload.(*events.TimerScheduled); ok {
			t.Errorf("a backoff timer was scheduled for %s: a config error is not retried", e.Server)
		}
	}

	// The command fixed: relaunched at once by the reload, and ready.
	broken["gone"] = srv(bin)
	w.flagFile(broken)
	waitFor(t, m, "gone ready", func(v *runtime.View) bool { return state(v, "gone").State == events.StateReady })
	restarted := false
	for _, e := range sessionEvents(t, j, m.Session()) {
		switch p := e.Payload.(type) {
		case *events.TimerScheduled:
			t.Errorf("a timer was scheduled for %s", e.Server)
		case *events.ReloadDecided:
			for _, v := range p.Verdicts {
				restarted = restarted || v.Server == "gone" && v.Verdict == events.VerdictRestart
			}
		}
	}
	if !restarted {
		t.Error("the reload did not restart gone")
	}
	if s := state(m.Snapshot(), "gone"); s.Attempt != 2 {
		t.Errorf("gone ready at attempt %d, want 2 (one launch per config)", s.Attempt)
	}
	if r := runtime.Recovery("gone", events.ReasonNotFound, events.StateFailed); !strings.Contains(r, `fix its "command"`) {
		t.Errorf("recovery: %q", r)
	}
}
