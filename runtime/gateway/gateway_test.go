package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/gateway"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// probe records what an in-process upstream server saw.
type probe struct {
	cancelled  chan string // tool calls whose context ended early
	subscribed chan string // URIs subscribed / unsubscribed ("-URI")
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func firstTextOf(r *mcp.CallToolResult) string {
	if r != nil && len(r.Content) > 0 {
		if t, ok := r.Content[0].(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

type noArgs struct{}

// upstream is an in-process server with every feature the gateway passes
// through: tools (echo, progress, slow, sample, ask, log, touch), a
// resource, a template, a prompt, completion and subscriptions.
func upstream(name string) (*mcp.Server, *probe) {
	p := &probe{cancelled: make(chan string, 8), subscribed: make(chan string, 8)}
	var srv *mcp.Server
	srv = mcp.NewServer(&mcp.Implementation{Name: name, Version: "1.0"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{
				Values: []string{req.Params.Ref.Name + req.Params.Ref.URI + ":" + req.Params.Argument.Value + "-done"}}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error { p.subscribed <- req.Params.URI; return nil },
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			p.subscribed <- "-" + req.Params.URI
			return nil
		},
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo a message"},
		func(_ context.Context, _ *mcp.CallToolRequest, in runtimetest.EchoArgs) (*mcp.CallToolResult, any, error) {
			return textResult(in.Message), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "progress", Description: "Reports progress three times"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			if tok == nil {
				return textResult("no progress token"), nil, nil
			}
			for i := 1; i <= 3; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprint("step ", i)}); err != nil {
					return nil, nil, err
				}
			}
			return textResult(fmt.Sprintf("token %v", tok)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Waits until cancelled (or 10 s)"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
				p.cancelled <- "slow"
				return nil, nil, ctx.Err()
			case <-time.After(10 * time.Second):
				return textResult("not cancelled"), nil, nil
			}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "sample", Description: "Asks the client's model"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			TimeoutMS int `json:"timeout_ms,omitempty"`
		}) (*mcp.CallToolResult, any, error) {
			if in.TimeoutMS > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(in.TimeoutMS)*time.Millisecond)
				defer cancel()
			}
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say hi"}}}})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampling failed: " + err.Error()}}}, nil, nil
			}
			return textResult("model said: " + res.Content.(*mcp.TextContent).Text), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask", Description: "Asks the user for a name"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "your name?",
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "elicitation failed: " + err.Error()}}}, nil, nil
			}
			return textResult(fmt.Sprintf("%s: %v", res.Action, res.Content["name"])), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "log", Description: "Logs twice"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			for _, l := range []mcp.LoggingLevel{"debug", "warning"} {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: l, Logger: "tool", Data: "logged at " + string(l)})
			}
			return textResult("logged"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "touch", Description: "Updates test://static/a"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
			return textResult("touched"), nil, srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://static/a"})
		})
	srv.AddResource(&mcp.Resource{URI: "test://static/a", Name: "a", Description: "Resource A", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "A of " + name}}}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://item/{id}", Name: "item"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "item at " + req.Params.URI}}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"] + " from " + name}}}}, nil
		})
	return srv, p
}

// gwFixture is a Manager over in-process servers, fronted by a gateway.
type gwFixture struct {
	j  *store.Journal
	m  *runtime.Manager
	gw *gateway.Gateway
}

func startGateway(t *testing.T, gopts *gateway.Options, tune func(*runtime.Options), servers map[string]*mcp.Server) *gwFixture {
	t.Helper()
	j, adapter := runtimetest.OpenJournal(t)
	opts := &runtime.Options{InProcess: servers, Seed: 1, PingInterval: -1, StartupTimeout: 10 * time.Second,
		Logger: testLogger(t), ProtocolVersion: "2025-11-25"} // the upstreams sample, elicit and log the 2025-11-25 way
	if tune != nil {
		tune(opts)
	}
	if gopts == nil {
		gopts = &gateway.Options{}
	}
	gopts.Logger = testLogger(t)
	gw := gateway.New(gopts)
	m, err := runtime.New(gw.Bind(opts, adapter), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		gw.Close()
	})
	if err := gw.Attach(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	return &gwFixture{j: j, m: m, gw: gw}
}

// connect connects a go-sdk client to the gateway in memory.
func (f *gwFixture) connect(t *testing.T, name string, o *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := f.gw.Server().Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, o).Connect(t.Context(), ct,
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (f *gwFixture) events(t *testing.T) []events.Event {
	return runtimetest.SessionEvents(t, f.j, f.m.Session())
}

func listToolNames(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	out := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = tool
	}
	return out
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func TestGatewayToolsCallsAndIdentity(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up, "other": runtimetest.EchoServer("other")})
	cs := f.connect(t, "test-client", nil)
	tools := listToolNames(t, cs)
	for _, want := range []string{"mcp__up__echo", "mcp__up__progress", "mcp__other__echo"} {
		if tools[want] == nil {
			t.Fatalf("no %s in %v", want, slices.Sorted(maps.Keys(tools)))
		}
	}
	schema, _ := json.Marshal(tools["mcp__up__echo"].InputSchema)
	if !strings.Contains(string(schema), `"message"`) || !strings.Contains(string(schema), `"type":"object"`) {
		t.Errorf("echo schema not the server's: %s", schema)
	}
	if got := firstTextOf(call(t, cs, "mcp__up__echo", map[string]any{"message": "hi"})); got != "hi" {
		t.Errorf("echo = %q", got)
	}
	// Invalid arguments: checked locally, an isError result the model can read.
	res := call(t, cs, "mcp__up__echo", map[string]any{"message": 7})
	if !res.IsError || !strings.Contains(firstTextOf(res), "invalid arguments") {
		t.Errorf("invalid args: %+v %q", res, firstTextOf(res))
	}
	if err := cs.Ping(t.Context(), nil); err != nil {
		t.Errorf("ping: %v", err)
	}
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Errorf("setLevel: %v", err)
	}
	var started []*events.CallStarted
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.CallStarted); ok {
			started = append(started, p)
		}
	}
	if len(started) != 2 || !strings.HasPrefix(started[0].Caller, "test-client/1.0 session=") || started[0].Name != "mcp__up__echo" {
		t.Fatalf("call.started: %+v", started)
	}
}

func TestGatewayListChangedReachesClients(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	changed := make(chan struct{}, 4)
	cs := f.connect(t, "watcher", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	if tools := listToolNames(t, cs); tools["mcp__up__late"] != nil {
		t.Fatal("late tool listed before it exists")
	}
	up.AddTool(&mcp.Tool{Name: "late", Description: "Added later", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("late"), nil
		})
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("no notifications/tools/list_changed with the new tool")
		}
		if tools := listToolNames(t, cs); tools["mcp__up__late"] != nil {
			break
		}
	}
	if got := firstTextOf(call(t, cs, "mcp__up__late", nil)); got != "late" {
		t.Errorf("late = %q", got)
	}
	up.RemoveTools("late")
	deadline = time.After(10 * time.Second)
	for listToolNames(t, cs)["mcp__up__late"] != nil {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("removed tool still listed")
		}
	}
}

func TestGatewayResourcesPromptsCompletionSubscriptions(t *testing.T) {
	up, pr := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	updated := make(chan string, 4)
	cs := f.connect(t, "reader", &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updated <- req.Params.URI
	}})
	var uris []string
	for r, err := range cs.Resources(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	const a = "mcpledger://up/test://static/a"
	if !slices.Equal(uris, []string{a}) {
		t.Fatalf("resources %v", uris)
	}
	var tpls []string
	for r, err := range cs.ResourceTemplates(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tpls = append(tpls, r.URITemplate)
	}
	if !slices.Equal(tpls, []string{"mcpledger://up/test://item/{id}"}) {
		t.Fatalf("templates %v", tpls)
	}
	rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: a})
	if err != nil || rr.Contents[0].Text != "A of up" || rr.Contents[0].URI != a {
		t.Fatalf("read: %v %+v", err, rr)
	}
	rr, err = cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "mcpledger://up/test://item/42"})
	if err != nil || rr.Contents[0].Text != "item at test://item/42" {
		t.Fatalf("read template: %v %+v", err, rr)
	}
	var prompts []string
	for p, err := range cs.Prompts(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p.Name)
	}
	if !slices.Equal(prompts, []string{"mcp__up__greet"}) {
		t.Fatalf("prompts %v", prompts)
	}
	gp, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "mcp__up__greet", Arguments: map[string]string{"who": "ann"}})
	if err != nil || gp.Messages[0].Content.(*mcp.TextContent).Text != "hello ann from up" {
		t.Fatalf("get prompt: %v %+v", err, gp)
	}
	cr, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "mcp__up__greet"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "an"}})
	if err != nil || !slices.Equal(cr.Completion.Values, []string{"greet:an-done"}) {
		t.Fatalf("complete prompt: %v %+v", err, cr)
	}
	cr, err = cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "mcpledger://up/test://item/{id}"},
		Argument: mcp.CompleteParamsArgument{Name: "id", Value: "4"}})
	if err != nil || !slices.Equal(cr.Completion.Values, []string{"test://item/{id}:4-done"}) {
		t.Fatalf("complete template: %v %+v", err, cr)
	}
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: a}); err != nil {
		t.Fatal(err)
	}
	if got := <-pr.subscribed; got != "test://static/a" {
		t.Fatalf("upstream subscribed to %q", got)
	}
	call(t, cs, "mcp__up__touch", nil)
	select {
	case got := <-updated:
		if got != a {
			t.Errorf("updated %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/resources/updated")
	}
	if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: a}); err != nil {
		t.Fatal(err)
	}
	if got := <-pr.subscribed; got != "-test://static/a" {
		t.Fatalf("upstream unsubscribed %q", got)
	}
	if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "mcpledger://nope/x://y"}); err == nil {
		t.Error("read of an unknown server's URI succeeded")
	}
}

func TestGatewayForwardsSamplingElicitationAndLogs(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	var mu sync.Mutex
	var logs []string
	cs := f.connect(t, "full-client", &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model",
				Content: &mcp.TextContent{Text: "hi from " + req.Session.InitializeResult().ServerInfo.Name}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ann"}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf("%s %s %v", req.Params.Level, req.Params.Logger, req.Params.Data))
			mu.Unlock()
		},
	})
	if got := firstTextOf(call(t, cs, "mcp__up__sample", nil)); got != "model said: hi from mcpledger" {
		t.Errorf("sample = %q", got)
	}
	if got := firstTextOf(call(t, cs, "mcp__up__ask", nil)); got != "accept: ann" {
		t.Errorf("ask = %q", got)
	}
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	call(t, cs, "mcp__up__log", nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(logs)
		mu.Unlock()
		if len(got) > 0 {
			if !slices.Equal(got, []string{"warning up/tool logged at warning"}) {
				t.Errorf("logs %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no log message forwarded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGatewayRefusesSamplingAndElicitationWithoutCapability(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	cs := f.connect(t, "bare-client", nil)
	for _, tc := range []struct{ tool, what string }{{"mcp__up__sample", "sampling"}, {"mcp__up__ask", "elicitation"}} {
		res := call(t, cs, tc.tool, nil)
		if !res.IsError || !strings.Contains(firstTextOf(res), "did not declare the "+tc.what+" capability") ||
			!strings.Contains(firstTextOf(res), "bare-client/1.0") {
			t.Errorf("%s: %q", tc.tool, firstTextOf(res))
		}
	}
}

func TestGatewayProgressAndCancellation(t *testing.T) {
	up, pr := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	progress := make(chan *mcp.ProgressNotificationParams, 8)
	samplingCancelled := make(chan struct{}, 1)
	cs := f.connect(t, "progress-client", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
		CreateMessageHandler: func(ctx context.Context, _ *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			<-ctx.Done() // never answers: the server gives up and cancels
			samplingCancelled <- struct{}{}
			return nil, ctx.Err()
		},
	})
	p := &mcp.CallToolParams{Name: "mcp__up__progress"}
	p.SetProgressToken("client-token-1")
	res, err := cs.CallTool(t.Context(), p)
	if err != nil || !strings.HasPrefix(firstTextOf(res), "token mcpledger-") {
		t.Fatalf("progress call: %v %q (the server must see the gateway's own token)", err, firstTextOf(res))
	}
	for i := 1; i <= 3; i++ {
		select {
		case n := <-progress:
			if n.ProgressToken != "client-token-1" || n.Progress != float64(i) || n.Total != 3 {
				t.Errorf("progress %d: %+v", i, n)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("progress %d not forwarded", i)
		}
	}
	// Client → server: cancelling the call cancels the server's handler.
	cancelSlowCall(t, cs, pr)
	// Server → client: the server cancelling its sampling request cancels
	// the client's handler.
	res = call(t, cs, "mcp__up__sample", map[string]any{"timeout_ms": 200})
	if !res.IsError {
		t.Errorf("sample with timeout: %q", firstTextOf(res))
	}
	select {
	case <-samplingCancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the client's sampling handler was not cancelled")
	}
	waitCancelledOutcome(t, f)
}

// cancelSlowCall starts a call of the upstream's slow tool, cancels it
// after 200 ms, and fails the test unless the server's handler sees the
// cancellation within 5 s.
func cancelSlowCall(t *testing.T, cs *mcp.ClientSession, pr *probe) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { // joined below
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__up__slow"})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case <-pr.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's handler was not cancelled")
	}
	<-done
}

// waitCancelledOutcome waits for a call.finished of outcome cancelled.
func waitCancelledOutcome(t *testing.T, f *gwFixture) {
	t.Helper()
	waitEvents(t, f, func(evs []events.Event) bool {
		for _, e := range evs {
			if p, ok := e.Payload.(*events.CallFinished); ok && p.Outcome == events.OutcomeCancelled {
				return true
			}
		}
		return false
	}, "call.finished cancelled")
}

func waitEvents(t *testing.T, f *gwFixture, cond func([]events.Event) bool, what string) []events.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs := f.events(t)
		if cond(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the journal", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestGatewayPlainNames(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, &gateway.Options{PlainNames: true}, nil, map[string]*mcp.Server{"up": up})
	cs := f.connect(t, "plain", nil)
	tools := listToolNames(t, cs)
	if tools["echo"] == nil || tools["mcp__up__echo"] != nil {
		t.Fatalf("tools %v", slices.Sorted(maps.Keys(tools)))
	}
	if got := firstTextOf(call(t, cs, "echo", map[string]any{"message": "plain"})); got != "plain" {
		t.Errorf("echo = %q", got)
	}
	rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://item/7"})
	if err != nil || rr.Contents[0].Text != "item at test://item/7" || rr.Contents[0].URI != "test://item/7" {
		t.Fatalf("read: %v %+v", err, rr)
	}
	if _, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "x"}}); err != nil {
		t.Fatal(err)
	}
	var started *events.CallStarted
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.CallStarted); ok {
			started = p
		}
	}
	if started == nil || started.Name != "mcp__up__echo" || started.Tool != "echo" {
		t.Errorf("call.started %+v: the journal keeps the catalog name", started)
	}
}

func TestGatewayPlainNamesCollisionRefused(t *testing.T) {
	_, adapter := runtimetest.OpenJournal(t)
	opts := &runtime.Options{InProcess: map[string]*mcp.Server{"alpha": runtimetest.EchoServer("alpha"), "beta": runtimetest.EchoServer("beta")},
		Seed: 1, PingInterval: -1}
	gw := gateway.New(&gateway.Options{PlainNames: true})
	m, _ := runtime.New(gw.Bind(opts, adapter), opts)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	defer gw.Close()
	err := gw.Attach(t.Context(), m)
	if err == nil || !strings.Contains(err.Error(), `tool "echo" is offered by servers "alpha" and "beta"`) {
		t.Fatalf("attach: %v", err)
	}
}

func TestGatewayAskPolicyApprovedByElicitation(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, func(o *runtime.Options) { o.CallPolicy = config.PolicyAsk }, map[string]*mcp.Server{"up": up})
	var asked []string
	var mu sync.Mutex
	yes := f.connect(t, "approver-client", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, req.Params.Message)
		mu.Unlock()
		approve := strings.Contains(req.Params.Message, `"yes"`)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve}}, nil
	}})
	if got := firstTextOf(call(t, yes, "mcp__up__echo", map[string]any{"message": "yes"})); got != "yes" {
		t.Errorf("approved call = %q", got)
	}
	res := call(t, yes, "mcp__up__echo", map[string]any{"message": "no"})
	if !res.IsError || !strings.Contains(firstTextOf(res), "denied") {
		t.Errorf("refused call = %q", firstTextOf(res))
	}
	if len(asked) != 2 || !strings.Contains(asked[0], `tool "echo" of server "up"`) {
		t.Errorf("asked %q", asked)
	}
	bare := f.connect(t, "bare-client", nil)
	res = call(t, bare, "mcp__up__echo", map[string]any{"message": "yes"})
	if !res.IsError || !strings.Contains(firstTextOf(res), "did not declare the elicitation capability") {
		t.Errorf("no-elicitation call = %q", firstTextOf(res))
	}
	var decided []string
	for _, e := range f.events(t) {
		if p, ok := e.Payload.(*events.CallDecided); ok {
			decided = append(decided, p.Decision+" "+p.By)
		}
	}
	want := []string{"allow approver:elicitation:approver-client/1.0", "deny approver:elicitation:approver-client/1.0", "deny approver:gateway"}
	if !slices.Equal(decided, want) {
		t.Errorf("call.decided %q, want %q", decided, want)
	}
}

// TestGatewayCloseEndsSessions: Close ends client sessions and the
// gateway's goroutines, also with a call in flight.
func TestGatewayCloseEndsSessions(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	cs := f.connect(t, "closing", nil)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__up__slow"})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	t0 := time.Now()
	f.m.Close()
	f.gw.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("call in flight did not end")
	}
	if d := time.Since(t0); d > 4*time.Second {
		t.Errorf("close took %v", d)
	}
	if err := cs.Wait(); err != nil && !strings.Contains(err.Error(), "closed") {
		t.Logf("client session ended: %v", err)
	}
}

// testLogger logs warnings to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// TestGatewayProtocolVersions: clients on 2025-11-25 and 2025-06-18 get
// their version, and a client on go-sdk's default speaks 2026-07-28.
func TestGatewayProtocolVersions(t *testing.T) {
	up, _ := upstream("up")
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"up": up})
	for _, v := range []string{"2025-11-25", "2025-06-18", ""} {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := f.gw.Server().Connect(t.Context(), st, nil); err != nil {
			t.Fatal(err)
		}
		var o *mcp.ClientSessionOptions
		if v != "" {
			o = &mcp.ClientSessionOptions{ProtocolVersion: v}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "v" + v, Version: "1"}, nil).Connect(t.Context(), ct, o)
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		want := v
		if want == "" {
			want = "2026-07-28"
		}
		if got := cs.InitializeResult().ProtocolVersion; got != want {
			t.Errorf("asked %q, negotiated %q", v, got)
		}
		if got := firstTextOf(call(t, cs, "mcp__up__echo", map[string]any{"message": v})); got != v {
			t.Errorf("%q: echo %q", v, got)
		}
		cs.Close()
	}
}

// TestGatewayProgressOfForwardedRequests: a client's progress on a
// sampling request a server made through the gateway reaches the server
// under the server's own token.
func TestGatewayProgressOfForwardedRequests(t *testing.T) {
	got := make(chan *mcp.ProgressNotificationParams, 4)
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ServerOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationServerRequest) { got <- req.Params },
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		p := &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "x"}}}}
		p.SetProgressToken("server-token")
		if _, err := req.Session.CreateMessage(ctx, p); err != nil {
			return nil, nil, err
		}
		return textResult("sampled"), nil, nil
	})
	f := startGateway(t, nil, nil, map[string]*mcp.Server{"asker": srv})
	cs := f.connect(t, "progress-reporter", &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			tok := req.Params.GetProgressToken()
			if tok == nil || tok == "server-token" {
				return nil, fmt.Errorf("progress token %v: want the gateway's own", tok)
			}
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2}); err != nil {
				return nil, err
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "ok"}}, nil
		},
	})
	if res := call(t, cs, "mcp__asker__sample", nil); res.IsError {
		t.Fatalf("sample: %q", firstTextOf(res))
	}
	select {
	case p := <-got:
		if p.ProgressToken != "server-token" || p.Progress != 1 || p.Total != 2 {
			t.Errorf("server got progress %+v", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client's progress did not reach the server")
	}
}

// TestAttachChecksBind: Attach refuses a gateway that was never bound, a
// Manager not yet started, and a Manager made without Bind's journal.
func TestAttachChecksBind(t *testing.T) {
	_, adapter := runtimetest.OpenJournal(t)
	servers := map[string]*mcp.Server{"mem": runtimetest.EchoServer("mem")}

	unbound := gateway.New(nil)
	defer unbound.Close()
	plain, err := runtime.New(adapter, &runtime.Options{InProcess: servers})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := unbound.Attach(t.Context(), plain); err == nil || !strings.Contains(err.Error(), "before Bind") {
		t.Errorf("Attach of an unbound gateway: %v", err)
	}

	g := gateway.New(nil)
	defer g.Close()
	opts := &runtime.Options{InProcess: servers}
	j := g.Bind(opts, adapter)
	if err := g.Attach(t.Context(), plain); !errors.Is(err, runtime.ErrNotStarted) {
		t.Errorf("Attach of a Manager made without Bind's journal: %v, want runtime.ErrNotStarted", err)
	}
	m, err := runtime.New(j, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := g.Attach(t.Context(), m); !errors.Is(err, runtime.ErrNotStarted) {
		t.Errorf("Attach before Start: %v, want runtime.ErrNotStarted", err)
	}
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.Attach(t.Context(), m); err != nil {
		t.Errorf("Attach of the bound, started Manager: %v", err)
	}
	if err := g.Attach(t.Context(), m); err == nil || !strings.Contains(err.Error(), "already attached") {
		t.Errorf("second Attach: %v", err)
	}
}
