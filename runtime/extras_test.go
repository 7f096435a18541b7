package runtime_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
)

// TestReadyWithItsPrompts: a server is ready, and the startup gate
// passes, with its resources and prompts listed, even when they answer
// later than its tools: a gateway that serves from the gate on must not
// answer "unknown prompt" for a server it calls ready.
func TestReadyWithItsPrompts(t *testing.T) {
	srv := echoServer("mem")
	srv.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "prompts/list" {
				time.Sleep(200 * time.Millisecond) // slower than tools/list
			}
			return next(ctx, method, req)
		}
	})
	j, adapter := openJournal(t)
	m, err := runtime.New(adapter, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": srv}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if rep, err := m.Start(t.Context()); err != nil || !slices.Equal(rep.Ready, []string{"mem"}) {
		t.Fatalf("Start: %+v, %v", rep, err)
	}
	var got []string
	for _, e := range sessionEvents(t, j, m.Session()) {
		switch e.Kind {
		case events.KindToolsListed, events.KindPromptsListed:
			got = append(got, string(e.Kind))
		case events.KindServerTransitioned:
			if p := e.Payload.(*events.ServerTransitioned); p.To == events.StateReady {
				got = append(got, "ready")
			}
		}
	}
	if want := []string{"prompts.listed", "tools.listed", "ready"}; !slices.Equal(got, want) {
		t.Fatalf("events of the first connection %v, want %v", got, want)
	}
}
