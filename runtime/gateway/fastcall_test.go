package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/gateway"
)

// rpcAnswer decodes a JSON-RPC response, from a JSON body or from the one
// "data:" line of an SSE body.
func rpcAnswer(t *testing.T, contentType, body string) map[string]any {
	t.Helper()
	if strings.HasPrefix(contentType, "text/event-stream") {
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id"`) {
				body = d
			}
		}
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return v
}

// A tools/call the fast path may answer gets one application/json answer
// equal to the one go-sdk's path gives on its stream (a call asking for
// progress takes go-sdk's path); a client that declared sampling or
// elicitation, an unknown tool and a malformed body are answered as
// before.
func TestFastCallAnswersAsGoSDK(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	endpoint := srv.URL + gateway.Path
	id := rawSession(t, endpoint)

	const fast = `{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"mcp__up__echo","arguments":{"message":"<hi> & bye"}}}`
	const viaSDK = `{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"mcp__up__echo","arguments":{"message":"<hi> & bye"},"_meta":{"progressToken":"p"}}}`
	resp, body := rawPost(t, endpoint, id, fast)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
		t.Fatalf("fast call: %d %s %s", resp.StatusCode, ct, body)
	}
	got := rpcAnswer(t, "application/json", body)
	resp, body = rawPost(t, endpoint, id, viaSDK)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("call with a progress token: %d %s %s (want go-sdk's stream)", resp.StatusCode, ct, body)
	}
	want := rpcAnswer(t, "text/event-stream", body)
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("fast answer\n%s\ngo-sdk's\n%s", g, w)
	}
	if got["id"] != "a-1" || !strings.Contains(mustJSON(t, got), `\u003chi\u003e \u0026 bye`) {
		t.Errorf("fast answer %s", mustJSON(t, got))
	}

	// An unknown tool: the same JSON-RPC error on both paths.
	resp, body = rawPost(t, endpoint, id, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"nope"}}`)
	gotErr := rpcAnswer(t, resp.Header.Get("Content-Type"), body)
	resp, body = rawPost(t, endpoint, id, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"nope","_meta":{"progressToken":1}}}`)
	wantErr := rpcAnswer(t, resp.Header.Get("Content-Type"), body)
	if g, w := mustJSON(t, gotErr), mustJSON(t, wantErr); g != w || gotErr["error"] == nil {
		t.Errorf("unknown tool: fast %s, go-sdk %s", g, w)
	}

	// Malformed: go-sdk answers (its 400), nothing is called.
	resp, body = rawPost(t, endpoint, id, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed body: %d %s (want go-sdk's 400)", resp.StatusCode, body)
	}

	// A client that may be asked for sampling: go-sdk's path (its stream
	// carries what the server asks during the call).
	cs := connectHTTP(t, endpoint, "", "sampler", &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
	})
	if res := call(t, cs, "mcp__up__sample", nil); res.IsError || !strings.Contains(firstTextOf(res), "sampled") {
		t.Errorf("sampling through go-sdk's path: %q", firstTextOf(res))
	}

	// Every call was journaled with its caller, whichever path answered it.
	evs := waitEvents(t, f, func(evs []events.Event) bool { return countFinished(evs) >= 3 }, "three call.finished")
	callers := map[string]int{}
	for _, e := range evs {
		if p, ok := e.Payload.(*events.CallStarted); ok {
			callers[strings.Fields(p.Caller)[0]]++
		}
	}
	if callers["raw/1"] != 2 || callers["sampler/2.0"] != 1 {
		t.Errorf("callers journaled: %v", callers)
	}
}

func countFinished(evs []events.Event) int {
	n := 0
	for _, e := range evs {
		if _, ok := e.Payload.(*events.CallFinished); ok {
			n++
		}
	}
	return n
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A client's cancellation reaches a call the fast path answers: the
// server's handler is cancelled and the call journaled as cancelled.
func TestFastCallCancelled(t *testing.T) {
	up, pr := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	cs := connectHTTP(t, srv.URL+gateway.Path, "", "canceller", nil)
	cancelSlowCall(t, cs, pr)
	waitCancelledOutcome(t, f)
	// The session goes on.
	if res := call(t, cs, "mcp__up__echo", map[string]any{"message": "still here"}); firstTextOf(res) != "still here" {
		t.Errorf("after the cancellation: %q", firstTextOf(res))
	}
}

// Sessions idle for SessionTimeout are closed, and calls (answered by the
// fast path, which go-sdk's own idle timer never sees) keep a session
// alive.
func TestHTTPSessionIdleTimeout(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	const idle = 400 * time.Millisecond
	srv := httptestServer(t, f, f.gw.HTTPHandler(&gateway.HTTPOptions{SessionTimeout: idle}))
	endpoint := srv.URL + gateway.Path
	cs := connectHTTP(t, endpoint, "", "busy", nil)
	for end := time.Now().Add(3 * idle); time.Now().Before(end); time.Sleep(idle / 4) {
		if res := call(t, cs, "mcp__up__echo", map[string]any{"message": "tick"}); firstTextOf(res) != "tick" {
			t.Fatalf("call on a busy session: %q", firstTextOf(res))
		}
	}
	id := rawSession(t, endpoint)
	sessions := func() int {
		n := 0
		for range f.gw.Server().Sessions() {
			n++
		}
		return n
	}
	if n := sessions(); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
	deadline := time.Now().Add(10 * idle)
	for sessions() > 0 && time.Now().Before(deadline) {
		time.Sleep(idle / 4)
	}
	if n := sessions(); n != 0 {
		t.Fatalf("%d sessions still held after %s idle", n, 10*idle)
	}
	if resp, body := rawPost(t, endpoint, id, pingBody); resp.StatusCode != http.StatusNotFound {
		t.Errorf("request on an expired session: %d %s (want 404)", resp.StatusCode, body)
	}
}
