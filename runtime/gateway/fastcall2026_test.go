package gateway_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/gateway"
)

// post2026 posts body as a 2026-07-28 request of method (and tool name,
// if any) with the headers go-sdk's client sends, plus extra, and returns
// the answer's status, content type and body.
func post2026(t *testing.T, endpoint, method, name, body string, extra map[string]string) (int, string, string) {
	t.Helper()
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	for k, v := range extra {
		h[k] = v
	}
	status, b, hdr := rawRequest(t, "POST", endpoint, body, h)
	return status, hdr.Get("Content-Type"), b
}

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"9"},"io.modelcontextprotocol/clientCapabilities":{"roots":{}}}`

func toolCall2026(id, name, args, meta string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `,` + meta + `}}`
}

// A 2026-07-28 tools/call the fast path may answer gets one
// application/json answer equal to the one go-sdk's stateless handler
// gives on its event stream, and is journaled with the same caller: a
// text result, a tool error of the runtime's (invalid arguments) and one
// of the server's (it asked a client that cannot answer for sampling).
func TestFastCall2026AnswersAsGoSDK(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	endpoint := srv.URL + gateway.Path
	for _, c := range []struct{ name, tool, args string }{
		{"text", "mcp__up__echo", `{"message":"<hi> & bye"}`},
		{"invalid arguments", "mcp__up__echo", `{"message":5}`},
		{"tool error", "mcp__up__sample", `{"prompt":"p"}`},
	} {
		gateway.SetFast2026(f.gw, true)
		status, ct, body := post2026(t, endpoint, "tools/call", c.tool, toolCall2026(`"x-1"`, c.tool, c.args, meta2026), nil)
		if status != 200 || ct != "application/json" {
			t.Fatalf("%s, fast: %d %s %s", c.name, status, ct, body)
		}
		got := rpcAnswer(t, ct, body)
		gateway.SetFast2026(f.gw, false)
		status, ct, body = post2026(t, endpoint, "tools/call", c.tool, toolCall2026(`"x-1"`, c.tool, c.args, meta2026), nil)
		if status != 200 || ct != "text/event-stream" {
			t.Fatalf("%s, go-sdk: %d %s %s", c.name, status, ct, body)
		}
		want := rpcAnswer(t, ct, body)
		if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
			t.Errorf("%s: fast answer\n%s\ngo-sdk's\n%s", c.name, g, w)
		}
		if res, _ := got["result"].(map[string]any); res["resultType"] != "complete" {
			t.Errorf("%s: resultType of %s", c.name, mustJSON(t, got))
		}
	}
	var callers []string
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.CallStarted); ok {
			callers = append(callers, p.Caller)
		}
	}
	if len(callers) != 6 {
		t.Fatalf("call.started callers %q, want 6", callers)
	}
	for i := 0; i < len(callers); i += 2 {
		if callers[i] != callers[i+1] || callers[i] != "raw/9 mcp=2026-07-28 caps=roots" {
			t.Errorf("callers fast %q, go-sdk %q", callers[i], callers[i+1])
		}
	}
}

// Under policy ask, the first round of a 2026-07-28 call on the fast path
// is the input_required result go-sdk's path gives (the sealed
// requestState aside, which differs per call), and its retry with the
// answer, which go-sdk's path serves, runs the call.
func TestFastCall2026InputRequired(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, func(o *runtime.Options) { o.CallPolicy = config.PolicyAsk }, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	endpoint := srv.URL + gateway.Path
	body := toolCall2026("3", "mcp__up__echo", `{"message":"a"}`, strings.Replace(meta2026, `{"roots":{}}`, `{"elicitation":{}}`, 1))
	var answers [2]map[string]any
	for i, fast := range []bool{true, false} {
		gateway.SetFast2026(f.gw, fast)
		status, ct, raw := post2026(t, endpoint, "tools/call", "mcp__up__echo", body, nil)
		if status != 200 || (ct == "application/json") != fast {
			t.Fatalf("fast=%v: %d %s %s", fast, status, ct, raw)
		}
		answers[i] = rpcAnswer(t, ct, raw)
	}
	state := func(a map[string]any) string {
		res, _ := a["result"].(map[string]any)
		s, _ := res["requestState"].(string)
		delete(res, "requestState")
		return s
	}
	fastState, sdkState := state(answers[0]), state(answers[1])
	if fastState == "" || sdkState == "" {
		t.Fatalf("no requestState: fast %s, go-sdk %s", mustJSON(t, answers[0]), mustJSON(t, answers[1]))
	}
	if g, w := mustJSON(t, answers[0]), mustJSON(t, answers[1]); g != w || !strings.Contains(g, `"resultType":"input_required"`) {
		t.Errorf("fast answer\n%s\ngo-sdk's\n%s", g, w)
	}
	gateway.SetFast2026(f.gw, true)
	retry := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mcp__up__echo","arguments":{"message":"a"},` +
		`"inputResponses":{"io.mcpledger/approval":{"action":"accept","content":{"approve":true}}},"requestState":"` + fastState + `",` + strings.Replace(meta2026, `{"roots":{}}`, `{"elicitation":{}}`, 1) + `}}`
	status, ct, raw := post2026(t, endpoint, "tools/call", "mcp__up__echo", retry, nil)
	if status != 200 || ct != "text/event-stream" || !strings.Contains(raw, `"text":"a"`) {
		t.Errorf("retry with the answer (go-sdk's path): %d %s %s", status, ct, raw)
	}
}

// What the fast path leaves to go-sdk: each request below is answered by
// go-sdk's stateless handler (an event stream, or its 400), never by the
// fast path (application/json).
func TestFastCall2026LeavesToGoSDK(t *testing.T) {
	up, _ := upstream("up")
	hdr := regionServer()
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up, "hdr": hdr})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	endpoint := srv.URL + gateway.Path
	echo := func(args, meta string) string { return toolCall2026("1", "mcp__up__echo", args, meta) }
	plainMeta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	for _, c := range []struct {
		name, tool, body string
		extra            map[string]string
	}{
		{"progress token", "mcp__up__echo", echo(`{"message":"m"}`, plainMeta+`,"progressToken":"p"}`), nil},
		{"log level", "mcp__up__echo", echo(`{"message":"m"}`, plainMeta+`,"io.modelcontextprotocol/logLevel":"info"}`), nil},
		{"capabilities not an object", "mcp__up__echo", echo(`{"message":"m"}`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":null}`), nil},
		{"no capabilities", "mcp__up__echo", echo(`{"message":"m"}`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`), nil},
		{"clientInfo not an object", "mcp__up__echo", echo(`{"message":"m"}`, plainMeta+`,"io.modelcontextprotocol/clientInfo":"me"}`), nil},
		{"another version in _meta", "mcp__up__echo", echo(`{"message":"m"}`, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-08-01","io.modelcontextprotocol/clientCapabilities":{}}`), nil},
		{"name header mismatch", "other", echo(`{"message":"m"}`, plainMeta+`}`), nil},
		{"unknown tool", "nope", toolCall2026("1", "nope", `{}`, plainMeta+`}`), nil},
		{"a retry's state", "mcp__up__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__up__echo","arguments":{"message":"m"},"requestState":"s",` + plainMeta + `}}}`, nil},
		{"a key in another case (go-sdk matches keys exactly)", "mcp__up__echo",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"mcp__up__echo","arguments":{"message":"m"},` + plainMeta + `}}}`, nil},
		{"fractional id", "mcp__up__echo", toolCall2026("1.5", "mcp__up__echo", `{"message":"m"}`, plainMeta+`}`), nil},
		{"batch", "mcp__up__echo", `[` + echo(`{"message":"m"}`, plainMeta+`}`) + `]`, nil},
		{"a tool with x-mcp-header parameters", "mcp__hdr__region", toolCall2026("1", "mcp__hdr__region", `{"region":"eu"}`, plainMeta+`}`),
			map[string]string{"Mcp-Param-Region": "eu"}},
		{"only JSON accepted", "mcp__up__echo", echo(`{"message":"m"}`, plainMeta+`}`), map[string]string{"Accept": "application/json"}},
	} {
		status, ct, body := post2026(t, endpoint, "tools/call", c.tool, c.body, c.extra)
		if ct == "application/json" && status == 200 {
			t.Errorf("%s: answered by the fast path: %s", c.name, body)
		}
		if c.name == "a tool with x-mcp-header parameters" && (status != 200 || !strings.Contains(body, "regional")) {
			t.Errorf("%s: %d %s", c.name, status, body)
		}
	}
}
