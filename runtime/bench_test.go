package runtime_test

// Benchmarks of what the Manager adds to a tool call, to
// presenting a cached catalog, and to starting stdio servers, each against
// a raw go-sdk baseline. Results and the commands that produced them are
// in BENCHMARKS.md ("runtime").
//
// The stdio benchmarks spawn 20 processes per op: keep b.N small, e.g.
//
//	go test ./runtime -run '^$' -bench 'CallTool' -benchtime=2000x -count 5
//	go test ./runtime -run '^$' -bench 'CatalogFromCache' -benchtime=50x -count 5
//	go test ./runtime -run '^$' -bench 'StartStdio' -benchtime=10x -count 5

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// benchProtocol is the protocol version every raw baseline pins, and the
// Manager with it, so that each compares like with like (the Manager's
// default, auto, speaks 2026-07-28 to these servers: BenchmarkProtocols
// compares the two versions).
const benchProtocol = "2025-11-25"

// callLatencies records per-op durations and reports their median and p99.
type callLatencies []time.Duration

func (l callLatencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	b.ReportMetric(float64(l.percentile(50).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(l.percentile(99).Nanoseconds()), "p99-ns")
}

// percentile returns the pth percentile of l (which must not be empty).
func (l callLatencies) percentile(p int) time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	return s[len(s)*p/100]
}

// BenchmarkCallTool measures one echo call to an in-process go-sdk server:
//
//   - direct: a raw go-sdk client over mcp.NewInMemoryTransports, protocol
//     pinned to 2025-11-25: the floor;
//   - floor=direct+2-commits: the direct call between two raw bbolt
//     commits (runtimetest.RawCommits): what Audit's write-ahead costs on this disk
//     before any of mcpledger's own work;
//   - direct,journal-open: direct, with a store.Journal open and idle in
//     the process (no Manager). go-sdk leaves about 370 KB of garbage per
//     call, so the GC runs every few calls; the journal's resident memory
//     (about 1 MB, its retry window) leaves less room under the GC's
//     4 MB minimum heap goal, so it runs more often and the same raw
//     calls are slower. It separates that effect from the Manager's own
//     work in audit and relaxed, which have such a journal open too;
//   - direct,manager-open: direct, with a started Relaxed Manager (the
//     journal, the echo server in-process) idle in the process: what the
//     Manager's resident memory costs every call of the process, through
//     the same GC effect;
//   - audit, relaxed: through Manager.CallTool with that Durability, the
//     server registered as Options.InProcess and the journal a real bbolt
//     store.Journal (fsync on) in b.TempDir().
//
// Each reports ns/call (mean) and p50-ns/p99-ns of the per-call latencies.
// Targets (at p50): relaxed ≤ 1.3 × direct; audit ≤ direct + 1 ms.
//
// paired,relaxed and paired,audit (benchPairedCalls) time a direct call and
// a Manager call in turn, in one process, and report the difference.
func BenchmarkCallTool(b *testing.B) {
	b.Run("direct", func(b *testing.B) { runBenchCalls(b, directEcho(b)) })
	b.Run("direct,journal-open", func(b *testing.B) { openJournal(b); runBenchCalls(b, directEcho(b)) })
	b.Run("direct,manager-open", func(b *testing.B) { managerEcho(b, runtime.Relaxed); runBenchCalls(b, directEcho(b)) })
	b.Run("floor=direct+2-commits", func(b *testing.B) { runBenchCalls(b, runtimetest.OpenRawCommits(b).Around(directEcho(b))) })
	b.Run("audit", func(b *testing.B) { benchManagerCalls(b, runtime.Audit) })
	b.Run("relaxed", func(b *testing.B) { benchManagerCalls(b, runtime.Relaxed) })
	b.Run("paired,relaxed", func(b *testing.B) { benchPairedCalls(b, runtime.Relaxed) })
	b.Run("paired,audit", func(b *testing.B) { benchPairedCalls(b, runtime.Audit) })
}

// directEcho connects a raw go-sdk client to an in-process echo server
// over in-memory transports and returns one echo call.
func directEcho(b *testing.B) func() error { return directEchoAt(b, benchProtocol) }

// directEchoAt is directEcho with the client pinned to protocol version
// proto.
func directEchoAt(b *testing.B, proto string) func() error {
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := echoServer("mem").Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1.0"}, nil)
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: proto})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != proto {
		b.Fatalf("negotiated %q, want %q", got, proto)
	}
	args := map[string]any{"message": "hello ledger"}
	return func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %+v", res.Content)
		}
		return err
	}
}

func benchManagerCalls(b *testing.B, d runtime.Durability) {
	runBenchCalls(b, managerEcho(b, d))
}

// managerEcho starts a Manager with durability d over a real store.Journal
// and the echo server in-process, and returns one echo call through it.
// The Manager pins 2025-11-25, as the raw baselines do.
func managerEcho(b *testing.B, d runtime.Durability) func() error {
	return managerEchoAt(b, d, benchProtocol)
}

// managerEchoAt is managerEcho with Options.ProtocolVersion set to proto.
func managerEchoAt(b *testing.B, d runtime.Durability, proto string) func() error {
	_, adapter := openJournal(b)
	m, err := runtime.New(adapter, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": echoServer("mem")},
		Seed: 1, PingInterval: -1, Durability: d, ProtocolVersion: proto})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rep, err := m.Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	if !slices.Equal(rep.Ready, []string{"mem"}) {
		b.Fatalf("not ready: %+v", rep)
	}
	args := map[string]any{"message": "hello ledger"}
	return func() error {
		res, err := m.CallTool(ctx, "mcp__mem__echo", args)
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %+v", res.Content)
		}
		return err
	}
}

// benchPairedCalls runs a direct call and a call through a Manager with
// durability d in turn, b.N pairs in one process, the order swapped every
// pair. Both see the same heap, the same GC cycles and the same phase of a
// noisy VM, which separate runs of direct and relaxed do not: on 2 cores
// go-sdk's garbage (about 370 KB per call) makes the GC run every few
// calls, and a run's p50 moves by tens of percent with it. The ratio of
// the two p50s (ratio-p50) and their difference (added-p50-ns) are what
// the Manager adds to one call; direct-p50-ns includes what the Manager's
// presence in the process costs every call, which direct,manager-open
// measures on its own.
func benchPairedCalls(b *testing.B, d runtime.Durability) {
	direct, managed := directEcho(b), managerEcho(b, d)
	for range 50 {
		if err := direct(); err != nil {
			b.Fatal(err)
		}
		if err := managed(); err != nil {
			b.Fatal(err)
		}
	}
	dl, ml := make(callLatencies, b.N), make(callLatencies, b.N)
	timed := func(call func() error, into *time.Duration) {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		*into = time.Since(t0)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			timed(direct, &dl[i])
			timed(managed, &ml[i])
		} else {
			timed(managed, &ml[i])
			timed(direct, &dl[i])
		}
	}
	b.StopTimer()
	dp, mp := dl.percentile(50), ml.percentile(50)
	b.ReportMetric(float64(dp.Nanoseconds()), "direct-p50-ns")
	b.ReportMetric(float64(mp.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64((mp - dp).Nanoseconds()), "added-p50-ns")
	b.ReportMetric(float64(mp)/float64(dp), "ratio-p50")
}

// runBenchCalls runs call b.N times after a short warm-up and reports ns/call
// and the per-call percentiles.
func runBenchCalls(b *testing.B, call func() error) {
	for range 50 {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make(callLatencies, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/call")
	lat.report(b)
}

// BenchmarkCatalogFromCache measures what a new session pays to present
// the deferred tools of 100 servers × 20 tools from the journal's tool
// cache: the fold of the journal's history (store.Journal.ReadAll from
// bbolt into projections.NewSet(), as Manager.loadHistory does), then the
// new session's session.started and config.observed (same fingerprints,
// so every tool is Deferred), then the status rows and Catalog.View() the
// Manager's View is built from. The prior session is journaled by a real
// Manager supervising 100 in-process servers. Extra metrics split the op:
// fold-ns (read + apply) and view-ns. Target ≤ 20 ms per op.
func BenchmarkCatalogFromCache(b *testing.B) {
	const nServers, nTools = 100, 20
	j, adapter := openJournal(b)
	servers := map[string]*mcp.Server{}
	for i := range nServers {
		servers[fmt.Sprintf("server-%03d", i)] = benchToolServer(fmt.Sprintf("server-%03d", i), nTools)
	}
	ctx := context.Background()
	m, err := runtime.New(adapter, &runtime.Options{InProcess: servers, Seed: 1, PingInterval: -1, StartupTimeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	rep, err := m.Start(ctx)
	if err != nil || len(rep.Ready) != nServers {
		b.Fatalf("prior session: %v; ready %d of %d", err, len(rep.Ready), nServers)
	}
	if n := len(m.Tools()); n != nServers*nTools {
		b.Fatalf("prior session lists %d tools, want %d", n, nServers*nTools)
	}
	prior := m.Session()
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}

	// The new session's first two inputs, as the next Manager would
	// journal them: its session.started and the same config reading.
	var start, cfg events.Event
	total := 0
	for _, e := range sessionEvents(b, j, prior) {
		total++
		switch e.Kind {
		case events.KindSessionStarted:
			start = e
		case events.KindConfigObserved:
			if cfg.Kind == "" {
				cfg = e
			}
		}
	}
	if start.Kind == "" || cfg.Kind == "" {
		b.Fatal("prior session has no session.started or config.observed")
	}
	sid, now := events.NewID(), time.Now().UnixNano()
	start.ID, start.Session, start.Seq, start.GPos, start.Time = events.NewID(), sid, 1, 0, now
	cfg.ID, cfg.Session, cfg.Seq, cfg.GPos, cfg.Time = events.NewID(), sid, 2, 0, now

	var fold, view time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		set := projections.NewSet()
		if err := j.ReadAll(ctx, 0, func(e events.Event) error { set.Apply(e); return nil }); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		set.Apply(start)
		set.Apply(cfg)
		status := set.Status.Servers()
		cv := set.Catalog.View()
		t2 := time.Now()
		fold += t1.Sub(t0)
		view += t2.Sub(t1)

		b.StopTimer()
		deferred := 0
		for _, t := range cv.Tools {
			if t.Deferred {
				deferred++
			}
		}
		if deferred != nServers*nTools || len(status) != nServers {
			b.Fatalf("view has %d deferred tools (of %d) and %d servers; want %d and %d",
				deferred, len(cv.Tools), len(status), nServers*nTools, nServers)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(fold.Nanoseconds())/float64(b.N), "fold-ns")
	b.ReportMetric(float64(view.Nanoseconds())/float64(b.N), "view-ns")
	b.ReportMetric(float64(total), "events")
}

type benchToolArgs struct {
	Query string `json:"query" jsonschema:"what to look for"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many results"`
}

// benchToolServer returns an in-process server with n small tools.
func benchToolServer(name string, n int) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1.0"}, nil)
	for k := range n {
		mcp.AddTool(s, &mcp.Tool{Name: fmt.Sprintf("tool_%02d", k), Description: fmt.Sprintf("Tool %d of %s: looks things up.", k, name)},
			func(ctx context.Context, req *mcp.CallToolRequest, in benchToolArgs) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Query}}}, nil, nil
			})
	}
	return s
}

// BenchmarkStartStdio measures starting 20 stdio servers (the test server
// from runtimetest.BuildServer), per op:
//
//   - servers=20: Manager.Start with the 20 servers in its config, timed
//     until all 20 are ready, each op on a fresh bbolt journal (fsync on,
//     opened outside the timer), so no op folds the history of another;
//   - servers=20,shim: the same with each server started behind the
//     mcpledger binary as its shim (Options.ShimPath), as mcpledger run
//     and serve start them: one more process per server;
//   - baseline=direct-20: 20 raw go-sdk clients, in parallel, each
//     spawning the binary with mcp.CommandTransport (protocol pinned),
//     timed until all 20 are initialized.
//
// Shutdown (Manager.Close, ClientSession.Close) runs outside the timer, and
// every op checks that no process of the op is left. Each op spawns 20
// processes: use -benchtime=10x. Target: servers=20 ≤ 1.5 × baseline.
func BenchmarkStartStdio(b *testing.B) {
	const n = 20
	bin := runtimetest.BuildServer(b)
	b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) { benchStartManager(b, bin, n, "") })
	// As mcpledger run and serve start servers: each behind the mcpledger
	// binary as its shim (Options.ShimPath), one more process per server.
	b.Run(fmt.Sprintf("servers=%d,shim", n), func(b *testing.B) {
		benchStartManager(b, bin, n, runtimetest.BuildMcpledger(b, b.TempDir()))
	})
	b.Run(fmt.Sprintf("baseline=direct-%d", n), func(b *testing.B) {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1.0"}, nil)
		lat := make(callLatencies, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			ctx := context.Background()
			sessions := make([]*mcp.ClientSession, n)
			cmds := make([]*exec.Cmd, n)
			errs := make(chan error, n)
			t0 := time.Now()
			for k := range n {
				go func() {
					cmd := exec.Command(bin)
					cmd.Env = append(cmd.Environ(), fmt.Sprintf("MCPTEST_NAME=s%02d", k))
					cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
					cmds[k] = cmd
					cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second},
						&mcp.ClientSessionOptions{ProtocolVersion: benchProtocol})
					sessions[k] = cs
					errs <- err
				}()
			}
			var failed error
			for range n {
				if err := <-errs; err != nil && failed == nil {
					failed = err
				}
			}
			lat = append(lat, time.Since(t0))
			b.StopTimer()
			var pids []int
			for k := range n {
				if sessions[k] != nil {
					_ = sessions[k].Close()
				}
				if p := cmds[k].Process; p != nil {
					pids = append(pids, p.Pid)
					_ = syscall.Kill(-p.Pid, syscall.SIGKILL) // the group, in case Close left anything
				}
			}
			benchCheckGone(b, pids)
			if failed != nil {
				b.Fatal(failed)
			}
			b.StartTimer()
		}
		b.StopTimer()
		lat.report(b)
	})
}

// benchStartManager times Manager.Start of n stdio servers until all are
// ready (see BenchmarkStartStdio), each behind shim when it is set, the
// protocol pinned to 2025-11-25 as the raw baseline pins it.
func benchStartManager(b *testing.B, bin string, n int, shim string) {
	benchStart(b, startBench{bin: bin, n: n, shim: shim, proto: benchProtocol})
}

// startBench is one way of starting servers that benchStart times.
type startBench struct {
	bin  string // the test server
	n    int    // how many
	shim string // the mcpledger binary to start each behind, or ""
	// proto is Options.ProtocolVersion ("auto", a version).
	proto string
	// env is added to each server's environment.
	env []string
	// known: every op opens the same journal, which a first session
	// (untimed) recorded, so the Manager knows each server's version;
	// otherwise each op has a fresh journal.
	known bool
	// want, if set, is the version every server must have spoken.
	want string
}

// benchStart times Manager.Start of sb.n stdio servers until all are
// ready, each op on a fresh bbolt journal (fsync on, opened outside the
// timer) unless sb.known.
func benchStart(b *testing.B, sb startBench) {
	bin, n := sb.bin, sb.n
	var entries []any
	for i := range n {
		name := fmt.Sprintf("s%02d", i)
		c, s := stdio(name, bin, nil, append([]string{"MCPTEST_NAME=" + name}, sb.env...)...)
		entries = append(entries, c, s)
	}
	opts := fastOpts(configOf(entries...))
	opts.ShimPath = sb.shim
	opts.ProtocolVersion = sb.proto
	dir := b.TempDir()
	// once starts the servers on the op's journal and returns how long
	// it took them all to be ready; the rest is outside the timer.
	once := func(i int) time.Duration {
		path := filepath.Join(dir, fmt.Sprintf("journal-%d.db", i))
		if sb.known {
			path = filepath.Join(dir, "journal.db")
		}
		j, err := store.Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		m, err := runtime.New(storeJournal{J: j}, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if _, err := m.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		v := benchWaitReady(b, m, n)
		took := time.Since(t0)
		b.StopTimer()
		var pids []int
		for _, s := range v.Status {
			pids = append(pids, s.PID)
			if sb.want != "" && s.ProtocolVersion != sb.want {
				b.Errorf("%s speaks %q, want %s", s.Name, s.ProtocolVersion, sb.want)
			}
		}
		if err := m.Close(); err != nil {
			b.Error(err)
		}
		if err := j.Close(); err != nil {
			b.Error(err)
		}
		benchCheckGone(b, pids)
		return took
	}
	b.StopTimer()
	if sb.known {
		once(-1) // the session that makes each server's version known
	}
	lat := make(callLatencies, 0, b.N)
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		lat = append(lat, once(i))
	}
	lat.report(b)
}

// benchWaitReady waits until n servers are ready and returns that view.
func benchWaitReady(b *testing.B, m *runtime.Manager, n int) *runtime.View {
	b.Helper()
	views, cancel := m.Subscribe()
	defer cancel()
	deadline := time.After(30 * time.Second)
	for {
		v := m.Snapshot()
		ready := 0
		for _, s := range v.Status {
			if s.State == events.StateReady {
				ready++
			}
		}
		if ready == n && len(v.Status) == n {
			return v
		}
		select {
		case <-views:
		case <-deadline:
			b.Fatalf("not all %d servers ready after 30s: %+v", n, m.Status())
		}
	}
}

// benchCheckGone fails the benchmark if any of pids (process group leaders) or
// their groups are still running.
func benchCheckGone(b *testing.B, pids []int) {
	b.Helper()
	if left := runtimetest.WaitGone(context.Background(), pids); len(left) > 0 {
		b.Errorf("processes left running: %v", left)
	}
	for _, p := range pids {
		if left, _ := runtimetest.ProcessesInGroup(p); len(left) > 0 {
			b.Errorf("group %d has processes left: %v", p, left)
			_ = syscall.Kill(-p, syscall.SIGKILL)
		}
	}
}
