package gateway_test

// BenchmarkGateway (issue 7): what mcpledger serve adds to a tool call.
// Results and the commands that produced them are in BENCHMARKS.md
// ("Gateway"). Run, e.g. (bench/gateway.sh runs rounds and prints the
// medians):
//
//	go test ./runtime/gateway -run '^$' -bench 'Gateway' -benchtime=2000x -count 1

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime"

	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// BenchmarkGateway measures one echo call of the test server
// (testdata/mcpserver) from a go-sdk client pinned to 2025-11-25, at
// concurrency 1 and 16 on one client session:
//
//   - direct: the client → the server over Streamable HTTP on loopback;
//   - direct-stdio: the client → the server over stdio (the reference for
//     the throughput target);
//   - floor=direct+2-commits: direct's call between two raw bbolt commits
//     (runtimetest.RawCommits), c=1: the least any write-ahead journal on
//     bbolt adds to an audited call on this disk;
//   - floor=direct-stdio+2-commits: direct-stdio's call between two such
//     commits, shared among concurrent calls (group commit): at c=16, the
//     most an audited gateway on bbolt could serve on this disk, with no
//     HTTP hop at all;
//   - floor=direct-stdio+2-wal-syncs: the same between two commits of a
//     log that syncs once per commit (runtimetest.OpenRawWAL): what would
//     move the two floors above;
//   - via-serve: the client → `mcpledger serve --http 127.0.0.1:0` (the
//     binary, built for the run; audit durability, its bbolt journal with
//     fsync in b.TempDir()) → the same server over stdio;
//   - via-serve-relaxed: the same with serve --relaxed;
//   - via-serve-relaxed,upstream=auto: via-serve-relaxed with the server
//     spoken to under protocolVersion auto, the default, which speaks
//     2026-07-28 to it (the others pin the server at 2025-11-25, as the
//     direct baselines and the peer speak to it);
//   - via-serve-2026: via-serve with the client on go-sdk's default,
//     2026-07-28 (no session: each request carries its _meta and is
//     served by go-sdk's stateless handler, not the fast call path), the
//     server spoken to in 2026-07-28 too;
//   - via-tbxark: the same through the peer, TBXark/mcp-proxy at 4f78891
//     (Go, mark3labs/mcp-go, records nothing), serving Streamable HTTP;
//     the binary bench/tbxark.sh builds, named by MCPLEDGER_BENCH_TBXARK
//     (skipped without it);
//   - manager-stdio, manager-stdio-relaxed: Manager.CallTool in the
//     benchmark process → the server over stdio (pinned to 2025-11-25,
//     as via-serve speaks to it: the plain call), no gateway: the
//     runtime's share of via-serve;
//   - manager-stdio-relaxed,upstream=auto: the same under the default,
//     auto, which speaks 2026-07-28 to the server: what that version
//     costs the runtime and the server, beside manager-stdio-relaxed.
//
// Each reports ns/call (wall time / calls) and p50-ns/p99-ns of the
// per-call latencies. Targets: via-serve adds ≤ 0.5 ms at p50 (audit) and
// ≤ 0.3 ms (relaxed) over direct; at c=16 its throughput is ≥ 0.6 ×
// direct-stdio.
func BenchmarkGateway(b *testing.B) {
	bin := runtimetest.BuildServer(b)
	b.Run("direct", func(b *testing.B) {
		url, _ := runtimetest.StartHTTP(b, bin, nil)
		cs := benchConnect(b, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1})
		benchConcurrency(b, cs, "echo", 0)
	})
	b.Run("direct-stdio", func(b *testing.B) {
		cs := benchConnect(b, &mcp.CommandTransport{Command: exec.Command(bin), TerminateDuration: time.Second})
		benchConcurrency(b, cs, "echo", 0)
	})
	b.Run("floor=direct+2-commits", func(b *testing.B) { // audit's write-ahead on this disk, c=1 only
		url, _ := runtimetest.StartHTTP(b, bin, nil)
		cs := benchConnect(b, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1})
		call := runtimetest.OpenRawCommits(b).Around(func() error {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello ledger"}})
			return err
		})
		b.Run("c=1", func(b *testing.B) { runConcurrent(b, 1, call) })
	})
	b.Run("floor=direct-stdio+2-commits", func(b *testing.B) { // audit's write-ahead, shared at c=16
		benchStdioFloor(b, bin, runtimetest.OpenRawCommits(b))
	})
	b.Run("floor=direct-stdio+2-wal-syncs", func(b *testing.B) { // what a journal syncing once per commit would pay
		benchStdioFloor(b, bin, runtimetest.OpenRawWAL(b))
	})
	b.Run("via-serve", func(b *testing.B) { benchViaServe(b, bin, false, pinned2025) })
	b.Run("via-serve-relaxed", func(b *testing.B) { benchViaServe(b, bin, true, pinned2025) })
	b.Run("via-serve-relaxed,upstream=auto", func(b *testing.B) { benchViaServe(b, bin, true, "auto") })
	b.Run("via-serve-2026", func(b *testing.B) { // the client on 2026-07-28: sessionless requests
		pid, url := startServe(b, map[string]any{"command": bin, "protocolVersion": "2026-07-28"})
		cs := benchConnectVersion(b, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, "")
		benchConcurrency(b, cs, "mcp__srv__echo", pid)
	})
	b.Run("via-tbxark", func(b *testing.B) { benchViaTBXark(b, bin) })
	b.Run("manager-stdio", func(b *testing.B) { benchManagerStdio(b, bin, runtime.Audit, pinned2025) })
	b.Run("manager-stdio-relaxed", func(b *testing.B) { benchManagerStdio(b, bin, runtime.Relaxed, pinned2025) })
	b.Run("manager-stdio-relaxed,upstream=auto", func(b *testing.B) { benchManagerStdio(b, bin, runtime.Relaxed, "auto") })
}

// benchStdioFloor benchmarks direct-stdio's call of the test server bin
// between two commits of floor, at c=1 and c=16 (concurrent calls share
// its commits).
func benchStdioFloor(b *testing.B, bin string, floor *runtimetest.RawCommits) {
	cs := benchConnect(b, &mcp.CommandTransport{Command: exec.Command(bin), TerminateDuration: time.Second})
	call := floor.Around(func() error {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello ledger"}})
		return err
	})
	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) { runConcurrent(b, c, call) })
	}
}

// pinned2025 is the protocol version serve speaks to the server in the
// gateway benchmarks, as the direct baselines and the peer do.
const pinned2025 = "2025-11-25"

// benchViaServe runs the mcpledger binary's serve --http in front of the
// test server (over stdio, as configured, spoken to in upstream: a
// protocolVersion) and benchmarks calls through it: client, gateway and
// server are three processes, as in production.
func benchViaServe(b *testing.B, bin string, relaxed bool, upstream string) {
	var extra []string
	if relaxed {
		extra = append(extra, "--relaxed")
	}
	pid, url := startServe(b, map[string]any{"command": bin, "protocolVersion": upstream}, extra...)
	cs := benchConnect(b, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1})
	benchConcurrency(b, cs, "mcp__srv__echo", pid)
}

// startServe starts the mcpledger binary's serve --http (with extra
// flags) in front of the server srv (its config entry), in a directory of
// its own (journal, XDG config, CLAUDE_CONFIG_DIR: never the developer's),
// and returns its pid and URL; it is stopped (SIGINT, waited for) when
// the benchmark ends. MCPLEDGER_BENCH_SERVE_GOGC sets serve's GOGC alone;
// gwProcsEnv sets GOMAXPROCS for both gateways, serve and the peer.
func startServe(b *testing.B, srv map[string]any, extra ...string) (int, string) {
	dir := b.TempDir()
	mcpledger := runtimetest.BuildMcpledger(b, dir)
	cfg := filepath.Join(dir, "mcp.json")
	js, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"srv": srv}})
	if err := os.WriteFile(cfg, js, 0o600); err != nil {
		b.Fatal(err)
	}
	args := append([]string{"serve", "--http", "127.0.0.1:0", "--mcp-config", cfg, "--workspace", dir, "--watch=false"}, extra...)
	cmd := exec.Command(mcpledger, args...)
	cmd.Env = append(os.Environ(), "MCPLEDGER_JOURNAL="+filepath.Join(dir, "j.db"), "XDG_CONFIG_HOME="+filepath.Join(dir, "xdg"),
		"CLAUDE_CONFIG_DIR="+filepath.Join(dir, "claude"))
	if g := os.Getenv("MCPLEDGER_BENCH_SERVE_GOGC"); g != "" {
		cmd.Env = append(cmd.Env, "GOGC="+g)
	}
	if g := os.Getenv(gwProcsEnv); g != "" {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+g)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	urls := make(chan string, 1)
	done := make(chan struct{})
	go func() { // ends when serve exits
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "serving MCP on "); ok {
				urls <- u
			}
		}
	}()
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		<-done
		cmd.Wait()
	})
	select {
	case u := <-urls:
		return cmd.Process.Pid, u
	case <-done:
		b.Fatal("serve exited")
	case <-time.After(30 * time.Second):
		b.Fatal("serve did not start")
	}
	return 0, ""
}

// gwProcsEnv, when set, is the GOMAXPROCS of both gateway processes (serve
// and the peer), and of neither client nor server: BENCHMARKS.md,
// "Gateway", has what one P does to both on this machine.
const gwProcsEnv = "MCPLEDGER_BENCH_GW_GOMAXPROCS"

// tbxarkEnv names the peer's binary for via-tbxark.
const tbxarkEnv = "MCPLEDGER_BENCH_TBXARK"

// benchViaTBXark runs the peer, TBXark/mcp-proxy, in front of the test
// server over stdio, serving Streamable HTTP on loopback as its config
// says (mcpProxy.type "streamable-http": mark3labs/mcp-go's server,
// stateless), and benchmarks calls through it at its route for the
// server, /srv/mcp. It passes the server's tool names through: the tool
// is echo. TBXark exits on SIGTERM without waiting for its server, so it
// runs in its own process group, in which the cleanup leaves no live
// process (the server, orphaned, is a zombie until PID 1 reaps it).
func benchViaTBXark(b *testing.B, bin string) {
	peer := os.Getenv(tbxarkEnv)
	if peer == "" {
		b.Skip(tbxarkEnv + " is unset: build TBXark/mcp-proxy at 4f78891 with bench/tbxark.sh and set it to the binary's path")
	}
	dir := b.TempDir()
	addr := runtimetest.AddrOutsideEphemeral(b) // TBXark's log does not say which port :0 took
	cfg := filepath.Join(dir, "config.json")
	js, _ := json.Marshal(map[string]any{
		"mcpProxy": map[string]any{"baseURL": "http://" + addr, "addr": addr, "name": "bench", "version": "1.0",
			"type": "streamable-http", "options": map[string]any{"panicIfInvalid": true, "logEnabled": false}},
		"mcpServers": map[string]any{"srv": map[string]any{"command": bin}},
	})
	if err := os.WriteFile(cfg, js, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(peer, "--config", cfg, "--expand-env=false")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if g := os.Getenv(gwProcsEnv); g != "" {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+g)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s (%s): %v", peer, tbxarkEnv, err)
	}
	pgid := cmd.Process.Pid
	routed := make(chan struct{}, 1)
	done := make(chan struct{})
	// logged: its first lines, read once done is closed.
	var logged []string
	go func() { // ends when TBXark exits
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if len(logged) < 100 {
				logged = append(logged, sc.Text())
			}
			if strings.Contains(sc.Text(), "<srv> Handling requests at /srv/") {
				select {
				case routed <- struct{}{}:
				default:
				}
			}
		}
	}()
	stop := func() { // SIGTERM, then the group's SIGKILL for what remains
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
		cmd.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		left, _ := runtimetest.ProcessesInGroup(pgid)
		if left = runtimetest.WaitGone(ctx, left); len(left) > 0 {
			b.Logf("TBXark left %v running after SIGTERM: killing its process group", left)
			syscall.Kill(-pgid, syscall.SIGKILL)
			if left = runtimetest.WaitGone(context.Background(), left); len(left) > 0 {
				b.Errorf("processes %v outlived the benchmark", left)
			}
		}
	}
	b.Cleanup(stop) // after the client's Close (cleanups run last first), so its streams end before Shutdown
	select {
	case <-routed:
	case <-done:
		cmd.Wait()
		b.Fatalf("TBXark exited before serving /srv/; its log:\n%s", strings.Join(logged, "\n"))
	case <-time.After(30 * time.Second):
		b.Fatal("TBXark did not route /srv/ within 30s")
	}
	// It logs the route before its handler is in place, and routes and
	// listens in parallel: until both, a connection is refused or its
	// initialize answered 404.
	endpoint := "http://" + addr + "/srv/mcp"
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Post(endpoint, "application/json", strings.NewReader(`{}`))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				break
			}
			err = fmt.Errorf("%s: %s", endpoint, resp.Status)
		}
		if time.Now().After(deadline) {
			b.Fatalf("TBXark does not serve %s: %v", endpoint, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cs := benchConnect(b, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1})
	benchConcurrency(b, cs, "echo", cmd.Process.Pid)
}

func benchConnect(b *testing.B, t mcp.Transport) *mcp.ClientSession {
	return benchConnectVersion(b, t, "2025-11-25")
}

// benchConnectVersion connects a client pinned to version ("": go-sdk's
// default, 2026-07-28).
func benchConnectVersion(b *testing.B, t mcp.Transport, version string) *mcp.ClientSession {
	b.Helper()
	var o *mcp.ClientSessionOptions
	if version != "" {
		o = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1.0"}, nil).Connect(context.Background(), t, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// benchConcurrency runs the c=1 and c=16 sub-benchmarks of calling tool.
// With gw a gateway's PID, each also reports the gateway's own CPU time
// per call (gw-cpu-ns/call; its upstream server, a child, not counted);
// each reports the benchmark process's, the client's (client-cpu-ns/call:
// a server it started over stdio, a child, not counted either).
func benchConcurrency(b *testing.B, cs *mcp.ClientSession, tool string, gw int) {
	args := map[string]any{"message": "hello ledger"}
	call := func() error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %+v", res.Content)
		}
		return err
	}
	for range 50 { // warm-up: connections, pools, the journal
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			cpu0, self0 := procCPU(b, gw), procCPU(b, os.Getpid())
			runConcurrent(b, c, call)
			if gw > 0 {
				b.ReportMetric(float64((procCPU(b, gw)-cpu0).Nanoseconds())/float64(b.N), "gw-cpu-ns/call")
			}
			b.ReportMetric(float64((procCPU(b, os.Getpid())-self0).Nanoseconds())/float64(b.N), "client-cpu-ns/call")
		})
	}
}

// procCPU returns the user and system CPU time process pid has used (0
// for pid 0), from /proc/PID/stat, in clock ticks of 10 ms: a run of a
// few thousand calls measures it within a few percent.
func procCPU(b *testing.B, pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command (which may hold spaces) in parentheses:
	// state is field 3, utime 14, stime 15.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// runConcurrent makes b.N calls from c goroutines and reports ns/call and
// the per-call p50 and p99.
func runConcurrent(b *testing.B, c int, call func() error) {
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() { // joined below
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := call(); err != nil {
					failed.Store(&err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/call")
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// benchManagerStdio calls the server through Manager.CallTool over stdio,
// without the gateway: the runtime's share of via-serve.
func benchManagerStdio(b *testing.B, bin string, d runtime.Durability, version string) {
	_, adapter := runtimetest.OpenJournal(b)
	c, s := runtimetest.Stdio("srv", bin, nil)
	m, err := runtime.New(adapter, &runtime.Options{Config: runtimetest.ConfigOf(c, s), Seed: 1, PingInterval: -1, Durability: d,
		TerminateGrace: 200 * time.Millisecond, ProtocolVersion: version})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	args := map[string]any{"message": "hello ledger"}
	call := func() error {
		res, err := m.CallTool(ctx, "mcp__srv__echo", args)
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %+v", res.Content)
		}
		return err
	}
	for range 50 {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) { runConcurrent(b, c, call) })
	}
}
