package runtime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestHTTPBigResult: an HTTP server's result over MaxMessageBytes is cut
// as it streams, as over stdio, whether it comes as an SSE event of the
// call's POST (the test server, Streamable HTTP), a JSON body
// (JSONResponse) or an event of an SSE server's stream: the call gets the first MaxResultChars characters and
// the marker naming the whole size, call.finished records wire_bytes, and
// the session stays up.
func TestHTTPBigResult(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	sseURL, _ := runtimetest.StartHTTP(t, bin, nil)
	big := mcp.NewServer(&mcp.Implementation{Name: "json", Version: "1"}, nil)
	mcp.AddTool(big, &mcp.Tool{Name: "big"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Bytes int `json:"bytes"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Bytes)}}}, nil, nil
	})
	js := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return big }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	defer js.Close()
	legacy := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return big }, nil))
	defer legacy.Close()

	j, adapter := openJournal(t)
	c1, s1 := remote("sse", events.TransportHTTP, sseURL, nil)
	c2, s2 := remote("json", events.TransportHTTP, js.URL, nil)
	c3, s3 := remote("legacy", events.TransportSSE, legacy.URL, nil)
	opts := fastOpts(configOf(c1, s1, c2, s2, c3, s3))
	opts.CallTimeout = 60 * time.Second
	opts.MaxMessageBytes = 1 << 20
	m, _ := runtime.New(adapter, opts)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const size = 5_000_000
	marker := "[mcpledger: output truncated: 4950000 of 5000000 characters cut]"
	for _, server := range []string{"sse", "json", "legacy"} {
		r, err := m.CallToolWith(t.Context(), "mcp__"+server+"__big", map[string]any{"bytes": size}, nil)
		if err != nil {
			t.Fatalf("%s: %v", server, err)
		}
		if r.Chars != size || !strings.HasSuffix(r.Text, "\n"+marker) || len(r.Text) != 50_000+1+len(marker) {
			t.Errorf("%s: rendered %d chars, cut %d: …%q", server, r.Chars, r.Cut, r.Text[max(0, len(r.Text)-100):])
		}
		if b := texts(r.Bounded); len(b) != 2 || b[1] != marker {
			t.Errorf("%s: bounded result %d blocks", server, len(b))
		}
	}
	if r, err := m.CallTool(t.Context(), "mcp__sse__echo", map[string]any{"message": "still here"}); err != nil || textOf(t, r) != "still here" {
		t.Errorf("after the big results: %v %v", err, r)
	}
	_, evs := callEvents(t, j, m.Session())
	n := 0
	for _, e := range evs {
		if f, ok := e.Payload.(*events.CallFinished); ok && f.WireBytes > 0 {
			n++
			if f.Outcome != events.OutcomeOK || f.WireBytes <= size || f.WireBytes > size+200 || f.RenderedChars != size {
				t.Errorf("journaled %+v", f)
			}
		}
	}
	if n != 3 {
		t.Errorf("%d call.finished with wire_bytes, want 3", n)
	}
}
