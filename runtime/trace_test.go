package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/tracectx"
)

const clientParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestCallInCallersTrace: a call made with a span in its context (a
// remote one from a traceparent, or one a caller's tracer started)
// records the caller's span on call.started and sends the server a
// traceparent in the same trace whose parent is the ledger's span of the
// call (the span export/otlp gives it); a malformed traceparent is
// ignored, and a call without a span sends no trace context.
func TestCallInCallersTrace(t *testing.T) {
	srv := runtimetest.NewMetaServer("mem")
	j, adapter := openJournal(t)
	m, err := runtime.New(adapter, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": srv.Server}, PingInterval: -1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	remote, ok := runtime.WithTraceContext(t.Context(), clientParent, "congo=t61rcWkgMzE")
	if !ok {
		t.Fatal("WithTraceContext refused a valid traceparent")
	}
	if _, ok := runtime.WithTraceContext(t.Context(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", ""); ok {
		t.Fatal("WithTraceContext took a traceparent without flags")
	}
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	local, span := tp.Tracer("agent").Start(t.Context(), "agent turn")
	defer span.End()
	malformed, _ := runtime.WithTraceContext(t.Context(), "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "")

	cases := []struct {
		name   string
		ctx    context.Context
		caller trace.SpanContext // want: the journaled parent (invalid: none)
		state  string
	}{
		{"traceparent", remote, trace.SpanContextFromContext(remote), "congo=t61rcWkgMzE"},
		{"caller's span", local, span.SpanContext(), ""},
		{"malformed", malformed, trace.SpanContext{}, ""},
		{"none", t.Context(), trace.SpanContext{}, ""},
	}
	for i, tc := range cases {
		r, err := m.CallToolWith(tc.ctx, "mcp__mem__echo", map[string]any{"message": tc.name}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var st *events.CallStarted
		for _, e := range sessionEvents(t, j, m.Session()) {
			if p, ok := e.Payload.(*events.CallStarted); ok && p.CallID == r.CallID {
				st = p
			}
		}
		wantParent, wantState := tracectx.Format(tc.caller)
		if st == nil || st.TraceParent != wantParent || st.TraceState != wantState || wantState != tc.state {
			t.Errorf("%s: call.started %+v; want trace_parent %q, trace_state %q", tc.name, st, wantParent, tc.state)
		}
		meta := srv.Metas()[i]
		if !tc.caller.IsValid() {
			if _, ok := meta[tracectx.KeyTraceparent]; ok {
				t.Errorf("%s: the server was sent a trace context: %v", tc.name, meta)
			}
			continue
		}
		p, _ := meta[tracectx.KeyTraceparent].(string)
		s, _ := meta[tracectx.KeyTracestate].(string)
		up, ok := tracectx.Parse(p, s)
		_, ledger := tracectx.CallIDs(m.Session(), r.CallID)
		if !ok || up.TraceID() != tc.caller.TraceID() || up.SpanID() != ledger || up.SpanID() == tc.caller.SpanID() ||
			up.TraceFlags() != tc.caller.TraceFlags() || s != tc.state {
			t.Errorf("%s: the server was sent %v; want trace %s with the ledger's span %s as parent, tracestate %q",
				tc.name, meta, tc.caller.TraceID(), ledger, tc.state)
		}
	}
}

// TestTracedCallRetried: a call in a caller's trace whose connection is
// lost and that is retried (a read-only tool) stays in the caller's
// trace: both tries journal it, and each try's request upstream names
// that try's span (its own call ID) as parent.
func TestTracedCallRetried(t *testing.T) {
	j, adapter := openJournal(t)
	srv := newCounting(t)
	var mu sync.Mutex
	var parents []string
	srv.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				tp, _ := p.Meta[tracectx.KeyTraceparent].(string)
				mu.Lock()
				parents = append(parents, tp)
				mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	opts := fastOpts(configOf())
	opts.InProcess = map[string]*mcp.Server{"mem": srv.srv}
	m, _ := runtime.New(adapter, opts)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, _ := runtime.WithTraceContext(t.Context(), clientParent, "")
	if _, err := m.CallTool(ctx, "mcp__mem__lookup", map[string]any{"message": "x"}); err != nil || srv.calls.Load() != 2 {
		t.Fatalf("retried call: %v (server saw %d)", err, srv.calls.Load())
	}
	var ids []string
	for _, e := range sessionEvents(t, j, m.Session()) {
		if p, ok := e.Payload.(*events.CallStarted); ok {
			ids = append(ids, p.CallID)
			if p.TraceParent != clientParent {
				t.Errorf("call.started %s: trace_parent %q, want the caller's", p.CallID, p.TraceParent)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || len(parents) != 2 {
		t.Fatalf("%d call.started and %d requests, want 2 tries", len(ids), len(parents))
	}
	caller, _ := tracectx.Parse(clientParent, "")
	for i, id := range ids {
		up, _ := tracectx.Parse(parents[i], "")
		if _, want := tracectx.CallIDs(m.Session(), id); up.TraceID() != caller.TraceID() || up.SpanID() != want {
			t.Errorf("try %d upstream traceparent %q; want the caller's trace with the span of call %s as parent", i+1, parents[i], id)
		}
	}
}

// TestDecidedCallInCallersTrace: a call decided before it starts records
// the caller's span on its call.decided, as a started call does on
// call.started, so that export/otlp puts a denied call (which has no
// call.started) in the caller's trace: denied by the policy (never), by
// the approver, or allowed by it. A call outside any trace records none.
func TestDecidedCallInCallersTrace(t *testing.T) {
	j, adapter := openJournal(t)
	srv := newCounting(t)
	opts := fastOpts(configOf())
	opts.InProcess = map[string]*mcp.Server{"mem": srv.srv}
	opts.CallPolicy = config.PolicyAsk
	opts.Approver = func(_ context.Context, req runtime.ApprovalRequest) (runtime.Approval, error) {
		return runtime.Approval{Allow: strings.Contains(string(req.Args), "allow"), By: "alice"}, nil
	}
	m, _ := runtime.New(adapter, opts)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	traced, _ := runtime.WithTraceContext(t.Context(), clientParent, "congo=t61rcWkgMzE")
	for _, tc := range []struct {
		ctx     context.Context
		message string
		parent  string
		state   string
	}{
		{traced, "deny", clientParent, "congo=t61rcWkgMzE"},
		{traced, "allow", clientParent, "congo=t61rcWkgMzE"},
		{t.Context(), "deny", "", ""},
	} {
		_, err := m.CallTool(tc.ctx, "mcp__mem__echo", map[string]any{"message": tc.message})
		if tc.message == "deny" != errors.Is(err, runtime.ErrCallDenied) {
			t.Fatalf("%s: %v", tc.message, err)
		}
		var d *events.CallDecided
		for _, e := range sessionEvents(t, j, m.Session()) {
			if p, ok := e.Payload.(*events.CallDecided); ok {
				d = p // the last one: this call's
			}
		}
		if d == nil || d.TraceParent != tc.parent || d.TraceState != tc.state {
			t.Errorf("%s in trace %q: call.decided %+v; want trace_parent %q, trace_state %q", tc.message, tc.parent, d, tc.parent, tc.state)
		}
	}
	// The policy never denies without asking: the same.
	m.Close()
	j2, adapter2 := openJournal(t)
	opts = fastOpts(configOf())
	opts.InProcess = map[string]*mcp.Server{"mem": newCounting(t).srv}
	opts.CallPolicy = config.PolicyNever
	m2, _ := runtime.New(adapter2, opts)
	if _, err := m2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if _, err := m2.CallTool(traced, "mcp__mem__echo", map[string]any{"message": "x"}); !errors.Is(err, runtime.ErrCallDenied) {
		t.Fatalf("policy never: %v", err)
	}
	var ds []*events.CallDecided
	for _, e := range sessionEvents(t, j2, m2.Session()) {
		if p, ok := e.Payload.(*events.CallDecided); ok {
			ds = append(ds, p)
		}
	}
	if len(ds) != 1 || ds[0].By != "policy" || ds[0].TraceParent != clientParent {
		for _, d := range ds {
			t.Errorf("policy never: call.decided %+v", *d)
		}
		t.Errorf("policy never: %d call.decided; want one, by policy, in trace %s", len(ds), clientParent)
	}
}
