package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// tracedStarts returns the trace_parent and trace_state of every
// call.started in the journal at jp, in order.
func tracedStarts(t *testing.T, jp string) []string {
	t.Helper()
	var out []string
	for _, e := range journalEvents(t, jp) {
		if p, ok := e.Payload.(*events.CallStarted); ok {
			out = append(out, p.TraceParent+" "+p.TraceState)
		}
	}
	return out
}

// TestCallTraceContext: `mcpledger call` makes its call in the trace
// TRACEPARENT (with TRACESTATE) or --traceparent names, in a one-shot
// session and through a running mcpledger (the control socket): the
// journal's call.started holds it. A malformed --traceparent is refused
// before anything is called; a malformed TRACEPARENT is said once and
// the call is made in no trace.
func TestCallTraceContext(t *testing.T) {
	const (
		envParent  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		flagParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
	)
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	call := func(extra ...string) result {
		return runCLI(t, append([]string{"call", "mcp__good__echo", "--args", `{"message":"m"}`, "--journal", jp,
			"--mcp-config", cfg, "--workspace", dir}, extra...)...)
	}
	t.Setenv("TRACEPARENT", envParent)
	t.Setenv("TRACESTATE", "congo=t61rcWkgMzE")
	if r := call(); r.err != nil {
		t.Fatalf("call with TRACEPARENT: %v\n%s", r.err, r.stderr)
	}
	if r := call("--traceparent", flagParent); r.err != nil {
		t.Fatalf("call --traceparent: %v\n%s", r.err, r.stderr)
	}
	r := call("--traceparent", strings.ToUpper(flagParent))
	if r.err == nil || !strings.Contains(r.err.Error(), "--traceparent is not a W3C traceparent") {
		t.Errorf("call with a malformed --traceparent: %v", r.err)
	}
	t.Setenv("TRACEPARENT", "00-xyz")
	r = call()
	if r.err != nil || strings.Count(r.stderr, "TRACEPARENT is not a W3C traceparent") != 1 {
		t.Errorf("call with a malformed TRACEPARENT: %v\n%s", r.err, r.stderr)
	}
	want := []string{envParent + " congo=t61rcWkgMzE", flagParent + " ", " "}
	if got := tracedStarts(t, jp); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("call.started trace contexts %q, want %q", got, want)
	}

	if testing.Short() {
		return
	}
	t.Setenv("TRACEPARENT", envParent)
	holder := startRun(t, jp, cfg, dir)
	if r := runCLI(t, "call", "mcp__good__echo", "--args", `{"message":"m"}`, "--journal", jp); r.err != nil {
		t.Fatalf("call through run: %v\n%s", r.err, r.stderr)
	}
	if r := runCLI(t, "call", "mcp__good__echo", "--args", `{"message":"m"}`, "--journal", jp, "--traceparent", flagParent); r.err != nil {
		t.Fatalf("call --traceparent through run: %v\n%s", r.err, r.stderr)
	}
	stopRun(t, holder)
	want = append(want, envParent+" congo=t61rcWkgMzE", flagParent+" ")
	if got := tracedStarts(t, jp); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("call.started trace contexts through run %q, want %q", got, want)
	}
}

// TestCallDeniedTraceContext: a `mcpledger call --traceparent` the call
// policy denies (it never starts) journals the trace on its
// call.decided, so that its span joins the trace as a started call's
// does.
func TestCallDeniedTraceContext(t *testing.T) {
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	dir := t.TempDir()
	cfg := denyEchoConfig(t, dir)
	jp := filepath.Join(dir, "journal.db")
	r := runCLI(t, "call", "mcp__good__echo", "--args", `{"message":"m"}`, "--journal", jp, "--mcp-config", cfg, "--workspace", dir,
		"--traceparent", parent)
	if r.err == nil || !strings.Contains(r.err.Error()+r.stderr, "never") {
		t.Fatalf("call under policy never: %v\n%s", r.err, r.stderr)
	}
	var got []string
	for _, e := range journalEvents(t, jp) {
		switch p := e.Payload.(type) {
		case *events.CallDecided:
			got = append(got, p.Decision+" "+p.TraceParent)
		case *events.CallStarted:
			t.Errorf("a denied call started: %+v", p)
		}
	}
	if len(got) != 1 || got[0] != events.CallDeny+" "+parent {
		t.Errorf("call.decided %q; want one, deny, in trace %s", got, parent)
	}
}

// denyEchoConfig is faultConfig's healthy server "good" with its echo
// tool under the call policy never.
func denyEchoConfig(t *testing.T, dir string) string {
	t.Helper()
	cfg := faultConfig(t, dir, false)
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"good": map[string]any{
		"command": runtimetest.BuildServer(t), "toolPolicies": map[string]string{"echo": "never"}}}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}
