package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP 2026-07-28 (stateless) beside 2025-11-25 (sessions) on one endpoint.
//
// go-sdk v1.8.0 serves 2026-07-28 over HTTP only from a stateless
// StreamableHTTPHandler, and the sessions of 2025-11-25 and older only
// from a stateful one (StreamableServerTransport.SupportsProtocolVersion).
// The gateway holds one of each, over the same mcp.Server, and routes each
// request (statelessRequest): a request of a session (Mcp-Session-Id) goes
// to the stateful handler as before; one without, that declares 2026-07-28
// or later (the MCP-Protocol-Version header, or the protocol version in
// its _meta) or is a server/discover, goes to the stateless one; anything
// else (an initialize) opens a session as before. The stateless handler
// validates the request's headers against its body (MCP-Protocol-Version,
// Mcp-Method, Mcp-Name, Mcp-Param-*) as go-sdk does for its own servers.

// protocolVersion2026 is the first MCP version without sessions.
const protocolVersion2026 = "2026-07-28"

// protocolVersionHeader carries a request's MCP version over HTTP.
const protocolVersionHeader = "Mcp-Protocol-Version"

// metaProtocolVersion is the _meta key of a 2026-07-28 request's version.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// statelessHeader reports whether r, a request without a session ID,
// declares a sessionless protocol version in its header.
func statelessHeader(r *http.Request) bool {
	return r.Header.Get(protocolVersionHeader) >= protocolVersion2026
}

// peekRequest is what statelessBody reads of a request body.
type peekRequest struct {
	Method string `json:"method"`
	Params struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// statelessBody reports whether body, a POST without a session ID, is a
// sessionless request: a server/discover, or a request whose _meta names a
// protocol version of 2026-07-28 or later. A batch or malformed body is
// not (the stateful handler answers it as before).
func statelessBody(body []byte) bool {
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	var p peekRequest
	if json.Unmarshal(body, &p) != nil {
		return false
	}
	if p.Method == "server/discover" {
		return true
	}
	var v string
	if raw, ok := p.Params.Meta[metaProtocolVersion]; !ok || json.Unmarshal(raw, &v) != nil {
		return false
	}
	return v >= protocolVersion2026
}

// routeSessionless decides whether r, a request without a session ID,
// goes to the stateless handler. For a POST whose header does not say, it
// reads the body (within the body limit) and puts back a body that reads
// the same bytes and error.
func routeSessionless(r *http.Request, body io.Reader, limit int64) bool {
	if statelessHeader(r) {
		return true
	}
	if r.Method != http.MethodPost || !strings.HasPrefix(strings.TrimSpace(strings.ToLower(r.Header.Get("Content-Type"))), "application/json") {
		return false
	}
	var buf []byte
	var err error
	if r.ContentLength >= 0 {
		buf, err = readBody(body, r.ContentLength)
	} else {
		buf, err = io.ReadAll(io.LimitReader(body, limit+1))
		if err == nil && int64(len(buf)) > limit {
			err = &http.MaxBytesError{Limit: limit}
		}
	}
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf), errReader{err}))
	return err == nil && statelessBody(buf)
}

// newStatelessHandler returns go-sdk's stateless Streamable HTTP handler
// of g's server: each request is served by a session of its own, closed
// when it is answered. A client that goes away (the request's connection
// closes) cancels its request, as notifications/cancelled does in a
// session: the call is journaled as cancelled and the server told.
func (g *Gateway) newStatelessHandler(maxBody int64) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: g.log, MaxRequestBodyBytes: maxBody, PropagateRequestCancellation: true})
}

// methodHeader names a 2026-07-28 request's method (go-sdk checks it
// against the body).
const methodHeader = "Mcp-Method"

// isListen reports whether r, a sessionless request, opens a
// subscriptions/listen stream.
func isListen(r *http.Request) bool {
	return r.Header.Get(methodHeader) == "subscriptions/listen"
}

// listenCap bounds the subscriptions/listen streams open at once: they
// hold no share of the budget (a listening client is idle, as one with a
// GET stream is), so they are capped as sessions are.
type listenCap struct {
	mu   sync.Mutex
	max  int
	open int
}

// take reserves a stream, or reports false at the cap.
func (c *listenCap) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open >= c.max {
		return false
	}
	c.open++
	return true
}

func (c *listenCap) give() {
	c.mu.Lock()
	c.open--
	c.mu.Unlock()
}
