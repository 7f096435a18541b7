package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/gateway"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/tracectx"
)

// traceTransport sets the traceparent header on every request (when
// set) and keeps the Content-Type of each POST's answer (during a call:
// the tools/call's): JSON is the fast path's, an event stream go-sdk's.
type traceTransport struct {
	traceparent string
	mu          sync.Mutex
	answers     []string
}

func (tt *traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if tt.traceparent != "" {
		r.Header.Set("Traceparent", tt.traceparent)
		r.Header.Set("Tracestate", "hdr=1")
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Method == "POST" {
		tt.mu.Lock()
		tt.answers = append(tt.answers, resp.Header.Get("Content-Type"))
		tt.mu.Unlock()
	}
	return resp, err
}

// TestGatewayTraceContext: a client's tools/call carrying a W3C trace
// context, in its params._meta or (failing that) its HTTP headers, on
// each of the gateway's ways in (the fast call path, go-sdk's sessions,
// 2026-07-28 stateless, and not over HTTP), is journaled on call.started,
// and the upstream server receives the same trace with the ledger's span
// of the call as parent; a malformed traceparent is ignored (the
// header's is taken if valid), and a call without one sends none
// upstream.
func TestGatewayTraceContext(t *testing.T) {
	up := runtimetest.NewMetaServer("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up.Server})
	srv := httptestServer(t, f, f.gw.HTTPHandler(nil))
	endpoint := srv.URL + gateway.Path
	tp := func(n int) string { return fmt.Sprintf("00-%032x-%016x-01", n, n) }
	const malformed = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"
	elicit := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}
	cases := []struct {
		name            string
		opts            *mcp.ClientOptions // elicitation: go-sdk's path
		stateless       bool
		meta, header    string
		want, wantState string
		path            string // the answer's Content-Type prefix ("": not checked)
	}{
		{"fast, _meta", nil, false, tp(1), "", tp(1), "meta=1", "application/json"},
		{"fast, header", nil, false, "", tp(2), tp(2), "hdr=1", "application/json"},
		{"go-sdk, _meta over header", elicit, false, tp(3), tp(4), tp(3), "meta=1", "text/event-stream"},
		{"go-sdk, header", elicit, false, "", tp(5), tp(5), "hdr=1", "text/event-stream"},
		{"stateless, _meta", nil, true, tp(6), "", tp(6), "meta=1", ""},
		{"stateless, header", nil, true, "", tp(7), tp(7), "hdr=1", ""},
		{"malformed _meta, header", nil, false, malformed, tp(8), tp(8), "hdr=1", ""},
		{"malformed", elicit, false, malformed, "", "", "", ""},
		{"none", nil, false, "", "", "", "", ""},
	}
	for _, tc := range cases {
		tt := &traceTransport{traceparent: tc.header}
		hc := &http.Client{Transport: tt}
		var copts *mcp.ClientSessionOptions
		if !tc.stateless {
			copts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "traced", Version: "1"}, tc.opts).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, copts)
		if err != nil {
			t.Fatal(err)
		}
		// One request first: the gateway's session table learns a session
		// once its initialize is answered, and a call racing that goes
		// go-sdk's way.
		if !tc.stateless {
			if err := cs.Ping(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
		}
		p := &mcp.CallToolParams{Name: "mcp__up__echo", Arguments: map[string]any{"message": tc.name}}
		if tc.meta != "" {
			p.Meta = mcp.Meta{"traceparent": tc.meta, "tracestate": "meta=1"}
		}
		tt.mu.Lock()
		tt.answers = nil
		tt.mu.Unlock()
		if _, err := cs.CallTool(t.Context(), p); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tt.mu.Lock()
		answers := strings.Join(tt.answers, " ")
		tt.mu.Unlock()
		cs.Close()
		if tc.path != "" && !strings.Contains(answers, tc.path) {
			t.Errorf("%s: answered as %q, want %s: the test no longer takes the path it names", tc.name, answers, tc.path)
		}
	}

	// Not over HTTP (as over stdio): _meta alone.
	mem := f.connect(t, "in-memory", nil)
	if _, err := mem.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp__up__echo", Arguments: map[string]any{"message": "mem"},
		Meta: mcp.Meta{"traceparent": tp(9)}}); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		name            string
		opts            *mcp.ClientOptions
		stateless       bool
		meta, header    string
		want, wantState string
		path            string
	}{name: "in memory, _meta", meta: tp(9), want: tp(9)})

	var started []*events.CallStarted
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.CallStarted); ok {
			started = append(started, p)
		}
	}
	metas := up.Metas()
	if len(started) != len(cases) || len(metas) != len(cases) {
		t.Fatalf("%d call.started and %d upstream requests for %d calls", len(started), len(metas), len(cases))
	}
	for i, tc := range cases {
		st, meta := started[i], metas[i]
		if st.TraceParent != tc.want || st.TraceState != tc.wantState {
			t.Errorf("%s: call.started trace_parent %q trace_state %q; want %q %q", tc.name, st.TraceParent, st.TraceState, tc.want, tc.wantState)
		}
		got, _ := meta["traceparent"].(string)
		if tc.want == "" {
			if got != "" {
				t.Errorf("%s: the upstream got traceparent %q", tc.name, got)
			}
			continue
		}
		client, _ := tracectx.Parse(tc.want, "")
		upParent, ok := tracectx.Parse(got, "")
		_, ledger := tracectx.CallIDs(f.m.Session(), st.CallID)
		state, _ := meta["tracestate"].(string)
		if !ok || upParent.TraceID() != client.TraceID() || upParent.SpanID() != ledger || state != tc.wantState {
			t.Errorf("%s: the upstream got %v; want trace %s, parent %s (the ledger's span), tracestate %q",
				tc.name, meta, client.TraceID(), ledger, tc.wantState)
		}
	}
}
