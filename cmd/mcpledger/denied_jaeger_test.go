package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
)

// TestServeDeniedCallToJaeger: a call the client makes in a span of its
// own (traceparent in _meta) that the call policy denies, so that it
// never starts, appears in the client's trace too, as a child of its
// span, with the denial's error status.
func TestServeDeniedCallToJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Jaeger")
	}
	jg := startJaeger(t)
	dir := t.TempDir()
	cfg := denyEchoConfig(t, dir)
	jp := filepath.Join(dir, "journal.db")
	cs, stop := serveExporting(t, "--mcp-config", cfg, "--workspace", dir, "--journal", jp, "--otlp-endpoint", jg.otlp)
	agent := agentSpan(t, jg, func(traceparent string) {
		p := &mcp.CallToolParams{Name: "mcp__good__echo", Arguments: map[string]any{"message": "denied"},
			Meta: mcp.Meta{"traceparent": traceparent}}
		if r, err := cs.CallTool(t.Context(), p); err == nil && !r.IsError {
			t.Fatalf("a call under policy never was answered %+v", r)
		}
	})
	cs.Close()
	spans := callSpans(t, jp)
	if len(spans) != 1 {
		t.Fatalf("%d call spans in the journal, want the denied call's", len(spans))
	}
	for id, s := range spans {
		if s.TraceID != agent.TraceID() || s.Status != codes.Error || !strings.HasPrefix(s.StatusMsg, "denied by policy") {
			t.Fatalf("the denied call's span: trace %s, status %v %q; want the agent's trace %s, denied by policy",
				s.TraceID, s.Status, s.StatusMsg, agent.TraceID())
		}
		checkJoined(t, jg, agent, id)
	}
	stop()
}
