package runtime_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

var (
	soakRun      = flag.Bool("soak", false, "run TestSoak (a few minutes)")
	soakDuration = flag.Duration("soak.duration", 3*time.Minute, "TestSoak: how long calls and crashes go on")
	soakServers  = flag.Int("soak.servers", 50, "TestSoak: servers in all (3 HTTP and 3 in-process, the rest stdio)")
	soakWorkers  = flag.Int("soak.workers", 8, "TestSoak: goroutines making calls")
	soakCrashes  = flag.Duration("soak.crash-every", time.Second, "TestSoak: how often a random stdio server is made to exit mid-call")
)

// TestSoak (flag-gated: go test ./runtime -run TestSoak -soak
// -soak.duration 3m) supervises 50 servers (stdio test servers, a few
// HTTP test servers and in-process servers) while several goroutines call
// them at random and a stdio server is made to exit mid-call every
// second, and an HTTP server is restarted on its address now and then.
// Afterwards: every server is ready again; after Close, goroutines and
// heap are back to their level before Start (with a tolerance, after a
// settle), no process of any server group is left, every call.started
// has its call.finished, every call that returned a result has its
// call.finished, the journal verifies and the session replays. It logs
// the figures RELIABILITY.md quotes.
func TestSoak(t *testing.T) {
	if !*soakRun {
		t.Skip("the soak test runs with -soak (see RELIABILITY.md)")
	}
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)

	// The servers.
	const nHTTP, nInProc = 3, 3
	nStdio := *soakServers - nHTTP - nInProc
	if nStdio < 1 {
		t.Fatalf("-soak.servers %d: want more than %d", *soakServers, nHTTP+nInProc)
	}
	var entries []any
	var stdioNames, allNames []string
	for i := range nStdio {
		name := fmt.Sprintf("s%02d", i)
		c, s := stdio(name, bin, nil, "MCPTEST_NAME="+name)
		entries = append(entries, c, s)
		stdioNames = append(stdioNames, name)
	}
	httpAddr, httpPID := map[string]string{}, map[string]int{}
	for i := range nHTTP {
		name := fmt.Sprintf("h%d", i)
		// Restarts reuse the address: a port below the ephemeral range,
		// which no dial can take while its server is down.
		url, cmd, err := startHTTPOn(t, bin, runtimetest.AddrOutsideEphemeral(t))
		if err != nil {
			t.Fatal(err)
		}
		httpAddr[name] = strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
		httpPID[name] = cmd.Process.Pid
		c, s := remote(name, events.TransportHTTP, url, nil)
		entries = append(entries, c, s)
	}
	inproc := map[string]*mcp.Server{}
	for i := range nInProc {
		name := fmt.Sprintf("m%d", i)
		inproc[name] = echoServer(name)
	}
	for i := 0; i < len(entries); i += 2 {
		allNames = append(allNames, entries[i].(events.ServerConfig).Name)
	}
	for name := range inproc {
		allNames = append(allNames, name)
	}
	o := fastOpts(configOf(entries...))
	o.InProcess = inproc
	o.StartupTimeout = 30 * time.Second
	o.PingInterval, o.PingTimeout = time.Second, 2*time.Second
	o.Decider = events.DeciderOptions{BackoffBaseMs: 20, BackoffMaxMs: 200, MaxAttempts: 1000, StormLimit: fsm.MaxStormLimit, StormWindowMs: 1, PingFailures: 3}

	settleGC := func() (int, uint64) {
		goruntime.GC()
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		return goruntime.NumGoroutine(), ms.HeapInuse
	}
	g0, heap0 := settleGC()

	m, err := runtime.New(adapter, o)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
	}()
	t0 := time.Now()
	rep, err := m.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "every server ready", func(v *runtime.View) bool { return allReady(v, allNames) })
	t.Logf("%d servers ready after %v (Start returned after %v with %d ready)", len(allNames), time.Since(t0).Round(time.Millisecond), rep.Elapsed.Round(time.Millisecond), len(rep.Ready))

	// Calls.
	var (
		calls, okCalls, toolErrors, failed, crashCalls atomic.Int64
		ackMu                                          sync.Mutex
		acked                                          [][16]byte // call IDs of calls that returned a result (16 bytes each: the test's own heap counts)
		errKinds                                       = map[string]int{}
		otherErrs                                      []string
	)
	deadline := time.Now().Add(*soakDuration)
	var wg sync.WaitGroup
	for w := range *soakWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for time.Now().Before(deadline) {
				server := allNames[rng.IntN(len(allNames))]
				tool, args := "echo", any(map[string]any{"message": fmt.Sprintf("w%d-%d", w, calls.Load())})
				if server[0] == 's' || server[0] == 'h' {
					switch n := rng.IntN(20); {
					case n < 2:
						tool, args = "slow", map[string]any{"ms": rng.IntN(50)}
					case n < 3:
						tool, args = "big", map[string]any{"bytes": 100_000}
					case n < 5:
						tool, args = "add", map[string]any{"a": n, "b": 1}
					case n < 6:
						tool, args = "counter", nil
					}
				}
				calls.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				r, err := m.CallToolWith(ctx, "mcp__"+server+"__"+tool, args, nil)
				cancel()
				switch {
				case err == nil:
					okCalls.Add(1)
					if r.Result.IsError {
						toolErrors.Add(1)
					}
				default:
					failed.Add(1)
					k := errKind(err)
					ackMu.Lock()
					errKinds[k]++
					if k == "other" && len(otherErrs) < 5 {
						otherErrs = append(otherErrs, err.Error())
					}
					ackMu.Unlock()
				}
				if r != nil && r.CallID != "" {
					id := uuid.MustParse(r.CallID)
					ackMu.Lock()
					acked = append(acked, id)
					ackMu.Unlock()
				}
			}
		})
	}
	// Crashes: a random ready stdio server exits mid-call.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(99, uint64(time.Now().UnixNano())))
		tick := time.NewTicker(*soakCrashes)
		defer tick.Stop()
		for time.Now().Before(deadline) {
			<-tick.C
			name := stdioNames[rng.IntN(len(stdioNames))]
			if st, _ := m.Snapshot().Server(name); st.State != events.StateReady {
				continue
			}
			crashCalls.Add(1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = m.CallTool(ctx, "mcp__"+name+"__exit", map[string]any{"code": 40 + rng.IntN(10)})
			cancel()
		}
	})
	// HTTP restarts: every 20 s one HTTP server is killed and started again
	// on its address (its MCP session is lost).
	var httpRestarts atomic.Int64
	wg.Go(func() {
		for i := 0; time.Now().Add(20 * time.Second).Before(deadline); i++ {
			time.Sleep(20 * time.Second)
			name := fmt.Sprintf("h%d", i%nHTTP)
			_ = syscall.Kill(-httpPID[name], syscall.SIGKILL)
			runtimetest.WaitGone(context.Background(), []int{httpPID[name]})
			_, cmd, err := startHTTPOn(t, bin, httpAddr[name])
			if err != nil {
				t.Error(err) // not Fatal: this is not the test's goroutine
				return
			}
			httpPID[name] = cmd.Process.Pid
			httpRestarts.Add(1)
		}
	})
	wg.Wait()
	elapsed := time.Since(t0)

	// Recovery: every server ready again.
	waitForLong(t, m, 60*time.Second, "every server ready again", func(v *runtime.View) bool { return allReady(v, allNames) })
	gLoaded := goruntime.NumGoroutine()

	sid := m.Session()
	t1 := time.Now()
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	closed = true
	closeTook := time.Since(t1)
	m = nil // a closed Manager is garbage once dropped

	// Goroutines and heap back to baseline.
	var g1 int
	var heap1 uint64
	for settle := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		g1, heap1 = settleGC()
		if (g1 <= g0+soakGoroutineSlack && heap1 <= heap0+soakHeapSlack) || time.Now().After(settle) {
			break
		}
	}
	if g1 > g0+soakGoroutineSlack {
		buf := make([]byte, 4<<20)
		t.Errorf("goroutines: %d before Start, %d after Close (slack %d):\n%s", g0, g1, soakGoroutineSlack, buf[:goruntime.Stack(buf, true)])
	}
	if heap1 > heap0+soakHeapSlack {
		t.Errorf("heap in use: %.1f MiB before Start, %.1f MiB after Close (slack %d MiB)", float64(heap0)/(1<<20), float64(heap1)/(1<<20), soakHeapSlack>>20)
	}

	evs := sessionEvents(t, j, sid)
	noLeaks(t, "after Close", spawnedGroups(evs))

	// Nothing lost.
	finished := map[string]string{}
	var started []string
	spawned, exits, unexpected, relaunches := 0, 0, 0, 0
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case *events.ProcessSpawned:
			spawned++
		case *events.CallStarted:
			started = append(started, p.CallID)
		case *events.CallFinished:
			finished[p.CallID] = p.Outcome
		case *events.ProcessExited:
			exits++
			if !p.Expected {
				unexpected++
			}
		case *events.ServerTransitioned:
			if p.To == events.StateReady && p.Attempt > 1 {
				relaunches++
			}
		}
	}
	dangling := 0
	for _, id := range started {
		if _, ok := finished[id]; !ok {
			dangling++
		}
	}
	lost := 0
	for _, id := range acked {
		if _, ok := finished[uuid.UUID(id).String()]; !ok {
			lost++
		}
	}
	if spawned != exits {
		t.Errorf("%d processes spawned, %d exits journaled", spawned, exits)
	}
	if dangling > 0 || lost > 0 {
		t.Errorf("%d call.started without call.finished; %d calls that returned a result without call.finished", dangling, lost)
	}
	if _, err := j.Verify(context.Background()); err != nil {
		t.Errorf("journal verify: %v", err)
	}
	tv := time.Now()
	if err := replay.Verify(context.Background(), j, sid); err != nil {
		t.Errorf("the session does not replay: %v", err)
	}
	replayTook := time.Since(tv)
	if unexpected == 0 {
		t.Error("no crash happened")
	}

	t.Logf("soak: %d servers (%d stdio, %d HTTP, %d in-process), %d workers, %v of calls (%v in all)",
		len(allNames), nStdio, nHTTP, nInProc, *soakWorkers, *soakDuration, elapsed.Round(time.Second))
	t.Logf("calls: %d made, %d returned a result (%d of them tool errors), %d failed %v; %.0f calls/s",
		calls.Load(), okCalls.Load(), toolErrors.Load(), failed.Load(), errKinds, float64(calls.Load())/elapsed.Seconds())
	if len(otherErrs) > 0 {
		t.Logf("other errors (first %d): %s", len(otherErrs), strings.Join(otherErrs, "; "))
	}
	t.Logf("faults: %d exit calls, %d unexpected process exits (crashes survived), %d HTTP restarts, %d relaunches back to ready; %d processes spawned, %d exits journaled",
		crashCalls.Load(), unexpected, httpRestarts.Load(), relaunches, spawned, exits)
	t.Logf("journal: %d events, %d call.started, %d without call.finished, %d returned calls without call.finished (losses); verify ok, replay %v",
		len(evs), len(started), dangling, lost, replayTook.Round(time.Millisecond))
	t.Logf("resources: goroutines %d before Start, %d loaded, %d after Close; heap in use %.1f MiB before Start, %.1f MiB after Close; Close took %v",
		g0, gLoaded, g1, float64(heap0)/(1<<20), float64(heap1)/(1<<20), closeTook.Round(time.Millisecond))
}

// Tolerances for "back to baseline" after Close.
const (
	soakGoroutineSlack = 5
	soakHeapSlack      = 16 << 20
)

func allReady(v *runtime.View, names []string) bool {
	for _, n := range names {
		if st, ok := v.Server(n); !ok || st.State != events.StateReady {
			return false
		}
	}
	return true
}

// waitForLong is waitFor with a deadline of d.
func waitForLong(t *testing.T, m *runtime.Manager, d time.Duration, what string, cond func(v *runtime.View) bool) {
	t.Helper()
	views, cancel := m.Subscribe()
	defer cancel()
	deadline := time.After(d)
	for {
		select {
		case v := <-views:
			if cond(v) {
				return
			}
		case <-deadline:
			var bad []string
			for _, s := range m.Status() {
				if s.State != events.StateReady {
					bad = append(bad, statusLine(s))
				}
			}
			t.Fatalf("timed out waiting for %s; not ready: %s", what, strings.Join(bad, "; "))
		}
	}
}

func statusLine(s projections.ServerStatus) string {
	return s.Name + " " + string(s.State) + " " + string(s.Reason) + " attempt " + strconv.Itoa(s.Attempt) + ": " + s.Error
}

// errKind names an error by its class, for the summary.
func errKind(err error) string {
	var ue *runtime.UnavailableError
	switch {
	case errors.As(err, &ue):
		return "unavailable:" + string(ue.State)
	case errors.Is(err, runtime.ErrOutcomeUnknown):
		return "outcome_unknown"
	case errors.Is(err, runtime.ErrUnknownTool):
		return "unknown_tool"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, runtime.ErrShuttingDown):
		return "shutting_down"
	}
	return "other"
}
