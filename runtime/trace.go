package runtime

import (
	"context"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpledger/mcpledger/tracectx"
)

// Trace context: a tool call made in a caller's trace joins it.
//
// CallToolWith takes the caller's span from ctx, as OpenTelemetry carries
// it (trace.SpanContextFromContext: a span the caller's tracer started, or
// a remote one [WithTraceContext] put there from a traceparent). The call
// records it on its call.started and call.decided (TraceParent,
// TraceState: the caller's span, which export/otlp makes the parent of
// the call's span, a denied call's too),
// and sends the upstream server, in the request's params._meta, the same
// trace with the ledger's span of the call as parent
// (tracectx.Upstream), so that a server that traces joins the trace under
// the ledger's span. A call without a valid span in ctx carries none.

// WithTraceContext returns ctx carrying the W3C trace context traceparent
// and tracestate describe, as a remote span context, and true; or ctx
// unchanged and false when traceparent is empty or malformed (a malformed
// tracestate is dropped, the traceparent kept). The gateway uses it for a
// request's params._meta or HTTP headers, `mcpledger call` for
// TRACEPARENT.
func WithTraceContext(ctx context.Context, traceparent, tracestate string) (context.Context, bool) {
	sc, ok := tracectx.Parse(traceparent, tracestate)
	if !ok {
		return ctx, false
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc), true
}

// callerSpan is the span of ctx a call is made in, or an invalid one.
func callerSpan(ctx context.Context) trace.SpanContext {
	return trace.SpanContextFromContext(ctx)
}

// traceMeta is the params._meta of call id's request upstream: the
// caller's trace with the ledger's span of the call as parent, or nil
// when the call has no caller's span.
func traceMeta(caller trace.SpanContext, session uuid.UUID, id string) mcp.Meta {
	parent, state := tracectx.Upstream(caller, session, id)
	if parent == "" {
		return nil
	}
	meta := mcp.Meta{tracectx.KeyTraceparent: parent}
	if state != "" {
		meta[tracectx.KeyTracestate] = state
	}
	return meta
}
