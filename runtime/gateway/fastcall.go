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
)

// The fast call path: a tools/call that go-sdk would answer on a stream of
// its own, answered by the gateway directly as one application/json
// response (which the Streamable HTTP transport lets a server choose for
// any request).
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
	Name      string                     `json:"name"`
	Arguments json.RawMessage            `json:"arguments"`
	Meta      map[string]json.RawMessage `json:"_meta"`
	RequestID json.RawMessage            `json:"requestId"` // notifications/cancelled
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
	if err := json.Unmarshal(body, &req); err != nil || req.JSONRPC != "2.0" || req.Params == nil {
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
	if _, ok := p.Meta["progressToken"]; ok {
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
	if err == nil && res.Content == nil {
		r2 := *res
		r2.Content = []mcp.Content{} // as go-sdk answers: not null
		res = &r2
	}
	var out bytes.Buffer
	out.WriteString(`{"jsonrpc":"2.0","id":`)
	out.Write(req.ID)
	head := out.Len()
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // as go-sdk encodes
	if err == nil {
		out.WriteString(`,"result":`)
		err = enc.Encode(res)
	}
	if err != nil {
		out.Truncate(head)
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		out.WriteString(`,"error":`)
		_ = enc.Encode(je)
	}
	// Encode ended the value with a newline: close the object after it.
	out.Truncate(out.Len() - 1)
	out.WriteString("}\n")
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Bytes())
	return true
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
