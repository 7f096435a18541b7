package runtime_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestStartupGateServesDeferredTools: a second session offers the tools a
// server listed in the first as deferred while it is still connecting, and
// a call to one waits for the server.
func TestStartupGateServesDeferredTools(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	delay := filepath.Join(t.TempDir(), "delay")
	if err := os.WriteFile(delay, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The delay lives in a file, so both sessions run the same config (and
	// fingerprint): only the server's speed differs.
	c, s := stdio("slow", "/bin/sh", []string{"-c", `sleep "$(cat ` + delay + `)"; exec ` + bin})
	m1, _ := runtime.New(adapter, fastOpts(configOf(c, s)))
	if rep, err := m1.Start(t.Context()); err != nil || len(rep.Ready) != 1 {
		t.Fatalf("session 1: %v %+v", err, rep)
	}
	m1.Close()

	if err := os.WriteFile(delay, []byte("1.5"), 0o600); err != nil {
		t.Fatal(err)
	}
	m2, _ := runtime.New(adapter, fastOpts(configOf(c, s)))
	defer m2.Close()
	t0 := time.Now()
	rep, err := m2.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Start took %v; the gate is 250 ms when cached tools exist", d)
	}
	if len(rep.Connecting) != 1 || rep.Deferred == 0 {
		t.Fatalf("report %+v", rep)
	}
	tools := m2.Tools()
	if len(tools) == 0 || !tools[0].Deferred {
		t.Fatalf("tools %+v", tools)
	}
	res, err := m2.CallTool(t.Context(), "mcp__slow__echo", map[string]any{"message": "waited"})
	if err != nil || res.IsError {
		t.Fatalf("call to a deferred tool: %v %+v", err, res)
	}
	if time.Since(t0) < time.Second {
		t.Error("the call did not wait for the server")
	}
	if st := state(m2.Snapshot(), "slow"); st.State != events.StateReady {
		t.Errorf("state %s", st.State)
	}
	_ = j
}

// TestStormBreakerAcrossRestarts: crashes journaled by one session count
// against the breaker in the next, so a crash loop stays held after a
// restart instead of starting over.
func TestStormBreakerAcrossRestarts(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	c, s := stdio("loop", bin, nil, "MCPTEST_CRASH_ON_START=1")
	opts := func() *runtime.Options {
		o := fastOpts(configOf(c, s))
		o.Decider = events.DeciderOptions{BackoffBaseMs: 10, BackoffMaxMs: 20, MaxAttempts: 3, StormLimit: 3, StormWindowMs: 60_000}
		return o
	}
	m1, _ := runtime.New(adapter, opts())
	if _, err := m1.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m1, "loop failed", func(v *runtime.View) bool { return state(v, "loop").State == events.StateFailed })
	m1.Close()

	m2, _ := runtime.New(adapter, opts())
	rep, err := m2.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st := state(m2.Snapshot(), "loop")
	if st.State != events.StateStopped || st.Reason != events.ReasonStormHold {
		t.Errorf("after restart: %+v (report %+v)", st, rep)
	}
	for _, e := range sessionEvents(t, j, m2.Session()) {
		if e.Kind == events.KindProcessSpawned {
			t.Errorf("session 2 spawned the held server: %+v", e)
		}
	}
	_, err = m2.CallTool(t.Context(), "mcp__loop__echo", nil)
	var ue *runtime.UnavailableError
	if !errors.As(err, &ue) || ue.Reason != events.ReasonStormHold {
		t.Errorf("call while held: %v", err)
	}
	m2.Close()
}

func TestListChangedRelists(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	c, s := stdio("dyn", bin, nil, "MCPTEST_TOOLS_CHANGE_MS=60")
	m, _ := runtime.New(adapter, fastOpts(configOf(c, s)))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dyn := func(v *runtime.View) string {
		var names []string
		for _, e := range v.Catalog.Tools {
			if strings.Contains(e.Name, "dyn_") {
				names = append(names, e.Name)
			}
		}
		return strings.Join(names, ",")
	}
	first := dyn(m.Snapshot())
	waitFor(t, m, "the dyn_ tools to change after the first listing", func(v *runtime.View) bool {
		return state(v, "dyn").State == events.StateReady && dyn(v) != first
	})
	m.Close()
	relists := 0
	for _, e := range sessionEvents(t, j, m.Session()) {
		if p, ok := e.Payload.(*events.ToolsListed); ok && p.Trigger == "list_changed" {
			relists++
		}
	}
	if relists == 0 {
		t.Error("no tools.listed with trigger list_changed")
	}
}

func TestCloseFailsPendingCalls(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	c, s := stdio("slowcall", bin, nil)
	m, _ := runtime.New(adapter, fastOpts(configOf(c, s)))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := m.CallTool(t.Context(), "mcp__slowcall__slow", map[string]any{"ms": 20000})
		errc <- err
	}()
	waitFor(t, m, "the call journaled", func(v *runtime.View) bool { return v.Seq > 0 })
	time.Sleep(200 * time.Millisecond)
	t0 := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, runtime.ErrShuttingDown) {
		t.Errorf("pending call: %v", err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("Close took %v with a call pending", d)
	}
	found := false
	for _, e := range sessionEvents(t, j, m.Session()) {
		if p, ok := e.Payload.(*events.CallFinished); ok && p.Error == "shutting down" {
			found = true
		}
	}
	if !found {
		t.Error("the failed call has no call.finished saying shutting down")
	}
}
