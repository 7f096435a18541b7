package runtime_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

type echoArgs = runtimetest.EchoArgs

func echoServer(name string) *mcp.Server { return runtimetest.EchoServer(name) }

func TestInProcessLifecycle(t *testing.T) {
	j, adapter := openJournal(t)
	m, err := runtime.New(adapter, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": echoServer("mem")}, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	rep, err := m.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Ready, []string{"mem"}) {
		t.Fatalf("ready = %v, report %+v", rep.Ready, rep)
	}
	tools := m.Tools()
	if len(tools) != 1 || tools[0].Name != "mcp__mem__echo" {
		t.Fatalf("tools = %+v", tools)
	}
	res, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "hello ledger"})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "hello ledger" {
		t.Errorf("echo = %q", got)
	}
	if _, err := m.CallTool(ctx, "mcp__mem__nope", nil); !errors.Is(err, runtime.ErrUnknownTool) {
		t.Errorf("unknown tool: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CallTool(ctx, "mcp__mem__echo", nil); !errors.Is(err, runtime.ErrShuttingDown) {
		t.Errorf("after close: %v", err)
	}
	evs := sessionEvents(t, j, m.Session())
	got := strings.Join(kinds(evs, "mem"), " ")
	want := "admission.decided server.transitioned:launching transport.opened server.transitioned:handshaking " +
		"handshake.completed tools.listed server.transitioned:ready call.started call.finished server.transitioned:stopped"
	if got != want {
		t.Errorf("journal for mem:\n got %s\nwant %s", got, want)
	}
	if evs[0].Kind != events.KindSessionStarted || evs[len(evs)-1].Kind != events.KindSessionStopped {
		t.Errorf("session bounds: %s … %s", evs[0].Kind, evs[len(evs)-1].Kind)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("seq %d at %d", e.Seq, i)
		}
		if !e.Kind.IsInput() && (e.Cause == 0 || e.Cause >= e.Seq) {
			t.Errorf("decision %s seq %d has cause %d", e.Kind, e.Seq, e.Cause)
		}
	}
	_ = time.Second
}
