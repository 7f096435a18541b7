package runtime_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
)

// callPathResult is the 10 KB text the benchmark's tool returns: prose
// with paths, numbers and a JSON fragment, as a file-reading tool would.
var callPathResult = func() string {
	line := `The build of /srv/app/src/main.go took 4.2 s; see {"status":"ok","tests":118,"failed":0} and https://example.com/ci/1234. `
	return strings.Repeat(line, 10240/len(line)+1)[:10240]
}()

func callPathServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "Returns 10 KB of text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: callPathResult}}}, nil, nil
		})
	return s
}

// nullJournal accepts every append at once: it takes the journal out of
// the measurement, leaving the call path's own work.
type nullJournal struct{}

func (nullJournal) Append(context.Context, uuid.UUID, []events.Event) error { return nil }
func (nullJournal) AppendLater(uuid.UUID, []events.Event) func(context.Context) error {
	return func(context.Context) error { return nil }
}
func (nullJournal) ReadAll(context.Context, uint64, func(events.Event) error) error { return nil }

// BenchmarkCallPath measures one call of a tool returning a 10 KB text
// result, in the same run:
//
//   - direct: a raw go-sdk client over mcp.NewInMemoryTransports (protocol
//     2025-11-25), the floor;
//   - path: Manager.CallToolWith against the same server in-process with
//     a journal that costs nothing: validation, policy, redaction of
//     arguments and result, rendering, injection scan, the decider loop;
//   - relaxed, audit: the same with a real bbolt journal
//     (Durability Relaxed, and Audit: two fsyncs per call).
//
// Each reports ns/call (mean) and p50-ns. The path's own work is path
// minus direct; the target is ≤ 50 µs.
func BenchmarkCallPath(b *testing.B) {
	args := map[string]any{"message": "hello ledger"}
	b.Run("direct", func(b *testing.B) {
		ctx := context.Background()
		ct, st := mcp.NewInMemoryTransports()
		ss, err := callPathServer().Connect(ctx, st, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ss.Close()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1.0"}, nil).
			Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		benchCallPath(b, func() error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: args})
			if err == nil && len(res.Content) != 1 {
				err = fmt.Errorf("result %+v", res)
			}
			return err
		})
	})
	for _, tc := range []struct {
		name string
		j    func(b *testing.B) runtime.Journal
		d    runtime.Durability
		sdk  bool // every call through go-sdk's client (runtime.SetSDKCalls)
	}{
		{"path", func(*testing.B) runtime.Journal { return nullJournal{} }, runtime.Relaxed, false},
		{"path,sdk-client", func(*testing.B) runtime.Journal { return nullJournal{} }, runtime.Relaxed, true},
		{"relaxed", func(b *testing.B) runtime.Journal { _, a := openJournal(b); return a }, runtime.Relaxed, false},
		{"audit", func(b *testing.B) runtime.Journal { _, a := openJournal(b); return a }, runtime.Audit, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m, err := runtime.New(tc.j(b), &runtime.Options{InProcess: map[string]*mcp.Server{"mem": callPathServer()},
				Seed: 1, PingInterval: -1, Durability: tc.d, ProtocolVersion: "2025-11-25"})
			if err != nil {
				b.Fatal(err)
			}
			if tc.sdk {
				runtime.SetSDKCalls(m)
			}
			ctx := context.Background()
			rep, err := m.Start(ctx)
			if err != nil || !slices.Equal(rep.Ready, []string{"mem"}) {
				b.Fatalf("start: %v %+v", err, rep)
			}
			defer m.Close()
			benchCallPath(b, func() error {
				r, err := m.CallToolWith(ctx, "mcp__mem__read", args, nil)
				if err == nil && r.Chars != len(callPathResult) {
					err = fmt.Errorf("rendered %d chars", r.Chars)
				}
				return err
			})
		})
	}
}

func benchCallPath(b *testing.B, call func() error) {
	for range 50 {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/call")
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
}
