package runtime_test

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestCallJournalsTheServersBytes: over stdio and in-process, call.finished
// holds the result as the server encoded it (go-sdk writes '<' as
// \u003c; mcpledger's own encoding would not), and the caller's result is
// unchanged.
func TestCallJournalsTheServersBytes(t *testing.T) {
	const msg = "a<b&c"
	bin := runtimetest.BuildServer(t)
	c, s := stdio("proc", bin, nil, "MCPTEST_TOOL_COUNT=1")
	j, adapter := openJournal(t)
	opts := fastOpts(configOf(c, s))
	opts.InProcess = map[string]*mcp.Server{"mem": echoServer("mem")}
	m, err := runtime.New(adapter, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"mcp__proc__echo", "mcp__mem__echo"} {
		r, err := m.CallTool(t.Context(), tool, map[string]any{"message": msg})
		if err != nil || textOf(t, r) != msg {
			t.Fatalf("%s: %v %v", tool, err, r)
		}
	}
	sid := m.Session()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range sessionEvents(t, j, sid) {
		if f, ok := e.Payload.(*events.CallFinished); ok {
			n++
			if !strings.Contains(f.Result.Text, `a\u003cb\u0026c`) || f.Result.Size != int64(len(f.Result.Text)) {
				t.Errorf("%s: journaled %q (size %d)", e.Server, f.Result.Text, f.Result.Size)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d call.finished, want 2", n)
	}
}
