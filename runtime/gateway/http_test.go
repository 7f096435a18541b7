package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/gateway"
)

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connectHTTP(t *testing.T, url, token, name string, o *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearerTransport{token}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "2.0"}, o).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// httptestServer serves h on loopback until the test ends; the gateway is
// closed first, which ends the clients' open streams.
func httptestServer(t *testing.T, f *gwFixture, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		f.gw.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// post sends an initialize request with the given Host, Origin and
// Authorization (empty: none) and returns the status.
func post(t *testing.T, endpoint, host, origin, auth string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", endpoint, strings.NewReader(initializeBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestGatewayHTTPAuthHostAndOrigin(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(&gateway.HTTPOptions{Token: "s3cret-token"}))
	endpoint := srv.URL + gateway.Path
	u, _ := url.Parse(srv.URL)

	cases := []struct {
		name, host, origin, auth string
		want                     int
	}{
		{"no token", "", "", "", 401},
		{"wrong token", "", "", "Bearer nope", 401},
		{"basic auth", "", "", "Basic czNjcmV0LXRva2Vu", 401},
		{"rebinding host", "evil.example.com:" + u.Port(), "", "Bearer s3cret-token", 403},
		{"foreign origin", "", "http://evil.example.com", "Bearer s3cret-token", 403},
		{"loopback origin, other port", "", "http://localhost:1", "Bearer s3cret-token", 403},
		{"null origin", "", "null", "Bearer s3cret-token", 403},
		{"own origin", "", "http://localhost:" + u.Port(), "Bearer s3cret-token", 200},
		{"localhost host", "localhost:" + u.Port(), "", "Bearer s3cret-token", 200},
		{"no origin", "", "", "Bearer s3cret-token", 200},
	}
	for _, c := range cases {
		if got := post(t, endpoint, c.host, c.origin, c.auth); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
	if got := post(t, srv.URL+"/other", "", "", "Bearer s3cret-token"); got != 404 {
		t.Errorf("other path: %d", got)
	}

	var rejected []string
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.GatewayRejected); ok {
			rejected = append(rejected, p.Reason)
			if strings.Contains(p.Host+p.Origin+p.Remote, "s3cret") || p.Remote == "" {
				t.Errorf("record %+v", p)
			}
		}
	}
	want := "missing_token wrong_token missing_token host origin origin origin"
	if strings.Join(rejected, " ") != want {
		t.Errorf("journaled rejections %q, want %q", rejected, want)
	}

	// A real client with the token: list, call, progress over Streamable HTTP.
	progress := make(chan float64, 8)
	cs := connectHTTP(t, endpoint, "s3cret-token", "http-client", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params.Progress },
	})
	if listToolNames(t, cs)["mcp__up__echo"] == nil {
		t.Fatal("no echo over HTTP")
	}
	if got := firstTextOf(call(t, cs, "mcp__up__echo", map[string]any{"message": "over http"})); got != "over http" {
		t.Errorf("echo = %q", got)
	}
	p := &mcp.CallToolParams{Name: "mcp__up__progress"}
	p.SetProgressToken(7)
	if _, err := cs.CallTool(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		select {
		case got := <-progress:
			if got != float64(i) {
				t.Errorf("progress %v, want %d", got, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("progress %d not forwarded over HTTP", i)
		}
	}
	var caller string
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.CallStarted); ok {
			caller = p.Caller
		}
	}
	if !strings.HasPrefix(caller, "http-client/2.0 session=") || strings.HasSuffix(caller, "session=") {
		t.Errorf("caller %q: want the client and its Mcp-Session-Id", caller)
	}
}

func TestGatewayHTTPListChanged(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	changed := make(chan struct{}, 4)
	cs := connectHTTP(t, srv.URL+gateway.Path, "", "watcher", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	up.RemoveTools("echo")
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed over HTTP")
	}
	deadline := time.Now().Add(5 * time.Second)
	for listToolNames(t, cs)["mcp__up__echo"] != nil {
		if time.Now().After(deadline) {
			t.Fatal("echo still listed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
