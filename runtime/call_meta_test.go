package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// metaServer is an in-process 2026-07-28 server that keeps the params of
// every tools/call it receives, as it decoded them. Its tool "echo"
// answers a message; "ask" asks for the caller's name (an input request)
// until a round answers it.
type metaServer struct {
	*mcp.Server
	mu     sync.Mutex
	params []string
	asked  atomic.Int32 // rounds of "ask" that asked
}

func newMetaServer() *metaServer {
	s := &metaServer{Server: mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "1"}, nil)}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				b, _ := json.Marshal(req.GetParams())
				s.mu.Lock()
				s.params = append(s.params, string(b))
				s.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	mcp.AddTool(s.Server, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in runtimetest.EchoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	s.Server.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["who"].(*mcp.ElicitResult); ok {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("hello %v", r.Content["name"])}}}, nil
		}
		s.asked.Add(1)
		return &mcp.CallToolResult{RequestState: "asked", InputRequests: mcp.InputRequestMap{"who": &mcp.ElicitParams{
			Message: "your name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}}, nil
	})
	return s
}

func (s *metaServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.params
}

type frontKey struct{}

// frontMeta is what the test's front end does to a call's _meta, in its
// sending middleware and as Options.CallMeta.
func frontMeta(ctx context.Context, meta mcp.Meta) mcp.Meta {
	if ctx.Value(frontKey{}) == nil {
		return meta
	}
	out := maps.Clone(meta)
	out["x.test/front"] = "yes"
	return out
}

// TestPlainCall2026AsSDK: on a 2026-07-28 session a plain call sends what
// go-sdk's client sends (the server decodes the same params: the _meta
// with the protocol version, the client's info and capabilities, the
// call's trace, and a front end's part) and ends the same; a result that
// asks for input is the front end's when its client leaves input requests
// to it, and otherwise made again through go-sdk's client, which answers
// it (here it cannot: it has no elicitation handler).
func TestPlainCall2026AsSDK(t *testing.T) {
	span := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled})
	ctx := context.WithValue(trace.ContextWithSpanContext(context.Background(), span), frontKey{}, true)
	traceparent := regexp.MustCompile(`"traceparent":"00-01020300000000000000000000000000-[0-9a-f]{16}-01"`)
	type ending struct {
		params []string // as the server decoded them, the trace's span left out
		result string
		err    string
		asked  int32
	}
	run := func(t *testing.T, frontEnd, sdk bool, tool string, args any) (e ending, plain bool) {
		srv := newMetaServer()
		o := &Options{InProcess: map[string]*mcp.Server{"mem": srv.Server}, Seed: 1, PingInterval: -1,
			ProtocolVersion: stateless, ClientName: "meta-client", ClientVersion: "3"}
		if frontEnd {
			o.NewClient = func(_ string, impl *mcp.Implementation, co *mcp.ClientOptions) *mcp.Client {
				co.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ann"}}, nil
				}
				co.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
				c := mcp.NewClient(impl, co)
				c.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
					return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
						if r, ok := req.(*mcp.ClientRequest[mcp.Params]); ok && method == "tools/call" {
							p := *r.Params.(*mcp.CallToolParams)
							p.Meta = frontMeta(ctx, p.Meta)
							req = &mcp.ClientRequest[mcp.Params]{Session: r.Session, Params: &p}
						}
						return next(ctx, method, req)
					}
				})
				return c
			}
			o.PlainCall = func(ctx context.Context) bool { return ctx.Value(frontKey{}) != nil }
		}
		o.CallMeta = frontMeta // a front end's part: ignored without its client
		_, adapter := runtimetest.OpenJournal(t)
		m, err := New(adapter, o)
		if err != nil {
			t.Fatal(err)
		}
		m.sdkCalls = sdk
		if _, err := m.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		r, err := m.CallToolWith(ctx, "mcp__mem__"+tool, args, nil)
		if err != nil {
			e.err = err.Error()
		}
		if r != nil {
			b, _ := json.Marshal(r.Result)
			e.result = string(b)
		}
		for _, p := range srv.received() {
			if !traceparent.MatchString(p) {
				t.Errorf("the server got no traceparent of the caller's trace: %s", p)
			}
			e.params = append(e.params, traceparent.ReplaceAllString(p, `"traceparent":"…"`))
		}
		e.asked = srv.asked.Load()
		c := m.view.Load().live["mem"]
		c.mu.Lock()
		plain = c.wire.ownNext > 0
		c.mu.Unlock()
		return e, plain
	}
	for _, tc := range []struct {
		name      string
		frontEnd  bool
		tool      string
		args      any
		moreAsked int32 // rounds the plain call's server asks more than go-sdk's
	}{
		{name: "echo", tool: "echo", args: map[string]any{"message": "hi"}},
		{name: "front-end/echo", frontEnd: true, tool: "echo", args: map[string]any{"message": "hi"}},
		{name: "front-end/asks", frontEnd: true, tool: "ask"},
		{name: "asks", tool: "ask", moreAsked: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, plain := run(t, tc.frontEnd, false, tc.tool, tc.args)
			s, sdkPlain := run(t, tc.frontEnd, true, tc.tool, tc.args)
			if !plain || sdkPlain {
				t.Fatalf("sent around go-sdk's client: %v, and with sdkCalls: %v", plain, sdkPlain)
			}
			if p.asked != s.asked+tc.moreAsked {
				t.Errorf("the server asked %d times on the plain call, %d on go-sdk's; want %d more", p.asked, s.asked, tc.moreAsked)
			}
			// The plain call's first try, made again, is the only extra
			// request the server saw.
			if len(p.params) == len(s.params)+int(tc.moreAsked) {
				p.params = p.params[tc.moreAsked:]
			}
			p.asked, s.asked = 0, 0
			if fmt.Sprint(p) != fmt.Sprint(s) {
				t.Errorf("plain call:\n%+v\ngo-sdk's client:\n%+v", p, s)
			}
			t.Logf("%+v", p)
		})
	}
}

// TestPlainCallOverStdio: over stdio too, a call is a plain call in
// either version (TestPlainCallAsSDK compares how the two paths end).
func TestPlainCallOverStdio(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	for _, v := range []string{"2025-11-25", stateless} {
		t.Run(v, func(t *testing.T) {
			_, adapter := runtimetest.OpenJournal(t)
			c, s := runtimetest.Stdio("srv", bin, nil)
			m, err := New(adapter, &Options{Config: runtimetest.ConfigOf(c, s), Seed: 1, PingInterval: -1, ProtocolVersion: v})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			r, err := m.CallTool(t.Context(), "mcp__srv__echo", map[string]any{"message": "over stdio"})
			if err != nil || r.IsError {
				t.Fatalf("call: %v %+v", err, r)
			}
			cn := m.view.Load().live["srv"]
			cn.mu.Lock()
			own := cn.wire.ownNext
			cn.mu.Unlock()
			if own != 1 {
				t.Errorf("%d requests of the runtime's own on the connection, want the call's 1", own)
			}
		})
	}
}
