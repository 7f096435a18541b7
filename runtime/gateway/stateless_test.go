package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/gateway"
)

// connect2026 connects a go-sdk client on its default protocol
// (2026-07-28: no session, every request carrying its _meta) over HTTP.
func connect2026(t *testing.T, url, name string, o *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "3.0"}, o).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// inputServer is a 2026-07-28 server whose tool "greet" needs the
// client's name: it answers with an input_required result (an
// elicitation) and completes when retried with the answer and its state.
func inputServer() (*mcp.Server, *atomic.Int32) {
	var rounds atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets the user by the name it asks for"},
		func(_ context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			rounds.Add(1)
			if r, ok := req.Params.InputResponses["who"].(*mcp.ElicitResult); ok && req.Params.RequestState == "asked-for-name" {
				return textResult(fmt.Sprintf("hello %v", r.Content["name"])), nil, nil
			}
			return &mcp.CallToolResult{RequestState: "asked-for-name", InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{
				Message: "your name?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}}}, nil, nil
		})
	return srv, &rounds
}

func nameHandler(name string, asked *atomic.Int32) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		if req.Params.Message != "your name?" {
			return nil, fmt.Errorf("asked %q", req.Params.Message)
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}, nil
	}
}

// TestGatewayHTTPStatelessBesideSessions: on one endpoint, a client of
// 2026-07-28 (sessionless) and a 2025-11-25 session each list and call
// tools; the upstream's input_required result reaches the 2026 client as
// such (its retry goes up) and the 2025 one as an elicitation request; the
// journal records each caller with, for the 2026 one, the version and
// capabilities its requests declared.
func TestGatewayHTTPStatelessBesideSessions(t *testing.T) {
	up, _ := upstream("up")
	asker, rounds := inputServer()
	f := startGateway(t, nil, func(o *runtime.Options) { o.ProtocolVersion = "2026-07-28" },
		map[string]*mcp.Server{"up": up, "asker": asker})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	endpoint := srv.URL + gateway.Path

	var asked26, asked25 atomic.Int32
	new := connect2026(t, endpoint, "new-client", &mcp.ClientOptions{ElicitationHandler: nameHandler("ann", &asked26)})
	old := connectHTTP(t, endpoint, "", "old-client", &mcp.ClientOptions{ElicitationHandler: nameHandler("bob", &asked25)})
	if v := new.InitializeResult().ProtocolVersion; v != "2026-07-28" || new.ID() != "" {
		t.Fatalf("2026 client: version %q, session %q", v, new.ID())
	}
	if v := old.InitializeResult().ProtocolVersion; v != "2025-11-25" || old.ID() == "" {
		t.Fatalf("2025 client: version %q, session %q", v, old.ID())
	}
	for _, cs := range []*mcp.ClientSession{new, old} {
		if tools := listToolNames(t, cs); tools["mcp__up__echo"] == nil || tools["mcp__asker__greet"] == nil {
			t.Fatalf("tools %v", tools)
		}
		if got := firstTextOf(call(t, cs, "mcp__up__echo", map[string]any{"message": "hi"})); got != "hi" {
			t.Errorf("echo = %q", got)
		}
	}
	if got := firstTextOf(call(t, new, "mcp__asker__greet", nil)); got != "hello ann" {
		t.Errorf("2026 client: greet = %q", got)
	}
	if got := firstTextOf(call(t, old, "mcp__asker__greet", nil)); got != "hello bob" {
		t.Errorf("2025 client: greet = %q", got)
	}
	if asked26.Load() != 1 || asked25.Load() != 1 || rounds.Load() != 4 {
		t.Errorf("asked 2026 %d, 2025 %d times; the server saw %d rounds, want 1, 1, 4", asked26.Load(), asked25.Load(), rounds.Load())
	}

	var callers []string
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.CallStarted); ok {
			callers = append(callers, p.Name+" "+p.Caller)
		}
	}
	want26 := "new-client/3.0 mcp=2026-07-28 caps=elicitation,roots" // go-sdk declares roots by default
	want25 := "old-client/2.0 session=" + old.ID()
	want := []string{"mcp__up__echo " + want26, "mcp__up__echo " + want25,
		"mcp__asker__greet " + want26, "mcp__asker__greet " + want26, // a round each
		"mcp__asker__greet " + want25, "mcp__asker__greet " + want25}
	if !slices.Equal(callers, want) {
		t.Errorf("call.started callers\n%q\nwant\n%q", callers, want)
	}
}

// TestGatewayForwardsClientCapabilities: a 2026-07-28 server sees, on each
// call through the gateway, the capabilities the calling client declared
// (of those the gateway forwards), not the gateway's own.
func TestGatewayForwardsClientCapabilities(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "caps", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "caps"}, func(_ context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		c := req.ClientCapabilities()
		return textResult(fmt.Sprintf("sampling=%v elicitation=%v", c != nil && c.Sampling != nil, c != nil && c.Elicitation != nil)), nil, nil
	})
	f := startGateway(t, nil, func(o *runtime.Options) { o.ProtocolVersion = "2026-07-28" }, map[string]*mcp.Server{"caps": srv})
	hs := httptestServer(t, f, f.gw.HTTPHandler(nil))
	bare := connect2026(t, hs.URL+gateway.Path, "bare", &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	if got := firstTextOf(call(t, bare, "mcp__caps__caps", nil)); got != "sampling=false elicitation=false" {
		t.Errorf("bare client: server saw %q", got)
	}
	full := connect2026(t, hs.URL+gateway.Path, "full", &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) { return nil, nil },
		ElicitationHandler:   func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, nil }})
	if got := firstTextOf(call(t, full, "mcp__caps__caps", nil)); got != "sampling=true elicitation=true" {
		t.Errorf("full client: server saw %q", got)
	}
}

// TestGatewayAskPolicyInputRequired: under call policy ask, a client of
// 2026-07-28 is asked for approval by an input_required result; its retry
// carries the answer, bound to the call (a state for other arguments is
// refused). The journal has the ask (a denial saying so) and the answer.
func TestGatewayAskPolicyInputRequired(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, func(o *runtime.Options) { o.CallPolicy = config.PolicyAsk }, map[string]*mcp.Server{"up": up})
	hs := httptestServer(t, f, f.gw.HTTPHandler(nil))
	var asked atomic.Int32
	cs := connect2026(t, hs.URL+gateway.Path, "approver", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": strings.Contains(req.Params.Message, `"yes"`)}}, nil
	}})
	if got := firstTextOf(call(t, cs, "mcp__up__echo", map[string]any{"message": "yes"})); got != "yes" {
		t.Errorf("approved call = %q", got)
	}
	res := call(t, cs, "mcp__up__echo", map[string]any{"message": "no"})
	if !res.IsError || !strings.Contains(firstTextOf(res), "did not approve") {
		t.Errorf("refused call = %q", firstTextOf(res))
	}
	if asked.Load() != 2 {
		t.Errorf("asked %d times, want 2", asked.Load())
	}

	// A requestState sealed for one call does not approve another.
	raw := connect2026(t, hs.URL+gateway.Path, "raw", &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, nil }})
	first := call(t, raw, "mcp__up__echo", map[string]any{"message": "a"})
	if !first.NeedsInput() || first.RequestState == "" || first.InputRequests["io.mcpledger/approval"] == nil {
		t.Fatalf("first round: %+v", first)
	}
	yes := mcp.InputResponseMap{"io.mcpledger/approval": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
	// An answer nobody asked for (no state of the gateway's) approves
	// nothing: the client is asked.
	unasked, err := raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp__up__echo", Arguments: map[string]any{"message": "a"}, InputResponses: yes})
	if err != nil || !unasked.NeedsInput() || unasked.InputRequests["io.mcpledger/approval"] == nil {
		t.Errorf("unsolicited approval: %v %+v", err, unasked)
	}
	_, err = raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp__up__echo", Arguments: map[string]any{"message": "other"},
		InputResponses: yes, RequestState: first.RequestState})
	if err == nil || !strings.Contains(err.Error(), "belongs to another call") {
		t.Errorf("state for other arguments: %v", err)
	}
	_, err = raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp__up__echo", Arguments: map[string]any{"message": "a"},
		InputResponses: yes, RequestState: first.RequestState + "x"})
	if err == nil || !strings.Contains(err.Error(), "integrity") {
		t.Errorf("altered state: %v", err)
	}
	res, err = raw.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp__up__echo", Arguments: map[string]any{"message": "a"},
		InputResponses: yes, RequestState: first.RequestState})
	if err != nil || firstTextOf(res) != "a" {
		t.Errorf("retry with the answer: %v %+v", err, res)
	}

	var decided []string
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.CallDecided); ok {
			decided = append(decided, p.Decision+" "+p.By)
		}
	}
	want := []string{"deny approver:gateway", "allow approver:elicitation:approver/3.0",
		"deny approver:gateway", "deny approver:elicitation:approver/3.0",
		"deny approver:gateway", "deny approver:gateway", "allow approver:elicitation:raw/3.0"}
	if !slices.Equal(decided, want) {
		t.Errorf("call.decided %q, want %q", decided, want)
	}
}

// TestGatewayHTTPHeaderValidation: sessionless requests are checked as
// 2026-07-28 requires (the protocol version header against _meta, the
// Mcp-Method and Mcp-Name headers against the body); server/discover
// offers 2026-07-28 and 2025-11-25; a GET without a session is refused as
// a stateless server refuses it; an initialize still opens a session.
func TestGatewayHTTPHeaderValidation(t *testing.T) {
	up, _ := upstream("up")
	hdr := regionServer()
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up, "hdr": hdr})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	endpoint := srv.URL + gateway.Path
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__up__echo","arguments":{"message":"hi"},` + meta + `}}`
	discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`
	do := func(method, body string, hdr map[string]string) (int, string, http.Header) {
		return rawRequest(t, method, endpoint, body, hdr)
	}
	good := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "mcp__up__echo"}
	region := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__hdr__region","arguments":{"region":"eu"},` + meta + `}}`
	regionHdr := func(v string) map[string]string {
		h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "mcp__hdr__region"}
		if v != "" {
			h["Mcp-Param-Region"] = v
		}
		return h
	}
	with := func(k, v string) map[string]string {
		h := map[string]string{}
		for a, b := range good {
			h[a] = b
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	cases := []struct {
		name   string
		method string
		body   string
		hdr    map[string]string
		status int
		has    string
	}{
		{"valid call", "POST", call, good, 200, `"text":"hi"`},
		{"version header mismatch", "POST", call, with("Mcp-Protocol-Version", "2025-11-25"), 400, "does not match"},
		{"version header missing", "POST", call, with("Mcp-Protocol-Version", ""), 400, "header is required"},
		{"method header mismatch", "POST", call, with("Mcp-Method", "tools/list"), 400, "Mcp-Method"},
		{"method header missing", "POST", call, with("Mcp-Method", ""), 400, "Mcp-Method"},
		{"name header mismatch", "POST", call, with("Mcp-Name", "other"), 400, "Mcp-Name"},
		{"param header (x-mcp-header)", "POST", region, regionHdr("eu"), 200, `"text":"regional"`},
		{"param header missing", "POST", region, regionHdr(""), 400, "missing Mcp-Param-Region"},
		{"param header mismatch", "POST", region, regionHdr("us"), 400, "Mcp-Param-Region header value 'us' does not match"},
		{"discover", "POST", discover, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}, 200, `"supportedVersions":["2026-07-28","2025-11-25"`},
		{"GET without a session", "GET", "", map[string]string{"Mcp-Protocol-Version": "2026-07-28"}, 405, ""},
		{"initialize", "POST", initializeBody, nil, 200, `"protocolVersion":"2025-11-25"`},
	}
	for _, c := range cases {
		status, body, hdr := do(c.method, c.body, c.hdr)
		if status != c.status || !strings.Contains(body, c.has) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, status, body, c.status, c.has)
		}
		if sid := hdr.Get("Mcp-Session-Id"); (sid != "") != (c.name == "initialize") {
			t.Errorf("%s: session %q", c.name, sid)
		}
	}
}

// needsServer is a 2026-07-28 server that needs the client in every way
// input requests allow: its tool "all" asks for an elicitation, a sampling
// and the roots at once, its prompt "p" and resource test://r for an
// elicitation; each completes, retried with the answers and its state,
// with the answers as JSON.
func needsServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "needs", Version: "1"}, nil)
	elicit := &mcp.ElicitParams{Message: "your name?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}
	answers := func(r mcp.InputResponseMap, state, want string) (string, bool) {
		if state != want || len(r) == 0 {
			return "", false
		}
		b, _ := json.Marshal(r)
		return string(b), true
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "all"}, func(_ context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		if s, ok := answers(req.Params.InputResponses, req.Params.RequestState, "t1"); ok {
			return textResult(s), nil, nil
		}
		return &mcp.CallToolResult{RequestState: "t1", InputRequests: mcp.InputRequestMap{"e": elicit, "r": &mcp.ListRootsParams{},
			"s": &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say hi"}}}}}}, nil, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "p"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if s, ok := answers(req.Params.InputResponses, req.Params.RequestState, "p1"); ok {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: s}}}}, nil
		}
		return &mcp.GetPromptResult{RequestState: "p1", InputRequests: mcp.InputRequestMap{"e": elicit}}, nil
	})
	srv.AddResource(&mcp.Resource{URI: "test://r", Name: "r"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if s, ok := answers(req.Params.InputResponses, req.Params.RequestState, "r1"); ok {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: s}}}, nil
		}
		return &mcp.ReadResourceResult{RequestState: "r1", InputRequests: mcp.InputRequestMap{"e": elicit}}, nil
	})
	return srv
}

// fullClient declares elicitation, sampling and roots, and answers them.
func fullClient(name string) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if strings.HasPrefix(req.Params.Message, "mcpledger: allow") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": name}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "hi from " + name}}, nil
		},
	}
}

// TestGatewayInputRequestsOfEveryKind: a 2026-07-28 server's elicitation,
// sampling and roots input requests, from a tool, a prompt and a resource,
// are answered by a 2026-07-28 client (input_required results) and by a
// 2025-11-25 one (server-to-client requests) through the gateway; a
// client that did not declare sampling is refused with a reason.
func TestGatewayInputRequestsOfEveryKind(t *testing.T) {
	f := startGateway(t, nil, func(o *runtime.Options) { o.ProtocolVersion = "2026-07-28" }, map[string]*mcp.Server{"needs": needsServer()})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	endpoint := srv.URL + gateway.Path
	c26 := mcp.NewClient(&mcp.Implementation{Name: "c26", Version: "1"}, fullClient("ann"))
	c26.AddRoots(&mcp.Root{URI: "file:///ann"})
	new, err := c26.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer new.Close()
	c25 := mcp.NewClient(&mcp.Implementation{Name: "c25", Version: "1"}, fullClient("bob"))
	c25.AddRoots(&mcp.Root{URI: "file:///bob"})
	old, err := c25.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	for who, cs := range map[string]*mcp.ClientSession{"ann": new, "bob": old} {
		got := firstTextOf(call(t, cs, "mcp__needs__all", nil))
		for _, want := range []string{`"name":"` + who + `"`, `"hi from ` + who + `"`, `"file:///` + who + `"`} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: tool answers %s, want %s in them", who, got, want)
			}
		}
		p, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "mcp__needs__p"})
		if err != nil || len(p.Messages) != 1 || !strings.Contains(p.Messages[0].Content.(*mcp.TextContent).Text, `"name":"`+who+`"`) {
			t.Errorf("%s: prompt %v %+v", who, err, p)
		}
		r, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "mcpledger://needs/test://r"})
		if err != nil || len(r.Contents) != 1 || !strings.Contains(r.Contents[0].Text, `"name":"`+who+`"`) {
			t.Errorf("%s: resource %v %+v", who, err, r)
		}
	}

	// A call that no client made (mcpledger call through serve) has nobody
	// to ask.
	if r, err := f.m.CallTool(t.Context(), "mcp__needs__all", nil); err == nil || !strings.Contains(err.Error(), "nobody to ask") {
		t.Errorf("call from no client: %v %+v", err, r)
	}

	bare := connectHTTP(t, endpoint, "", "no-sampling", &mcp.ClientOptions{ElicitationHandler: fullClient("x").ElicitationHandler})
	res := call(t, bare, "mcp__needs__all", nil)
	if !res.IsError || !strings.Contains(firstTextOf(res), "did not declare the sampling capability") {
		t.Errorf("client without sampling: %+v %q", res, firstTextOf(res))
	}
}

// TestGatewayAskPolicyWithInputRequests: under call policy ask, a call
// whose server then asks for input is approved once: a 2026-07-28 client's
// approval travels in the sealed requestState to the round that answers
// the server, a 2025-11-25 client's holds for the gateway's retry.
func TestGatewayAskPolicyWithInputRequests(t *testing.T) {
	f := startGateway(t, nil, func(o *runtime.Options) {
		o.ProtocolVersion = "2026-07-28"
		o.CallPolicy = config.PolicyAsk
	}, map[string]*mcp.Server{"needs": needsServer()})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	endpoint := srv.URL + gateway.Path
	var asked atomic.Int32
	counting := func(name string) *mcp.ClientOptions {
		o := fullClient(name)
		h := o.ElicitationHandler
		o.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if strings.HasPrefix(req.Params.Message, "mcpledger: allow") {
				asked.Add(1)
			}
			return h(ctx, req)
		}
		return o
	}
	new := connect2026(t, endpoint, "c26", counting("ann"))
	old := connectHTTP(t, endpoint, "", "c25", counting("bob"))
	for who, cs := range map[string]*mcp.ClientSession{"ann": new, "bob": old} {
		if got := firstTextOf(call(t, cs, "mcp__needs__all", nil)); !strings.Contains(got, `"name":"`+who+`"`) {
			t.Errorf("%s: %s", who, got)
		}
	}
	if asked.Load() != 2 {
		t.Errorf("asked for approval %d times, want once per client", asked.Load())
	}
	decided := map[string][]string{}
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.CallDecided); ok {
			client := "c25"
			if strings.Contains(p.By, "c26") || p.By == "approver:gateway" {
				client = "c26"
			}
			decided[client] = append(decided[client], p.Decision+" "+p.By)
		}
	}
	want26 := []string{"deny approver:gateway", "allow approver:elicitation:c26/3.0", "allow approver:elicitation:c26/3.0"}
	want25 := []string{"allow approver:elicitation:c25/2.0", "allow approver:elicitation:c25/2.0"}
	if !slices.Equal(decided["c26"], want26) || !slices.Equal(decided["c25"], want25) {
		t.Errorf("call.decided %q, want c26 %q, c25 %q", decided, want26, want25)
	}
}

// TestGatewayLogLevelOfSessionlessRequests: a 2026-07-28 request's log
// level (its _meta) goes to a 2026-07-28 server with the call, and the
// server's log messages at or above it come back on the request's
// stream; a request that set none gets none.
func TestGatewayLogLevelOfSessionlessRequests(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, func(o *runtime.Options) { o.ProtocolVersion = "2026-07-28" }, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	logs := make(chan string, 8)
	cs := connect2026(t, srv.URL+gateway.Path, "logger", &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
		logs <- fmt.Sprint(req.Params.Data)
	}})
	// drain collects n messages (waiting up to 5 s), then any more already
	// arrived.
	drain := func(n int) []string {
		var got []string
		timeout := time.After(5 * time.Second)
		for len(got) < n {
			select {
			case l := <-logs:
				got = append(got, l)
			case <-timeout:
				return got
			}
		}
		for {
			select {
			case l := <-logs:
				got = append(got, l)
			default:
				slices.Sort(got)
				return got
			}
		}
	}
	for level, want := range map[string][]string{"debug": {"logged at debug", "logged at warning"}, "warning": {"logged at warning"}, "": nil} {
		p := &mcp.CallToolParams{Name: "mcp__up__log"}
		if level != "" {
			p.Meta = mcp.Meta{"io.modelcontextprotocol/logLevel": level}
		}
		if res, err := cs.CallTool(t.Context(), p); err != nil || firstTextOf(res) != "logged" {
			t.Fatalf("%q: %v %+v", level, err, res)
		}
		if got := drain(len(want)); !slices.Equal(got, want) {
			t.Errorf("level %q: got logs %q, want %q", level, got, want)
		}
	}
}

// TestGatewayCancelSessionlessCall: a 2026-07-28 client that gives up on
// a call (its request ends) cancels it upstream, journaled as cancelled.
func TestGatewayCancelSessionlessCall(t *testing.T) {
	up, pr := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	cs := connect2026(t, srv.URL+gateway.Path, "quitter", nil)
	cancelSlowCall(t, cs, pr)
	waitCancelledOutcome(t, f)
}

// TestGatewayListenStreams: 2026-07-28 clients' subscriptions/listen
// streams get the catalog's list_changed; they hold no share of the
// request budget (two of them beside a budget of two requests leave calls
// room), and are capped at the session cap (a third is refused, 503).
func TestGatewayListenStreams(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(&gateway.HTTPOptions{MaxInflight: 2, MaxSessions: 2}))
	endpoint := srv.URL + gateway.Path
	changed := make(chan struct{}, 8)
	watch := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }}
	a := connect2026(t, endpoint, "watcher-a", watch)
	b := connect2026(t, endpoint, "watcher-b", watch)
	for _, cs := range []*mcp.ClientSession{a, b, a} {
		if got := firstTextOf(call(t, cs, "mcp__up__echo", map[string]any{"message": "room"})); got != "room" {
			t.Fatalf("call beside two listen streams = %q", got)
		}
	}
	// go-sdk's client opens its stream after Connect returns: the refusal
	// shows in the journal.
	connect2026(t, endpoint, "watcher-c", watch)
	waitEvents(t, f, func(evs []events.Event) bool {
		for _, e := range evs {
			if p, ok := e.Payload.(*events.GatewayRejected); ok && p.Reason == events.RejectBusy && p.Status == 503 {
				return true
			}
		}
		return false
	}, "gateway.rejected busy (a third listen stream)")
	up.AddTool(&mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("late"), nil
		})
	for range 2 {
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("no notifications/tools/list_changed on the listen streams")
		}
	}
	if listToolNames(t, a)["mcp__up__late"] == nil {
		t.Error("late tool not listed after list_changed")
	}
}

// TestGatewayCachingHints: a server's ttlMs on a resource read reaches a
// 2026-07-28 client through the gateway; the gateway's own lists say
// ttlMs 0 (its catalog changes while clients are connected).
func TestGatewayCachingHints(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "cached", Version: "1"}, nil)
	srv.AddResource(&mcp.Resource{URI: "test://slow-changing", Name: "s"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Cacheable: mcp.Cacheable{TTLMs: 60000, CacheScope: "private"},
			Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "stable"}}}, nil
	})
	f := startGateway(t, nil, func(o *runtime.Options) { o.ProtocolVersion = "2026-07-28" }, map[string]*mcp.Server{"cached": srv})
	hs := httptestServer(t, f, f.gw.HTTPHandler(nil))
	cs := connect2026(t, hs.URL+gateway.Path, "cacher", nil)
	r, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "mcpledger://cached/test://slow-changing"})
	if err != nil || r.TTLMs != 60000 || r.CacheScope != "private" {
		t.Errorf("read: %v ttlMs %d scope %q, want the server's 60000 private", err, r.TTLMs, r.CacheScope)
	}
	l, err := cs.ListTools(t.Context(), nil)
	if err != nil || l.TTLMs != 0 || l.CacheScope != "public" {
		t.Errorf("tools/list: %v ttlMs %d scope %q", err, l.TTLMs, l.CacheScope)
	}
}

// TestGatewayRequestOf2025ServerTo2026Client: a server spoken to in
// 2025-11-25 that asks by request (elicitation/create) during a call of a
// 2026-07-28 client, which takes none, is refused with a reason naming
// both and what to change.
func TestGatewayRequestOf2025ServerTo2026Client(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	hs := httptestServer(t, f, f.gw.HTTPHandler(nil))
	cs := connect2026(t, hs.URL+gateway.Path, "c26", fullClient("ann"))
	got := firstTextOf(call(t, cs, "mcp__up__ask", nil))
	for _, want := range []string{`server "up" asked for elicitation by a request`, "c26/3.0 mcp=2026-07-28", `"protocolVersion"`} {
		if !strings.Contains(got, want) {
			t.Errorf("tool answers %q, want %q in it", got, want)
		}
	}
}

// regionServer is a server whose tool "region" declares its parameter
// region an x-mcp-header (Region): a 2026-07-28 call of it carries
// Mcp-Param-Region, which go-sdk checks against the body.
func regionServer() *mcp.Server {
	hdr := mcp.NewServer(&mcp.Implementation{Name: "hdr", Version: "1"}, nil)
	hdr.AddTool(&mcp.Tool{Name: "region", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("regional"), nil
		})
	return hdr
}

// rawRequest sends body to endpoint with method, a JSON body's
// Content-Type, the Accept go-sdk requires, and hdr (which may override
// them), and returns the answer's status, body and headers.
func rawRequest(t *testing.T, method, endpoint, body string, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}
