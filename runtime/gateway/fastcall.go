package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime/internal/sdkjson"
)

// The fast call path: a tools/call that go-sdk would answer on a stream of
// its own, answered by the gateway directly as one application/json
// response (which the Streamable HTTP transport lets a server choose for
// any request).
//
// The request is decoded as go-sdk decodes it (sdkjson: keys matched
// exactly), so that the fast path reads the same request go-sdk would.
//
// Why: a call through go-sdk's Streamable HTTP server costs the gateway
// four decodings of the request (each allocating and clearing a 32 KiB
// buffer, go-sdk-notes.md), a goroutine hand-off per hop and an SSE
// stream; at c=16 that is most of the gateway's CPU (BENCHMARKS.md,
// "Gateway"). Here the request is decoded once and the answer written
// once, and the call itself is the same: g.call, with the same checks,
// journal records, guard and catalog as go-sdk's path.
//
// A request takes the fast path only when nothing the gateway does could
// differ from go-sdk's answer, that is, when nothing could need the
// request's own stream: the session is one go-sdk holds and has
// initialized; its client declared neither sampling nor elicitation (so
// no upstream request, and no approval by elicitation, can be forwarded
// to it during the call: those are refused for such clients on either
// path); the request asks for no progress; and its headers and body are
// ones go-sdk would accept. Anything else, including every malformed
// request, goes to go-sdk, so errors keep go-sdk's shape.
//
// Cancellation: a client's notifications/cancelled naming a fast call in
// flight cancels it (fastCalls); any other reaches go-sdk.

// fastRequest is the body of a tools/call (or of a cancellation),
// decoded once.
type fastRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  *fastParams     `json:"params"`
}

// fastParams are a tools/call's params, or notifications/cancelled's.
type fastParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      sdkjson.Object  `json:"_meta"`
	RequestID json.RawMessage `json:"requestId"` // notifications/cancelled
	// A retry after input_required (2026-07-28): go-sdk's path resumes it.
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
}

// fastCalls are the fast calls in flight, for notifications/cancelled.
type fastCalls struct {
	mu    sync.Mutex
	calls map[fastKey]context.CancelFunc
}

type fastKey struct{ session, id string }

func (f *fastCalls) add(k fastKey, cancel context.CancelFunc) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.calls[k]; dup {
		return false // a duplicate request ID: go-sdk's to answer
	}
	if f.calls == nil {
		f.calls = map[fastKey]context.CancelFunc{}
	}
	f.calls[k] = cancel
	return true
}

func (f *fastCalls) remove(k fastKey) {
	f.mu.Lock()
	delete(f.calls, k)
	f.mu.Unlock()
}

// cancel cancels the fast call k, if in flight.
func (f *fastCalls) cancel(k fastKey) bool {
	f.mu.Lock()
	c, ok := f.calls[k]
	f.mu.Unlock()
	if ok {
		c()
	}
	return ok
}

// fastEligible reports whether r's headers are those of a request go-sdk
// would serve on session ss, and ss's client one the fast path may answer.
func fastEligible(r *http.Request, ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "application/json" {
		return false
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		return false
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && (v >= protocolVersion2026 || !slices.Contains(gatewayProtocolVersions, v)) {
		return false
	}
	// go-sdk serves requests once initialize is answered (it keeps the
	// params then), not waiting for notifications/initialized: so here.
	ip := ss.InitializeParams()
	if ip == nil {
		return false
	}
	caps := ip.Capabilities
	return caps == nil || caps.Sampling == nil && caps.Elicitation == nil
}

// acceptsBoth reports whether Accept lists application/json and
// text/event-stream (or wildcards covering them), as go-sdk requires (the
// same rule as its streamableAccepts).
func acceptsBoth(values []string) bool {
	var js, sse bool
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				js = true
			case "text/event-stream", "text/*":
				sse = true
			case "*/*":
				js, sse = true, true
			}
		}
	}
	return js && sse
}

// serveFast answers body, a POST of session ss, if it is a tools/call the
// fast path may answer or a cancellation of one; it reports false, having
// written nothing, otherwise.
func (g *Gateway) serveFast(w http.ResponseWriter, r *http.Request, ss *mcp.ServerSession, body []byte) bool {
	var req fastRequest
	if err := sdkjson.Unmarshal(body, &req); err != nil || req.JSONRPC != "2.0" || req.Params == nil {
		return false
	}
	p := req.Params
	switch {
	case req.Method == "notifications/cancelled" && len(req.ID) == 0:
		if !g.fast.cancel(fastKey{ss.ID(), string(p.RequestID)}) {
			return false
		}
		w.WriteHeader(http.StatusAccepted)
		return true
	case req.Method != "tools/call" || !validID(req.ID) || p.Name == "":
		return false
	}
	if _, ok := p.Meta["progressToken"]; ok || len(p.InputResponses) > 0 || len(p.RequestState) > 0 {
		return false
	}
	k := fastKey{ss.ID(), string(req.ID)}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	if !g.fast.add(k, cancel) {
		return false
	}
	defer g.fast.remove(k)

	res := g.notExposed(ctx, p.Name)
	var err error
	if res == nil {
		tctx := traced(ctx, metaString(p.Meta, keyTraceparent), metaString(p.Meta, keyTracestate), r.Header)
		res, err = g.call(tctx, ss, p.Name, p.Arguments, nil, nil)
	}
	writeAnswer(w, req.ID, res, "", err)
	return true
}

// writeAnswer writes the JSON-RPC response of request id, the call's
// result res (with resultType rt, if not "": a 2026-07-28 request) or its
// error err, as go-sdk would encode them, as one application/json
// response: of status 200, or for a 2026-07-28 request's error the status
// SEP-2575 gives its code (go-sdk's extractErrorStatus).
func writeAnswer(w http.ResponseWriter, id json.RawMessage, res *mcp.CallToolResult, rt string, err error) {
	if err == nil && res.Content == nil && rt != resultInputRequired {
		r2 := *res
		r2.Content = []mcp.Content{} // as go-sdk answers: not null
		res = &r2
	}
	var out bytes.Buffer
	out.WriteString(`{"jsonrpc":"2.0","id":`)
	out.Write(id)
	head := out.Len()
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // as go-sdk encodes
	if err == nil {
		out.WriteString(`,"result":`)
		err = enc.Encode(res)
		if err == nil && rt != "" {
			// go-sdk sets a 2026-07-28 result's resultType in a field of
			// its own (unexported): added here, in the object's last place.
			out.Truncate(out.Len() - 2) // "}\n"
			if out.Bytes()[out.Len()-1] != '{' {
				out.WriteByte(',')
			}
			out.WriteString(`"resultType":"` + rt + "\"}\n")
		}
	}
	status := http.StatusOK
	if err != nil {
		out.Truncate(head)
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		out.WriteString(`,"error":`)
		_ = enc.Encode(je)
		if rt != "" {
			status = errorStatus2026(je.Code)
		}
	}
	// Encode ended the value with a newline: close the object after it.
	out.Truncate(out.Len() - 1)
	out.WriteString("}\n")
	h := w.Header()
	if status == http.StatusOK {
		h.Set("Cache-Control", "no-cache, no-transform")
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out.Bytes())
}

// errorStatus2026 is the HTTP status of a 2026-07-28 response carrying a
// JSON-RPC error of code (SEP-2575): 404 for a method not found, 400 for
// invalid params, an unsupported protocol version or a missing client
// capability, 200 otherwise.
func errorStatus2026(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// validID reports whether id, valid JSON, is a JSON-RPC request ID the
// fast path answers: a string, or an integer without fraction or exponent
// (go-sdk's to answer otherwise).
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		return true
	}
	for i, c := range id {
		if !(c >= '0' && c <= '9' || c == '-' && i == 0) {
			return false
		}
	}
	return len(id) < 16 // within float64's integers, as go-sdk reads IDs
}
