package runtime_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// workspace is a real workspace on disk: a .mcp.json (project, gated), a
// user config dir, and a flag config file.
type workspace struct {
	t                   *testing.T
	dir, userDir, flags string
	src                 config.Sources
}

func newWorkspace(t *testing.T) *workspace {
	root := t.TempDir()
	w := &workspace{t: t, dir: filepath.Join(root, "ws"), userDir: filepath.Join(root, "user"), flags: filepath.Join(root, "flags.json")}
	for _, d := range []string{w.dir, w.userDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	w.src = config.Sources{Workspace: w.dir, UserDir: w.userDir, LookupEnv: os.LookupEnv, Home: root}
	return w
}

func (w *workspace) write(path string, v any) {
	w.t.Helper()
	b, _ := json.MarshalIndent(v, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // as editors do
		w.t.Fatal(err)
	}
}

// writeB is write for benchmarks.
func (w *workspace) writeB(b *testing.B, path string, v any) {
	b.Helper()
	data, _ := json.MarshalIndent(v, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
}

func (w *workspace) project(servers map[string]any) {
	w.write(filepath.Join(w.dir, ".mcp.json"), map[string]any{"mcpServers": servers})
}

// flagFile (re)writes the --mcp-config file. Call it once before the
// manager starts: the loader reads w.src from the watcher's goroutine.
func (w *workspace) flagFile(servers map[string]any) {
	w.write(w.flags, map[string]any{"mcpServers": servers})
	if len(w.src.Flags) == 0 {
		w.src.Flags = []string{w.flags}
	}
}
func (w *workspace) user(v map[string]any) { w.write(filepath.Join(w.userDir, "config.json"), v) }
func (w *workspace) loader() func() config.Reading {
	return func() config.Reading { return config.Load(w.src) }
}

func (w *workspace) opts(watch bool) *runtime.Options {
	o := fastOpts(w.loader())
	o.Watch, o.Debounce = watch, 100*time.Millisecond
	return o
}

func srv(bin string, args ...string) map[string]any {
	return map[string]any{"command": bin, "args": args}
}

// srvEnv is a server entry whose env carries version: editing it changes
// the config hash, as an edit of args would.
func srvEnv(bin, version string) map[string]any {
	return map[string]any{"command": bin, "env": map[string]string{"MCPTEST_NAME": "v" + version}}
}

func TestReloadRestartsOnlyTheChangedServer(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	w := newWorkspace(t)
	w.flagFile(map[string]any{"steady": srv(bin), "edited": srvEnv(bin, "1")})
	m, _ := runtime.New(adapter, w.opts(true))
	if rep, err := m.Start(t.Context()); err != nil || len(rep.Ready) != 2 {
		t.Fatalf("start %v %+v", err, rep)
	}
	defer m.Close()
	steady := state(m.Snapshot(), "steady")
	// A long call on the unchanged server is in flight during the reload.
	done := make(chan error, 1)
	go func() {
		_, err := m.CallTool(t.Context(), "mcp__steady__slow", map[string]any{"ms": 1500})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	w.flagFile(map[string]any{"steady": srv(bin), "edited": srvEnv(bin, "2"), "added": srv(bin)})
	waitFor(t, m, "edited restarted and added ready", func(v *runtime.View) bool {
		e, a := state(v, "edited"), state(v, "added")
		return e.State == events.StateReady && e.Attempt == 2 && a.State == events.StateReady
	})
	if err := <-done; err != nil {
		t.Errorf("the call in flight on the unchanged server failed: %v", err)
	}
	if s := state(m.Snapshot(), "steady"); s.Attempt != steady.Attempt || s.PID != steady.PID {
		t.Errorf("steady was restarted: %+v → %+v", steady, s)
	}
	w.flagFile(map[string]any{"steady": srv(bin), "edited": srvEnv(bin, "2")})
	waitFor(t, m, "added removed", func(v *runtime.View) bool {
		s := state(v, "added")
		return s.State == events.StateStopped && s.Reason == events.ReasonRemoved
	})
	var verdicts []string
	for _, e := range sessionEvents(t, j, m.Session()) {
		if p, ok := e.Payload.(*events.ReloadDecided); ok && p.Trigger == "watch" {
			for _, v := range p.Verdicts {
				verdicts = append(verdicts, v.Server+":"+v.Verdict)
			}
		}
	}
	want := []string{"added:add", "edited:restart", "steady:keep", "added:remove", "edited:keep", "steady:keep"}
	if !slices.Equal(verdicts, want) {
		t.Errorf("reload verdicts %v, want %v", verdicts, want)
	}
}

func TestApprovalsSurviveRestartsAndBindToHash(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	w := newWorkspace(t)
	w.user(map[string]any{"trustedFolders": []string{w.dir}})
	w.project(map[string]any{"gh": srvEnv(bin, "a"), "other": srv(bin)})
	m, _ := runtime.New(adapter, w.opts(false))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	v := m.Snapshot()
	if s := state(v, "gh"); s.State != events.StateStopped || s.Reason != events.ReasonPendingApproval {
		t.Fatalf("gh before approval: %+v", s)
	}
	if got := v.Promptable(); !slices.Equal(got, []string{"gh", "other"}) {
		t.Errorf("promptable %v", got)
	}
	_, err := m.CallTool(t.Context(), "mcp__gh__echo", nil)
	var ue *runtime.UnavailableError
	if !errors.As(err, &ue) || ue.Reason != events.ReasonPendingApproval {
		t.Errorf("call before approval: %v", err)
	}
	if err := m.Approve(t.Context(), "gh", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := m.Reject(t.Context(), "other", "alice"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "gh ready after approval", func(v *runtime.View) bool { return state(v, "gh").State == events.StateReady })
	if got := m.Snapshot().Promptable(); len(got) != 0 {
		t.Errorf("promptable after decisions: %v", got)
	}
	if err := m.Approve(t.Context(), "nosuch", "alice"); !errors.Is(err, runtime.ErrUnknownServer) {
		t.Errorf("approve unknown: %v", err)
	}
	m.Close()

	// A new process: still approved, still rejected; nothing to prompt.
	m2, _ := runtime.New(adapter, w.opts(false))
	if _, err := m2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Start may return at the gate with gh still connecting (its tools are
	// cached from the first session, so they are offered as deferred).
	waitFor(t, m2, "gh ready after restart, without a new approval", func(v *runtime.View) bool {
		return state(v, "gh").State == events.StateReady
	})
	if s := state(m2.Snapshot(), "other"); s.Reason != events.ReasonRejected {
		t.Errorf("other after restart: %+v", s)
	}
	// An edit of gh alone does not re-offer the rejected server; it makes
	// gh pending again, naming the change.
	w.project(map[string]any{"gh": srvEnv(bin, "b"), "other": srv(bin)})
	if err := m2.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := state(m2.Snapshot(), "gh"); s.Reason != events.ReasonPendingApproval {
		t.Errorf("gh after an args edit: %+v", s)
	}
	if got := m2.Snapshot().Promptable(); !slices.Equal(got, []string{"gh"}) {
		t.Errorf("promptable after edit: %v", got)
	}
	rows, _ := m2.Approvals(t.Context())
	for _, r := range rows {
		if r.Server == "gh" && (r.State != "pending" || !slices.Equal(r.Changed, []string{"env:MCPTEST_NAME"})) {
			t.Errorf("approvals row %+v", r)
		}
		if r.Server == "other" && r.State != "rejected" {
			t.Errorf("approvals row %+v", r)
		}
	}
	m2.Close()
	_ = j
}

func TestUntrustedWorkspaceAndLaunchBound(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	_, adapter := openJournal(t)
	w := newWorkspace(t)
	w.project(map[string]any{"local": srv(bin)})
	w.user(map[string]any{"allowed": []string{"a", "b", "c", "local"}})
	w.flagFile(map[string]any{"a": srv(bin), "b": srv(bin), "c": srv(bin)})
	w.src.LaunchBound, w.src.HasLaunchBound = []string{"a", "b", "local"}, true
	m, _ := runtime.New(adapter, w.opts(false))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	v := m.Snapshot()
	for name, want := range map[string]events.Reason{"a": "", "b": "", "c": events.ReasonNotAllowed, "local": events.ReasonUntrusted} {
		if s := state(v, name); s.Reason != want {
			t.Errorf("%s: %+v, want reason %q", name, s, want)
		}
	}
	_, err := m.CallTool(t.Context(), "mcp__c__echo", nil)
	if err == nil || !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("call to c: %v", err)
	}
}

func TestToolPinningWithholdsNewTools(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	_, adapter := openJournal(t)
	w := newWorkspace(t)
	count := filepath.Join(t.TempDir(), "count")
	if err := os.WriteFile(count, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.user(map[string]any{"trustedFolders": []string{w.dir}})
	// The number of extra tools comes from a file, so the config (and its
	// approval) stays the same while the tools change.
	w.project(map[string]any{"pin": srv("/bin/sh", "-c", `MCPTEST_TOOL_COUNT=$(cat `+count+`) exec `+bin)})
	m, _ := runtime.New(adapter, w.opts(false))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Approve(t.Context(), "pin", "alice"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "pin ready", func(v *runtime.View) bool { return state(v, "pin").State == events.StateReady })
	if err := os.WriteFile(count, []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Reconnect(t.Context(), "pin"); err != nil {
		t.Fatal(err)
	}
	v := waitFor(t, m, "a withheld tool", func(v *runtime.View) bool { return len(v.Catalog.Withheld) > 0 })
	wt := v.Catalog.Withheld[0]
	_, err := m.CallTool(t.Context(), "mcp__pin__"+wt.Tool, nil)
	var ue *runtime.UnavailableError
	if !errors.As(err, &ue) || ue.Reason != events.ReasonToolChanged {
		t.Fatalf("call to withheld %s: %v", wt.Tool, err)
	}
	if _, err := m.CallTool(t.Context(), "mcp__pin__echo", map[string]any{"message": "x"}); err != nil {
		t.Errorf("pinned tool: %v", err)
	}
	if err := m.Approve(t.Context(), "pin", "alice"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "withheld cleared by re-approval", func(v *runtime.View) bool { return len(v.Catalog.Withheld) == 0 })
}

// TestReloadHeldWhileAFileIsUnusable: a config file broken by an edit
// (here: truncated mid-save) stops nothing: the reload journals the
// file's error, which the view's config report shows, and keeps every
// server as it was (same process, same attempt, calls answered); once the
// file reads whole again, the reload applies as usual.
func TestReloadHeldWhileAFileIsUnusable(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	w := newWorkspace(t)
	w.flagFile(map[string]any{"steady": srv(bin)})
	m, _ := runtime.New(adapter, w.opts(true))
	if rep, err := m.Start(t.Context()); err != nil || len(rep.Ready) != 1 {
		t.Fatalf("start %v %+v", err, rep)
	}
	defer m.Close()
	before := state(m.Snapshot(), "steady")
	if err := os.WriteFile(w.flags, []byte("{\n  \"mcpServers\": {\n    \"steady\": {\"comm"), 0o600); err != nil {
		t.Fatal(err)
	}
	v := waitFor(t, m, "the broken file's error", func(v *runtime.View) bool { return len(v.Config.Errors) > 0 })
	if want := w.flags + ":3:21: unexpected end of JSON input"; !strings.HasPrefix(v.Config.Errors[0], want) {
		t.Errorf("errors %q, want %q...", v.Config.Errors, want)
	}
	if s := state(v, "steady"); s.State != events.StateReady || s.PID != before.PID || s.Attempt != before.Attempt {
		t.Errorf("steady during the broken file: %+v, was %+v", s, before)
	}
	if _, err := m.CallTool(t.Context(), "mcp__steady__echo", map[string]any{"message": "still here"}); err != nil {
		t.Errorf("a call while the file is broken: %v", err)
	}
	w.flagFile(map[string]any{"steady": srv(bin), "added": srv(bin)})
	v = waitFor(t, m, "added ready after the fix", func(v *runtime.View) bool {
		return state(v, "added").State == events.StateReady && len(v.Config.Errors) == 0
	})
	if s := state(v, "steady"); s.PID != before.PID || s.Attempt != before.Attempt {
		t.Errorf("steady after the fix: %+v, was %+v", s, before)
	}
	for _, e := range sessionEvents(t, j, m.Session()) {
		if p, ok := e.Payload.(*events.ServerTransitioned); ok && e.Server == "steady" && p.To == events.StateStopped {
			t.Errorf("steady was stopped: %+v", p)
		}
	}
}
