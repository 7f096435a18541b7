package gateway_test

// BenchmarkBigResult (issue 21): the memory `mcpledger serve` needs for a
// 100 MB upstream result. Run:
//
//	go test ./runtime/gateway -run '^$' -bench 'BigResult' -benchtime=3x -count 1

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// bigBytes is the size of the result of the big calls.
const bigBytes = 100_000_000

// BenchmarkBigResult calls the test server's big tool for a text of
// 100 MB, one call per op, and reports the peak RSS of the process that
// receives it above that process's idle RSS (VmHWM after the calls minus
// VmRSS before them, from /proc/PID/status), in MiB:
//
//   - via-serve: a go-sdk client → `mcpledger serve --http` (the binary,
//     audit durability) → the server over stdio; the peak is serve's. The
//     result is over serve's 16 MiB message limit, so it is cut as it
//     streams and arrives bounded (50,000 characters and the marker).
//   - via-serve-http-upstream: the same, with the server behind serve
//     over Streamable HTTP (its answer an SSE event, cut as it streams);
//   - direct-http: the same call from a go-sdk client (a child process of
//     this benchmark) to the server over Streamable HTTP, no gateway; the
//     peak is the client's, which takes the 100 MB whole: the baseline.
//
// Target: via-serve's peak above idle < 64 MiB.
func BenchmarkBigResult(b *testing.B) {
	bin := runtimetest.BuildServer(b)
	b.Run("via-serve", func(b *testing.B) { benchBigViaServe(b, map[string]any{"command": bin}) })
	b.Run("via-serve-http-upstream", func(b *testing.B) {
		url, _ := runtimetest.StartHTTP(b, bin, nil)
		benchBigViaServe(b, map[string]any{"type": "http", "url": url})
	})
	b.Run("direct-http", func(b *testing.B) {
		url, _ := runtimetest.StartHTTP(b, bin, nil)
		cmd := exec.Command(os.Args[0], "-test.run", "^TestBigResultClient$", "-test.bench", "^$", "-test.count", "1")
		cmd.Env = append(os.Environ(), "MCPLEDGER_BIGRESULT_URL="+url, "MCPLEDGER_BIGRESULT_CALLS="+strconv.Itoa(b.N))
		b.ResetTimer()
		out, err := cmd.CombinedOutput()
		b.StopTimer()
		if err != nil {
			b.Fatalf("the client: %v\n%s", err, out)
		}
		var idle, hwm int64
		for _, line := range strings.Split(string(out), "\n") {
			if _, err := fmt.Sscanf(strings.TrimSpace(line), "bigresult idle %d peak %d", &idle, &hwm); err == nil {
				break
			}
		}
		if hwm == 0 {
			b.Fatalf("the client said nothing of its memory:\n%s", out)
		}
		report(b, idle, hwm)
	})
}

// benchBigViaServe makes the big calls through `mcpledger serve --http`
// in front of the server srv (its config entry) and reports serve's peak.
func benchBigViaServe(b *testing.B, srv map[string]any) {
	pid, url := startServe(b, srv)
	cs := benchConnect(b, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1})
	echo(b, cs, "mcp__srv__echo")
	time.Sleep(500 * time.Millisecond) // idle: startup's garbage collected
	idle := procStatus(b, pid, "VmRSS")
	for b.Loop() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__srv__big", Arguments: map[string]any{"bytes": bigBytes}})
		if err != nil {
			b.Fatal(err)
		}
		if n := len(res.Content); n != 2 || !strings.HasSuffix(res.Content[1].(*mcp.TextContent).Text, fmt.Sprintf(" of %d characters cut]", bigBytes)) {
			b.Fatalf("a result of %d blocks, not cut and marked", n)
		}
	}
	b.StopTimer()
	report(b, idle, procStatus(b, pid, "VmHWM"))
}

// TestBigResultClient is direct-http's client, run by BenchmarkBigResult
// in a process of its own (skipped otherwise): it makes the big calls and
// prints its idle RSS and its peak after them.
func TestBigResultClient(t *testing.T) {
	url := os.Getenv("MCPLEDGER_BIGRESULT_URL")
	if url == "" {
		t.Skip("run by BenchmarkBigResult")
	}
	calls, _ := strconv.Atoi(os.Getenv("MCPLEDGER_BIGRESULT_CALLS"))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1.0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	echo(t, cs, "echo")
	time.Sleep(500 * time.Millisecond)
	pid := os.Getpid()
	idle := procStatus(t, pid, "VmRSS")
	for range max(calls, 1) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"bytes": bigBytes}})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(res.Content[0].(*mcp.TextContent).Text); n != bigBytes {
			t.Fatalf("%d bytes", n)
		}
	}
	fmt.Printf("bigresult idle %d peak %d\n", idle, procStatus(t, pid, "VmHWM"))
}

func report(b *testing.B, idle, hwm int64) {
	b.ReportMetric(float64(hwm-idle)/(1<<20), "peak-MiB-above-idle")
	b.ReportMetric(float64(idle)/(1<<20), "idle-MiB")
}

func echo(tb testing.TB, cs *mcp.ClientSession, tool string) {
	tb.Helper()
	for range 5 {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"message": "hello"}}); err != nil {
			tb.Fatal(err)
		}
	}
}

// procStatus reads a field of /proc/PID/status in bytes.
func procStatus(tb testing.TB, pid int, field string) int64 {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
