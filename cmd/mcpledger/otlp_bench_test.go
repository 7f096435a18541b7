package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// BenchmarkCallToolExport: tool calls through a Manager (audit mode, a
// real journal, the echo server in-process) with the live OTLP export
// off and on, in the same run and the same process: b.N calls each, in
// alternating blocks of 500, the "on" blocks with a Shipper following the
// journal to an OTLP/HTTP receiver. It reports both p50s and their ratio
// (on-p50 / off-p50; issue 24's target is at most 1.05).
func BenchmarkCallToolExport(b *testing.B) {
	j, adapter := runtimetest.OpenJournal(b)
	m, err := rt.New(adapter, &rt.Options{InProcess: map[string]*mcp.Server{"mem": runtimetest.EchoServer("mem")}, Seed: 1, PingInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(srv.Close)
	args := map[string]any{"message": "hello ledger"}
	calls := func(n int) []time.Duration {
		lat := make([]time.Duration, n)
		for i := range lat {
			t0 := time.Now()
			res, err := m.CallTool(ctx, "mcp__mem__echo", args)
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
			lat[i] = time.Since(t0)
		}
		return lat
	}
	p50 := func(l []time.Duration) float64 {
		slices.Sort(l)
		return float64(l[len(l)/2])
	}
	calls(50) // warm up
	// Alternating blocks, so that both see the same phases of a noisy
	// machine; starting and stopping the export is not timed.
	const block = 500 // several Lingers: the shipper reads and exports during a block
	var off, on []time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		off = append(off, calls(n)...)
		b.StopTimer()
		x := startLiveExport(ctx, &env{getenv: os.Getenv, stderr: io.Discard}, j, srv.URL, "")
		if x == nil {
			b.Fatal("no export")
		}
		b.StartTimer()
		on = append(on, calls(n)...)
		b.StopTimer()
		x.Close()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(p50(off), "off-p50-ns")
	b.ReportMetric(p50(on), "on-p50-ns")
	b.ReportMetric(p50(on)/p50(off), "ratio-p50")
}
