package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/gateway"
)

// rawPost sends body on session id ("" for none) and returns the response
// (its body read) .
func rawPost(t *testing.T, endpoint, id, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if id != "" {
		req.Header.Set("Mcp-Session-Id", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const pingBody = `{"jsonrpc":"2.0","id":9,"method":"ping"}`

// rawSession initializes a session and returns its ID.
//
// Under a small request budget (MaxInflight) a request may be refused
// busy (503) while the answer to the one before it is on its way back:
// the budget is given back when that request's handler returns. It
// retries those, as Retry-After tells a client to.
func rawSession(t *testing.T, endpoint string) string {
	t.Helper()
	resp, body := rawPostUnbusy(t, endpoint, "", initializeBody)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	if resp, body := rawPostUnbusy(t, endpoint, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != 202 {
		t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
	return id
}

// unbusyTransport sends a request again while it is refused busy (503),
// for up to 5 s, as Retry-After tells a client to.
type unbusyTransport struct{ base http.RoundTripper }

func (u unbusyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := u.base.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) ||
			(r.Body != nil && r.GetBody == nil) {
			return resp, err
		}
		resp.Body.Close()
		if r.GetBody != nil {
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			r = r.Clone(r.Context())
			r.Body = body
		}
	}
}

// rawPostUnbusy is rawPost, again while it is refused busy (for up to 5 s).
func rawPostUnbusy(t *testing.T, endpoint, session, body string) (*http.Response, string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, got := rawPost(t, endpoint, session, body)
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return resp, got
		}
	}
}

// rejections returns the gateway.rejected records, reason by reason.
func (f *gwFixture) rejections(t *testing.T) map[string][]*events.GatewayRejected {
	out := map[string][]*events.GatewayRejected{}
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.GatewayRejected); ok {
			out[p.Reason] = append(out[p.Reason], p)
		}
	}
	return out
}

// A request over the budget of requests in flight is answered 503 with
// Retry-After and journaled as busy; once the call holding the budget
// ends, requests pass again.
func TestGatewayHTTPBusy(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(&gateway.HTTPOptions{MaxInflight: 1}))
	endpoint := srv.URL + gateway.Path
	// The holder's requests are retried while refused busy (the budget of
	// one comes back when a handler returns, which may be after its
	// answer reached the client): setup must not trip on it.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "holder", Version: "2.0"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: unbusyTransport{http.DefaultTransport}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	id := rawSession(t, endpoint)

	ctx, cancel := context.WithCancel(t.Context())
	held := make(chan error, 1)
	go func() { // ends when cancel ends the call
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__up__slow"})
		held <- err
	}()
	for inFlight := false; !inFlight; time.Sleep(10 * time.Millisecond) { // the slow call holds the budget
		select {
		case err := <-held:
			t.Fatalf("the holding call ended: %v", err)
		default:
		}
		for _, e := range f.events(t) {
			if p, ok := e.Payload.(*events.CallStarted); ok && p.Name == "mcp__up__slow" {
				inFlight = true
			}
		}
	}
	resp, body := rawPost(t, endpoint, id, pingBody)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "retry later") {
		t.Fatalf("with a call in flight and room for one: %d Retry-After %q %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// A big body refused while it is still being written: the gateway
	// reads it to the end, so the client writes it whole and reads the
	// 503 (not a connection closed under it: "broken pipe").
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"mcp__up__echo","arguments":{"message":"` +
		strings.Repeat("x", 3<<20) + `"}}}`
	for i := range 3 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, werr := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: %s\r\n"+
			"Content-Length: %d\r\n\r\n%s", gateway.Path, strings.TrimPrefix(srv.URL, "http://"), id, len(big), big)
		resp, rerr := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if werr != nil || rerr != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("a 3 MB body with a call in flight (try %d): write %v, read %v, %+v", i, werr, rerr, resp)
		}
	}
	cancel()
	<-held
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if resp, body = rawPost(t, endpoint, id, pingBody); resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the call ended: %d %s", resp.StatusCode, body)
		}
	}
	busy := f.rejections(t)[events.RejectBusy]
	if len(busy) == 0 || busy[0].Status != 503 || busy[0].Method != "POST" {
		t.Errorf("journaled busy refusals %+v", busy)
	}
}

// At the session cap a new session evicts the least recently used idle
// one; with every session busy (a GET stream open) it is refused.
func TestGatewayHTTPSessionCap(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(&gateway.HTTPOptions{MaxSessions: 2}))
	endpoint := srv.URL + gateway.Path
	a := rawSession(t, endpoint)
	b := rawSession(t, endpoint)
	if resp, _ := rawPost(t, endpoint, a, pingBody); resp.StatusCode != 200 { // a is now the most recent
		t.Fatalf("ping a: %d", resp.StatusCode)
	}
	c := rawSession(t, endpoint) // evicts b
	if resp, _ := rawPost(t, endpoint, b, pingBody); resp.StatusCode != 404 {
		t.Errorf("b, least recently used, answered %d after a third session (want 404: evicted)", resp.StatusCode)
	}
	for _, id := range []string{a, c} {
		if resp, body := rawPost(t, endpoint, id, pingBody); resp.StatusCode != 200 {
			t.Errorf("kept session: %d %s", resp.StatusCode, body)
		}
	}

	// Both listen on a GET stream: neither is idle.
	for _, id := range []string{a, c} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", endpoint, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET stream: %v %v", err, resp)
		}
		t.Cleanup(func() { resp.Body.Close() })
	}
	resp, body := rawPost(t, endpoint, "", initializeBody)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "every one busy") {
		t.Errorf("a new session with every one busy: %d %q", resp.StatusCode, body)
	}
	if len(f.rejections(t)[events.RejectBusy]) != 1 {
		t.Errorf("journaled: %+v", f.rejections(t))
	}
}

// A body that stalls is cut with 408 at the body timeout and journaled;
// a GET stream lives on past it (the deadline is the body's, not the
// connection's).
func TestGatewayHTTPSlowBody(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(&gateway.HTTPOptions{BodyTimeout: 300 * time.Millisecond}))
	endpoint := srv.URL + gateway.Path
	changed := make(chan struct{}, 4)
	cs := connectHTTP(t, endpoint, "", "listener", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			time.Sleep(time.Second) // the call's response stream outlives the body timeout
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "late"}}, nil
		},
	})

	addr := strings.TrimPrefix(srv.URL, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t0 := time.Now()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 500\r\n\r\n{\"jsonrpc\":", addr)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("stalled body: %v after %s", err, time.Since(t0))
	}
	if resp.StatusCode != http.StatusRequestTimeout || time.Since(t0) > 5*time.Second {
		t.Errorf("stalled body: %d after %s (want 408 after 300 ms)", resp.StatusCode, time.Since(t0))
	}

	time.Sleep(500 * time.Millisecond) // the client's GET stream outlives the body timeout
	up.RemoveTools("echo")
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no list_changed on the GET stream after the body timeout")
	}
	if got := firstTextOf(call(t, cs, "mcp__up__sample", nil)); got != "model said: late" {
		t.Errorf("a call answered after the body timeout: %q", got)
	}
	slow := f.rejections(t)[events.RejectSlowBody]
	if len(slow) != 1 || slow[0].Status != 408 {
		t.Errorf("journaled slow bodies %+v", slow)
	}
}

// Sessions go-sdk closed (DELETE, idle timeout) do not count toward the
// cap: a new session at the cap takes their room before evicting anyone.
func TestGatewayHTTPSessionCapForgetsClosed(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(&gateway.HTTPOptions{MaxSessions: 2}))
	endpoint := srv.URL + gateway.Path
	a := rawSession(t, endpoint)
	b := rawSession(t, endpoint)
	if resp, _ := rawPost(t, endpoint, a, pingBody); resp.StatusCode != 200 { // b is now the least recently used
		t.Fatalf("ping a: %d", resp.StatusCode)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "DELETE", endpoint, nil)
	req.Header.Set("Mcp-Session-Id", a)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", err, resp)
	}
	resp.Body.Close()
	rawSession(t, endpoint)
	if resp, body := rawPost(t, endpoint, b, pingBody); resp.StatusCode != 200 {
		t.Errorf("b answered %d %q after a was deleted and another created (want kept: a's room was free)", resp.StatusCode, body)
	}
}
