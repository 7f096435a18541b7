package runtime_test

import (
	"fmt"
	"testing"

	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// benchProtocols are the two protocol generations BenchmarkProtocols
// compares: the last one with an initialize handshake and sessions, and
// the stateless one (server/discover, the _meta triple on every request).
var benchProtocols = []string{"2025-11-25", "2026-07-28"}

// BenchmarkProtocols compares MCP 2025-11-25 with 2026-07-28 on the two
// costs a user feels, in the same run (use -count to alternate rounds):
//
//   - start20,proto=V: Manager.Start of 20 stdio servers (the test server,
//     which speaks both) pinned to V, timed until all 20 are ready with
//     their tools listed, as BenchmarkStartStdio's servers=20;
//   - call,direct,proto=V: a raw go-sdk client pinned to V calling an
//     in-process echo server (BenchmarkCallTool's direct);
//   - call,relaxed,proto=V: the same call through a Relaxed Manager
//     pinned to V (BenchmarkCallTool's relaxed).
//
// Run it with, e.g.:
//
//	go test ./runtime -run '^$' -bench 'Protocols/start' -benchtime=10x -count 5
//	go test ./runtime -run '^$' -bench 'Protocols/call' -benchtime=2000x -count 5
func BenchmarkProtocols(b *testing.B) {
	for _, proto := range benchProtocols {
		b.Run("start20,proto="+proto, func(b *testing.B) {
			benchStartManagerAt(b, runtimetest.BuildServer(b), 20, "", proto)
		})
	}
	for _, proto := range benchProtocols {
		b.Run("call,direct,proto="+proto, func(b *testing.B) { runBenchCalls(b, directEchoAt(b, proto)) })
	}
	for _, proto := range benchProtocols {
		b.Run(fmt.Sprintf("call,relaxed,proto=%s", proto), func(b *testing.B) {
			runBenchCalls(b, managerEchoAt(b, runtime.Relaxed, proto))
		})
	}
}
