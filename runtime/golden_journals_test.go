package runtime_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

var recordJournals = flag.Bool("record-journals", false, "re-record the golden journals in testdata/journals from real runs")

// TestRecordGoldenJournals records sessions of real runs (real processes,
// real bbolt journal) and exports them as JSONL into testdata/journals,
// where the replay tests verify each in CI. It runs only with
// -record-journals: the recordings are fixtures, re-recorded on purpose.
//
//	go test ./runtime -run TestRecordGoldenJournals -record-journals
func TestRecordGoldenJournals(t *testing.T) {
	if !*recordJournals {
		t.Skip("recording golden journals only with -record-journals")
	}
	bin := runtimetest.BuildServer(t)
	dir := filepath.Join("..", "testdata", "journals")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	export := func(j *store.Journal, sid uuid.UUID, name string) {
		t.Helper()
		evs := sessionEvents(t, j, sid)
		if err := replay.VerifyEvents(evs); err != nil {
			t.Fatalf("%s does not verify as recorded: %v", name, err)
		}
		f, err := os.Create(filepath.Join(dir, name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := replay.WriteJSONL(f, evs); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("crash-loop", func(t *testing.T) {
		j, adapter := openJournal(t)
		cc, sc := stdio("crashy", bin, nil, "MCPTEST_CRASH_AFTER=1")
		cd, sd := stdio("dead", bin, nil, "MCPTEST_CRASH_ON_START=1")
		m, _ := runtime.New(adapter, fastOpts(configOf(cc, sc, cd, sd)))
		m.Start(t.Context())
		m.CallTool(t.Context(), "mcp__crashy__echo", map[string]any{"message": "1"})
		waitFor(t, m, "crashy back, dead failed", func(v *runtime.View) bool {
			return state(v, "crashy").Attempt == 2 && state(v, "crashy").State == events.StateReady && state(v, "dead").State == events.StateFailed
		})
		m.Close()
		export(j, m.Session(), "crash-loop")
	})

	t.Run("hang-initialize", func(t *testing.T) {
		j, adapter := openJournal(t)
		c, s := stdio("hang", bin, nil, "MCPTEST_HANG_INITIALIZE=1")
		o := fastOpts(configOf(c, s))
		o.StartupTimeout = 300 * time.Millisecond
		o.Decider.MaxAttempts = 2
		m, _ := runtime.New(adapter, o)
		m.Start(t.Context())
		waitFor(t, m, "hang failed", func(v *runtime.View) bool { return state(v, "hang").State == events.StateFailed })
		m.Close()
		export(j, m.Session(), "hang-initialize")
	})

	t.Run("storm-hold", func(t *testing.T) {
		j, adapter := openJournal(t)
		c, s := stdio("loop", bin, nil, "MCPTEST_CRASH_ON_START=1")
		opts := func() *runtime.Options {
			o := fastOpts(configOf(c, s))
			o.Decider = events.DeciderOptions{BackoffBaseMs: 10, BackoffMaxMs: 20, MaxAttempts: 3, StormLimit: 3, StormWindowMs: 60_000}
			return o
		}
		m1, _ := runtime.New(adapter, opts())
		m1.Start(t.Context())
		waitFor(t, m1, "loop failed", func(v *runtime.View) bool { return state(v, "loop").State == events.StateFailed })
		m1.Close()
		m2, _ := runtime.New(adapter, opts())
		m2.Start(t.Context())
		m2.Close()
		export(j, m1.Session(), "storm-hold-first-run")
		export(j, m2.Session(), "storm-hold-after-restart")
	})

	// Decision version 2: the breaker counts crashes. A crash loop ends
	// failed after 3 attempts (3 crashes); the next run holds it at
	// admission; a reconnect recorded with nothing running clears the
	// hold, and the run after it launches the server again. (storm-hold-*
	// above were recorded at decision version 1, which counted launches,
	// and still verify as recorded.)
	t.Run("storm-crashes", func(t *testing.T) {
		j, adapter := openJournal(t)
		c, s := stdio("loop", bin, nil, "MCPTEST_CRASH_ON_START=1")
		opts := func() *runtime.Options {
			o := fastOpts(configOf(c, s))
			o.Decider = events.DeciderOptions{BackoffBaseMs: 10, BackoffMaxMs: 20, MaxAttempts: 3, StormLimit: 3, StormWindowMs: 60_000}
			return o
		}
		m1, _ := runtime.New(adapter, opts())
		m1.Start(t.Context())
		waitFor(t, m1, "loop failed", func(v *runtime.View) bool { return state(v, "loop").State == events.StateFailed })
		m1.Close()
		m2, _ := runtime.New(adapter, opts())
		m2.Start(t.Context())
		m2.Close()
		sid, err := runtime.RecordReconnect(t.Context(), adapter, "loop", "cli", "test", func() int64 { return time.Now().UnixNano() })
		if err != nil {
			t.Fatal(err)
		}
		m3, _ := runtime.New(adapter, opts())
		m3.Start(t.Context())
		waitFor(t, m3, "loop failed again", func(v *runtime.View) bool { return state(v, "loop").State == events.StateFailed })
		m3.Close()
		export(j, m1.Session(), "storm-crashes-first-run")
		export(j, m2.Session(), "storm-crashes-held")
		export(j, sid, "storm-crashes-offline-reconnect")
		export(j, m3.Session(), "storm-crashes-after-reconnect")
	})

	t.Run("reload", func(t *testing.T) {
		j, adapter := openJournal(t)
		w := newWorkspace(t)
		w.flagFile(map[string]any{"steady": srv(bin), "edited": srvEnv(bin, "1"), "dropped": srv(bin)})
		m, _ := runtime.New(adapter, w.opts(true))
		m.Start(t.Context())
		w.flagFile(map[string]any{"steady": srv(bin), "edited": srvEnv(bin, "2"), "added": srv(bin)})
		waitFor(t, m, "reconciled", func(v *runtime.View) bool {
			return state(v, "edited").Attempt == 2 && state(v, "edited").State == events.StateReady &&
				state(v, "added").State == events.StateReady && state(v, "dropped").Reason == events.ReasonRemoved
		})
		m.Close()
		export(j, m.Session(), "reload")
	})

	t.Run("approvals", func(t *testing.T) {
		j, adapter := openJournal(t)
		w := newWorkspace(t)
		w.user(map[string]any{"trustedFolders": []string{w.dir}})
		w.project(map[string]any{"gh": srvEnv(bin, "a"), "other": srv(bin)})
		m, _ := runtime.New(adapter, w.opts(false))
		m.Start(t.Context())
		m.Approve(t.Context(), "gh", "alice")
		m.Reject(t.Context(), "other", "alice")
		waitFor(t, m, "gh ready", func(v *runtime.View) bool { return state(v, "gh").State == events.StateReady })
		m.CallTool(t.Context(), "mcp__gh__echo", map[string]any{"message": "approved"})
		w.project(map[string]any{"gh": srvEnv(bin, "b"), "other": srv(bin)})
		m.Reload(t.Context())
		m.Close()
		export(j, m.Session(), "approvals")
	})

	t.Run("sign-in", func(t *testing.T) {
		// A hosted server that needs a sign-in: failed/needs_auth at once,
		// then the sign-in `mcpledger login` journals relaunches it.
		p := newProtectedServer(t)
		st := oauthStore(t)
		j, adapter := openJournal(t)
		c, s := remote("hosted", events.TransportHTTP, p.url(), nil)
		o := fastOpts(configOf(c, s))
		o.OAuthStore = st
		m, _ := runtime.New(adapter, o)
		m.Start(t.Context())
		waitFor(t, m, "needs_auth", func(v *runtime.View) bool { return state(v, "hosted").Reason == events.ReasonNeedsAuth })
		p.signIn(t, st, "hosted", false)
		m.RecordAuth(t.Context(), "hosted", &events.AuthSignedIn{Issuer: p.srv.URL, Resource: p.url(), Scopes: []string{"mcp"},
			ClientKind: events.ClientRegistered})
		waitFor(t, m, "ready", func(v *runtime.View) bool { return state(v, "hosted").State == events.StateReady })
		m.CallTool(t.Context(), "mcp__hosted__echo", map[string]any{"message": "signed in"})
		m.Close()
		export(j, m.Session(), "sign-in")
	})

	t.Run("not-found", func(t *testing.T) {
		// A command that does not exist: failed/not_found at once, no
		// retry; the config fixed and reloaded, it is relaunched at once.
		j, adapter := openJournal(t)
		w := newWorkspace(t)
		w.flagFile(map[string]any{"gone": srv("mcp-server-doesnotexist")})
		m, _ := runtime.New(adapter, w.opts(false))
		m.Start(t.Context())
		waitFor(t, m, "not_found", func(v *runtime.View) bool { return state(v, "gone").Reason == events.ReasonNotFound })
		w.flagFile(map[string]any{"gone": srv(bin)})
		m.Reload(t.Context())
		waitFor(t, m, "ready", func(v *runtime.View) bool { return state(v, "gone").State == events.StateReady })
		m.CallTool(t.Context(), "mcp__gone__echo", map[string]any{"message": "found"})
		m.Close()
		export(j, m.Session(), "not-found")
	})

	t.Run("tool-pinning", func(t *testing.T) {
		j, adapter := openJournal(t)
		w := newWorkspace(t)
		count := filepath.Join(t.TempDir(), "count")
		os.WriteFile(count, []byte("0"), 0o600)
		w.user(map[string]any{"trustedFolders": []string{w.dir}})
		w.project(map[string]any{"pin": srv("/bin/sh", "-c", `MCPTEST_TOOL_COUNT=$(cat `+count+`) exec `+bin)})
		m, _ := runtime.New(adapter, w.opts(false))
		m.Start(t.Context())
		m.Approve(t.Context(), "pin", "alice")
		waitFor(t, m, "pin ready", func(v *runtime.View) bool { return state(v, "pin").State == events.StateReady })
		os.WriteFile(count, []byte("1"), 0o600)
		m.Reconnect(t.Context(), "pin")
		waitFor(t, m, "withheld", func(v *runtime.View) bool { return len(v.Catalog.Withheld) > 0 })
		m.Close()
		export(j, m.Session(), "tool-pinning")
	})

	// Bad journals: the crash loop with one decision removed (the decider
	// makes an extra one), one invented (a missing one), and a backoff
	// delay altered (a different one).
	good, err := os.ReadFile(filepath.Join(dir, "crash-loop.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(good)), "\n")
	firstOf := func(kind events.Kind) int {
		for i, l := range lines {
			var e struct {
				Kind events.Kind `json:"kind"`
			}
			json.Unmarshal([]byte(l), &e)
			if e.Kind == kind {
				return i
			}
		}
		t.Fatalf("no %s in crash-loop", kind)
		return -1
	}
	write := func(name string, ls []string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	i := firstOf(events.KindTimerScheduled)
	write("bad-extra-dropped-timer.jsonl", append(append([]string{}, lines[:i]...), lines[i+1:]...))
	write("bad-missing-invented-stop.jsonl", append(append(append([]string{}, lines[:i+1]...),
		strings.Replace(lines[i], `"kind":"timer.scheduled"`, `"kind":"session.stopped"`, 1)), lines[i+1:]...))
	changed := append([]string{}, lines...)
	var ev map[string]any
	json.Unmarshal([]byte(changed[i]), &ev)
	p := ev["payload"].(map[string]any)
	p["delay_ms"] = p["delay_ms"].(float64) + 1
	b, _ := json.Marshal(ev)
	changed[i] = string(b)
	write("bad-different-delay.jsonl", changed)
}
