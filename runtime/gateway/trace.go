package gateway

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime"
)

// A client's trace context: the traceparent and tracestate of its
// tools/call, which the runtime journals on call.started and passes on to
// the server (runtime.CallToolWith), so that the ledger's spans join the
// agent's trace. They are read from the request's params._meta, where the
// MCP semantic conventions carry them, else from its HTTP headers (W3C
// Trace Context over HTTP); a malformed traceparent is ignored.

// Keys of the trace context, in _meta and as HTTP headers.
const (
	keyTraceparent = "traceparent"
	keyTracestate  = "tracestate"
)

// traced returns ctx carrying the trace context of a request whose
// _meta holds metaParent and metaState, and whose HTTP headers are h (nil
// when not over HTTP); ctx itself when neither holds a valid traceparent.
func traced(ctx context.Context, metaParent, metaState string, h http.Header) context.Context {
	if c, ok := runtime.WithTraceContext(ctx, metaParent, metaState); ok {
		return c
	}
	if h != nil {
		if c, ok := runtime.WithTraceContext(ctx, h.Get(keyTraceparent), h.Get(keyTracestate)); ok {
			return c
		}
	}
	return ctx
}

// tracedRequest is traced for a tools/call go-sdk's server hands the
// gateway (sessions, stateless 2026-07-28, stdio).
func tracedRequest(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	var h http.Header
	if req.Extra != nil {
		h = req.Extra.Header
	}
	parent, _ := req.Params.Meta[keyTraceparent].(string)
	state, _ := req.Params.Meta[keyTracestate].(string)
	return traced(ctx, parent, state, h)
}

// metaString is the string value of key in a fast request's _meta, or
// "" when absent or not a string.
func metaString(meta map[string]json.RawMessage, key string) string {
	raw, ok := meta[key]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
