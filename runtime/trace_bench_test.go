package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime"
)

// BenchmarkCallToolTraced: what making a call in a caller's trace adds
// to a call through the Manager (relaxed): untraced and traced, the same
// Manager, in the same run. Traced, call.started carries the traceparent
// and tracestate, and the request upstream a _meta with them.
func BenchmarkCallToolTraced(b *testing.B) {
	_, adapter := openJournal(b)
	m, err := runtime.New(adapter, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": echoServer("mem")},
		Seed: 1, PingInterval: -1, Durability: runtime.Relaxed, ProtocolVersion: benchProtocol})
	if err != nil {
		b.Fatal(err)
	}
	rep, err := m.Start(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	if !slices.Equal(rep.Ready, []string{"mem"}) {
		b.Fatalf("not ready: %+v", rep)
	}
	traced, ok := runtime.WithTraceContext(context.Background(), clientParent, "congo=t61rcWkgMzE")
	if !ok {
		b.Fatal("traceparent refused")
	}
	args := map[string]any{"message": "hello ledger"}
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"untraced", context.Background()}, {"traced", traced}} {
		b.Run(c.name, func(b *testing.B) {
			runBenchCalls(b, func() error {
				res, err := m.CallTool(c.ctx, "mcp__mem__echo", args)
				if err == nil && res.IsError {
					err = fmt.Errorf("tool error: %+v", res.Content)
				}
				return err
			})
		})
	}
}
