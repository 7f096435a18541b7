package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime/internal/sdkjson"
)

// The fast call path of a 2026-07-28 client: a sessionless tools/call
// answered by the gateway as one application/json response, as
// fastcall.go does for a session's.
//
// Why: go-sdk serves each sessionless request with a session of its own
// (stateless.go), connected, used once and closed, and decodes the
// request some five times on the way (each decoding allocating and
// clearing a 32 KiB buffer); a 2026-07-28 call cost the gateway four to
// five times the CPU of a session's fast call (BENCHMARKS.md, "MCP
// 2025-11-25 and 2026-07-28"). Here the request is decoded once and the
// call is the same: g.call, with the same checks, journal records, guard,
// approval (an input_required result) and catalog as go-sdk's path.
//
// A request takes the fast path only when go-sdk would serve it and
// nothing could differ from go-sdk's answer: the headers go-sdk checks
// are present and agree with the body (Mcp-Protocol-Version 2026-07-28,
// the version in _meta too; Mcp-Method tools/call; Mcp-Name the tool's
// name), the tool declares no x-mcp-header parameter (go-sdk checks their
// Mcp-Param-* headers), the _meta declares the client's capabilities as an
// object (and its clientInfo, if any, as one), and the request is a plain
// first call: no progress token, no log level (both need the request's
// own event stream), no inputResponses or requestState (a retry after
// input_required: go-sdk's path unseals and resumes it). Anything else,
// including every malformed request, goes to go-sdk, so errors keep
// go-sdk's shape.
//
// Cancellation: a 2026-07-28 client cancels a request by closing it; the
// call runs in the request's context, as go-sdk's does
// (PropagateRequestCancellation), so the call is journaled as cancelled
// and the server told.

// resultComplete and resultInputRequired are a 2026-07-28 result's
// resultType values.
const (
	resultComplete      = "complete"
	resultInputRequired = "input_required"
)

// Headers a 2026-07-28 request carries (go-sdk checks them).
const nameHeader = "Mcp-Name"

// fast2026Eligible reports whether r's headers are those of a 2026-07-28
// tools/call go-sdk's stateless handler would serve.
func fast2026Eligible(r *http.Request) bool {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "application/json" || !acceptsBoth(r.Header.Values("Accept")) {
		return false
	}
	return r.Header.Get(protocolVersionHeader) == protocolVersion2026 &&
		r.Header.Get(methodHeader) == "tools/call" && r.Header.Get(nameHeader) != ""
}

// capabilities2026 is a 2026-07-28 request's client capabilities: go-sdk's
// ClientCapabilities, with roots as its own object (go-sdk reads them
// the same way).
type capabilities2026 struct {
	mcp.ClientCapabilities
	Roots *mcp.RootCapabilities `json:"roots,omitempty"`
}

// sessionlessClient returns the client a 2026-07-28 request's _meta
// declares, as go-sdk reads it (validateRequestMeta), and false when the
// fast path should leave the request to go-sdk: a version other than
// 2026-07-28, capabilities missing or not an object, clientInfo present
// and not an object, or what either holds not decoding.
func sessionlessClient(meta map[string]json.RawMessage) (sessionless, bool) {
	var version string
	if sdkjson.Unmarshal(meta[metaProtocolVersion], &version) != nil || version != protocolVersion2026 {
		return sessionless{}, false
	}
	raw := bytes.TrimSpace(meta[metaClientCapabilities])
	if len(raw) == 0 || raw[0] != '{' {
		return sessionless{}, false
	}
	var caps capabilities2026
	if sdkjson.Unmarshal(raw, &caps) != nil {
		return sessionless{}, false
	}
	ip := &mcp.InitializeParams{ProtocolVersion: version, Capabilities: &caps.ClientCapabilities}
	if caps.Roots != nil {
		ip.Capabilities.RootsV2 = caps.Roots
		ip.Capabilities.Roots = *caps.Roots
	}
	if raw, ok := meta[metaClientInfo]; ok {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' {
			return sessionless{}, false
		}
		ip.ClientInfo = new(mcp.Implementation)
		if sdkjson.Unmarshal(raw, ip.ClientInfo) != nil {
			return sessionless{}, false
		}
	}
	return sessionless{ip: ip}, true
}

// _meta keys of a 2026-07-28 request (go-sdk's MetaKey* constants).
const (
	metaClientCapabilities = mcp.MetaKeyClientCapabilities
	metaClientInfo         = mcp.MetaKeyClientInfo
)

// serveFast2026 answers body, a sessionless POST whose headers
// fast2026Eligible accepted, if it is a tools/call the fast path may
// answer; it reports false, having written nothing, otherwise.
func (g *Gateway) serveFast2026(w http.ResponseWriter, r *http.Request, body []byte) bool {
	var req fastRequest
	if err := sdkjson.Unmarshal(body, &req); err != nil || req.JSONRPC != "2.0" || req.Params == nil ||
		req.Method != "tools/call" || !validID(req.ID) {
		return false
	}
	p := req.Params
	if p.Name == "" || r.Header.Get(nameHeader) != p.Name || len(p.InputResponses) > 0 || len(p.RequestState) > 0 {
		return false
	}
	if _, ok := p.Meta["progressToken"]; ok {
		return false
	}
	if _, ok := p.Meta[metaLogLevel]; ok {
		return false
	}
	cl, ok := sessionlessClient(p.Meta)
	if !ok {
		return false
	}
	g.mu.Lock()
	t, exposed := g.tools[p.Name]
	g.mu.Unlock()
	if !exposed || t.paramHeaders {
		return false // go-sdk's to answer: its unknown-tool error, or its header checks
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	res := g.notExposed(ctx, p.Name)
	var err error
	if res == nil {
		tctx := traced(ctx, metaString(p.Meta, keyTraceparent), metaString(p.Meta, keyTracestate), r.Header)
		res, err = g.call(tctx, cl, p.Name, p.Arguments, nil, nil)
	}
	rt := resultComplete
	if err == nil && res.InputRequests != nil {
		rt = resultInputRequired
		if len(res.Content) > 0 || res.StructuredContent != nil { // as go-sdk refuses it (hasContent)
			res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
		}
	}
	if err == nil {
		res = g.withServerInfo(res)
	}
	writeAnswer(w, req.ID, res, rt, err)
	return true
}

// withServerInfo returns res with the gateway's name and version in its
// _meta, unless it names a server already, as go-sdk annotates every
// 2026-07-28 result (SEP-2575).
func (g *Gateway) withServerInfo(res *mcp.CallToolResult) *mcp.CallToolResult {
	if _, ok := res.Meta[mcp.MetaKeyServerInfo]; ok {
		return res
	}
	r2 := *res
	r2.Meta = make(mcp.Meta, len(res.Meta)+1)
	for k, v := range res.Meta {
		r2.Meta[k] = v
	}
	r2.Meta[mcp.MetaKeyServerInfo] = g.impl
	return &r2
}
