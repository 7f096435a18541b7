// Package tracectx is the trace identity of the ledger's spans, shared by
// the runtime (which tells an upstream server its parent span) and
// export/otlp (which exports that span), so both derive it in one place:
//
//   - the IDs derived from the journal: a tool call's trace and span IDs
//     from its session and call ID ([CallIDs]), a span that begins with an
//     event from that event's ID ([EventIDs]); the same on every export;
//   - the W3C trace context (https://www.w3.org/TR/trace-context/) a call
//     carries in, as traceparent and tracestate strings (from a request's
//     params._meta, an HTTP header, TRACEPARENT in the environment):
//     [Parse] validates it and [Format] writes it back in version 00
//     form, so what is journaled is never longer than the format allows;
//   - the context a call carries out, to the upstream server: [Upstream],
//     the caller's trace with the ledger's span of the call as parent.
//
// It is pure: no I/O, no clock, no state.
package tracectx

import (
	"context"
	"crypto/sha256"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context keys, in a request's params._meta (as the MCP
// semantic conventions carry them) and as HTTP headers.
const (
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
)

// CallIDs are the trace and span IDs the journal gives tool call id of
// session: the span ID of its span always, the trace ID when the call
// carries no trace context of its own.
func CallIDs(session uuid.UUID, id string) (trace.TraceID, trace.SpanID) {
	return idsOf("call", session[:], []byte(id))
}

// EventIDs are the trace and span IDs of a span that begins with the event
// of ID id.
func EventIDs(id uuid.UUID) (trace.TraceID, trace.SpanID) {
	return idsOf("event", id[:])
}

// idsOf hashes a domain and parts (each after a 0 byte): the first 16
// bytes of the SHA-256 are the trace ID, the next 8 the span ID.
func idsOf(what string, parts ...[]byte) (trace.TraceID, trace.SpanID) {
	h := sha256.New()
	h.Write([]byte("mcpledger/" + what))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write(p)
	}
	sum := h.Sum(nil)
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	return tid, sid
}

// carrier is a traceparent and tracestate pair as the propagator reads
// and writes them.
type carrier struct{ parent, state string }

func (c *carrier) Get(k string) string {
	switch k {
	case KeyTraceparent:
		return c.parent
	case KeyTracestate:
		return c.state
	}
	return ""
}

func (c *carrier) Set(k, v string) {
	switch k {
	case KeyTraceparent:
		c.parent = v
	case KeyTracestate:
		c.state = v
	}
}

func (c *carrier) Keys() []string { return []string{KeyTraceparent, KeyTracestate} }

// Parse returns the remote span context traceparent and tracestate
// describe, as OpenTelemetry's W3C propagator reads them: ok is false
// (and the context empty) for a traceparent that is malformed (wrong
// lengths, upper-case or non-hex digits, an all-zero trace or span ID,
// version ff, extra fields in version 00). A malformed tracestate is
// dropped and the traceparent kept, as the W3C specification says; one
// longer than MaxTracestate is cut to it.
func Parse(traceparent, tracestate string) (sc trace.SpanContext, ok bool) {
	if traceparent == "" {
		return trace.SpanContext{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), &carrier{traceparent, tracestate})
	sc = trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.SpanContext{}, false
	}
	return sc.WithTraceState(bound(sc.TraceState())), true
}

// MaxTracestate is the length of the tracestate kept (the W3C
// specification asks a participant to pass on at least 512 characters).
const MaxTracestate = 512

// bound cuts ts to MaxTracestate characters as the W3C specification
// lets a participant: entries over 128 characters first, then entries
// from the end.
func bound(ts trace.TraceState) trace.TraceState {
	if len(ts.String()) <= MaxTracestate {
		return ts
	}
	var keys, long []string
	ts.Walk(func(k, v string) bool {
		keys = append(keys, k)
		if len(k)+1+len(v) > 128 {
			long = append(long, k)
		}
		return true
	})
	for _, k := range long {
		ts = ts.Delete(k)
		if len(ts.String()) <= MaxTracestate {
			return ts
		}
	}
	for i := len(keys) - 1; len(ts.String()) > MaxTracestate; i-- {
		ts = ts.Delete(keys[i])
	}
	return ts
}

// Format returns sc as a version 00 traceparent (55 characters) and its
// tracestate (cut to MaxTracestate as Parse cuts it), or "" and "" when
// sc is not valid. Only the sampled and random flags are kept.
func Format(sc trace.SpanContext) (traceparent, tracestate string) {
	if !sc.IsValid() {
		return "", "" // no allocation for the calls made in no trace
	}
	var c carrier
	sc = sc.WithTraceState(bound(sc.TraceState())) // a span of the caller's own tracer was not Parsed
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), &c)
	return c.parent, c.state
}

// Upstream returns the trace context the ledger sends upstream with tool
// call id of session, made in caller's trace: the same trace ID, flags and
// tracestate, and as parent the ledger's span of the call (the span ID of
// [CallIDs]), so that the server's spans are its children. It returns ""
// and "" when caller is not valid.
func Upstream(caller trace.SpanContext, session uuid.UUID, id string) (traceparent, tracestate string) {
	if !caller.IsValid() {
		return "", ""
	}
	_, sid := CallIDs(session, id)
	return Format(caller.WithSpanID(sid))
}
