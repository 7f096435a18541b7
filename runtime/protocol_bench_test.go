package runtime_test

import (
	"testing"

	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// benchProtocols are the two protocol generations BenchmarkProtocols
// compares: the last one with an initialize handshake and sessions, and
// the stateless one (server/discover, the _meta triple on every request).
var benchProtocols = []string{"2025-11-25", "2026-07-28"}

// BenchmarkProtocols compares MCP 2025-11-25 with 2026-07-28, and what
// protocolVersion auto costs, on what a user feels, in one run (use
// -count to alternate rounds):
//
//   - start20,proto=V: Manager.Start of 20 stdio servers (the test
//     server, which speaks both) pinned to V, timed until all 20 are ready
//     with their tools listed, each op on a fresh journal (as
//     BenchmarkStartStdio's servers=20);
//   - start20,proto=auto: the same under auto, which speaks 2026-07-28 to
//     these servers;
//   - start20,2025-only,proto=V: 20 servers that refuse 2026-07-28
//     (MCPTEST_PROTOCOLS=2025-11-25): pinned to 2025-11-25 (the floor);
//     under auto on a fresh journal (a refused server/discover, then
//     initialize); and under auto on a journal that knows them
//     (auto,known: initialize alone);
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
	bin := runtimetest.BuildServer(b)
	for _, proto := range benchProtocols {
		b.Run("start20,proto="+proto, func(b *testing.B) {
			benchStart(b, startBench{bin: bin, n: 20, proto: proto, want: proto})
		})
	}
	b.Run("start20,proto=auto", func(b *testing.B) {
		benchStart(b, startBench{bin: bin, n: 20, proto: "auto", want: "2026-07-28"})
	})
	old := []string{"MCPTEST_PROTOCOLS=2025-11-25"}
	b.Run("start20,2025-only,proto=2025-11-25", func(b *testing.B) {
		benchStart(b, startBench{bin: bin, n: 20, proto: "2025-11-25", env: old, want: "2025-11-25"})
	})
	b.Run("start20,2025-only,proto=auto", func(b *testing.B) {
		benchStart(b, startBench{bin: bin, n: 20, proto: "auto", env: old, want: "2025-11-25"})
	})
	b.Run("start20,2025-only,proto=auto,known", func(b *testing.B) {
		benchStart(b, startBench{bin: bin, n: 20, proto: "auto", env: old, want: "2025-11-25", known: true})
	})
	for _, proto := range benchProtocols {
		b.Run("call,direct,proto="+proto, func(b *testing.B) { runBenchCalls(b, directEchoAt(b, proto)) })
	}
	for _, proto := range benchProtocols {
		b.Run("call,relaxed,proto="+proto, func(b *testing.B) {
			runBenchCalls(b, managerEchoAt(b, runtime.Relaxed, proto))
		})
	}
}
