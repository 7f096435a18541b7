package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		`"a-1"`: true, `""`: true, `7`: true, `-7`: true, `0`: true, `123456789012345`: true,
		`1234567890123456`: false, // past float64's integers: go-sdk's to answer
		`1.5`:              false, `1e3`: false, `7-`: false, `null`: false, `{}`: false, `[1]`: false, `true`: false, ``: false,
	} {
		if got := validID([]byte(id)); got != want {
			t.Errorf("validID(%s) = %v, want %v", id, got, want)
		}
	}
}

func TestAcceptsBoth(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{[]string{"application/json, text/event-stream"}, true},
		{[]string{"application/json", "text/event-stream"}, true},
		{[]string{"text/event-stream;q=0.9, application/json;q=1"}, true},
		{[]string{"*/*"}, true},
		{[]string{"Application/JSON, Text/Event-Stream"}, true},
		{[]string{"application/*, text/*"}, true},
		{[]string{"application/json"}, false},
		{[]string{"text/event-stream"}, false},
		{nil, false},
	} {
		if got := acceptsBoth(tc.accept); got != tc.want {
			t.Errorf("acceptsBoth(%q) = %v, want %v", tc.accept, got, tc.want)
		}
	}
}

// sessionOf connects a go-sdk client with options o to a server in memory
// and returns the server's session.
func sessionOf(t *testing.T, o *mcp.ClientOptions) *mcp.ServerSession {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, o).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return ss
}

func TestFastEligible(t *testing.T) {
	plain := sessionOf(t, nil)
	sampler := sessionOf(t, &mcp.ClientOptions{CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return nil, nil
	}})
	eliciter := sessionOf(t, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return nil, nil
	}})
	req := func(h map[string]string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			r.Header.Set(k, v)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		ss   *mcp.ServerSession
		h    map[string]string
		want bool
	}{
		{"plain client", plain, nil, true},
		{"its version", plain, map[string]string{"Mcp-Protocol-Version": "2025-11-25"}, true},
		{"a version the gateway does not speak", plain, map[string]string{"Mcp-Protocol-Version": "2026-07-28"}, false},
		{"JSON with a charset", plain, map[string]string{"Content-Type": "application/json; charset=utf-8"}, true},
		{"not JSON", plain, map[string]string{"Content-Type": "text/plain"}, false},
		{"no event streams accepted", plain, map[string]string{"Accept": "application/json"}, false},
		{"a client that samples", sampler, nil, false},
		{"a client that elicits", eliciter, nil, false},
		{"no session", nil, nil, false},
	} {
		if got := fastEligible(req(tc.h), tc.ss); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestErrorStatus2026(t *testing.T) {
	for code, want := range map[int64]int{
		-32601: http.StatusNotFound, -32602: http.StatusBadRequest, -32021: http.StatusBadRequest, -32022: http.StatusBadRequest,
		-32603: http.StatusOK, -32600: http.StatusOK, 0: http.StatusOK,
	} {
		if got := errorStatus2026(code); got != want {
			t.Errorf("errorStatus2026(%d) = %d, want %d", code, got, want)
		}
	}
}

// A 2026-07-28 request's _meta is read as go-sdk reads it: the
// capabilities (roots as their own object) and the client's name; what
// go-sdk would refuse or read otherwise is left to it.
func TestSessionlessClient(t *testing.T) {
	meta := func(s string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	cl, ok := sessionlessClient(meta(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
		"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"elicitation":{}},
		"io.modelcontextprotocol/clientInfo":{"name":"c","version":"2"}}`))
	if !ok {
		t.Fatal("a complete _meta is left to go-sdk")
	}
	ip := cl.InitializeParams()
	if ip.ProtocolVersion != "2026-07-28" || ip.ClientInfo == nil || ip.ClientInfo.Name != "c" || ip.Capabilities.Elicitation == nil ||
		ip.Capabilities.RootsV2 == nil || !ip.Capabilities.Roots.ListChanged || ip.Capabilities.Sampling != nil || cl.ID() != "" {
		t.Errorf("read as %+v %+v", ip, ip.Capabilities)
	}
	if cl, ok := sessionlessClient(meta(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`)); !ok || cl.InitializeParams().ClientInfo != nil {
		t.Errorf("no clientInfo: %v %+v", ok, cl)
	}
	for _, m := range []string{
		`{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"io.modelcontextprotocol/protocolVersion":2026,"io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":null}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":3}}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":null}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":7}}`,
	} {
		if _, ok := sessionlessClient(meta(m)); ok {
			t.Errorf("%s: not left to go-sdk", m)
		}
	}
}

func TestMayDeclareParamHeaders(t *testing.T) {
	for schema, want := range map[string]bool{
		`{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}}`:      true,
		`{"type":"object","properties":{"r":{"type":"string","x\u002dmcp-header":"R"}}}`: true,
		`{"type":"object","properties":{"r":{"type":"string"}}}`:                         false,
	} {
		if got := mayDeclareParamHeaders(schema); got != want {
			t.Errorf("%s: %v, want %v", schema, got, want)
		}
	}
}

// TestPlainCall: a call may go around the upstream client's sending
// middleware only when the middleware would change nothing but the _meta
// (callMeta): a client's round, with no progress token to map and no
// answers or state to carry. A call that is no client's round is left to
// roundMiddleware, which fails it if the server asks for input.
func TestPlainCall(t *testing.T) {
	tok := any("t1")
	withCall := func(gc *gwCall) context.Context { return context.WithValue(context.Background(), gwCallKey{}, gc) }
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"no gateway call", context.Background(), false},
		{"a call without a round", withCall(&gwCall{}), false},
		{"a call with a progress token", withCall(&gwCall{token: tok}), false},
		{"a round with nothing to carry", withRound(withCall(&gwCall{}), &round{caps: &mcp.ClientCapabilities{}}), true},
		{"a round's state", withRound(withCall(&gwCall{}), &round{state: "s"}), false},
		{"a round's answers", withRound(withCall(&gwCall{}), &round{responses: mcp.InputResponseMap{"a": nil}}), false},
	} {
		if got := plainCall(tc.ctx); got != tc.want {
			t.Errorf("%s: plainCall %v, want %v", tc.name, got, tc.want)
		}
	}
}
