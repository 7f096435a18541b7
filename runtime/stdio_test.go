package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	gort "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdio returns a config entry and its resolved spec for the test server
// run with env (KEY=VALUE). The server's command may be wrapped.
func stdio(name, command string, args []string, env ...string) (events.ServerConfig, config.Spec) {
	return runtimetest.Stdio(name, command, args, env...)
}

func configOf(entries ...any) func() config.Reading { return runtimetest.ConfigOf(entries...) }

// fastOpts are options for tests: short backoff, small grace, no pings.
func fastOpts(cfg func() config.Reading) *runtime.Options {
	return &runtime.Options{Config: cfg, Seed: 1, TerminateGrace: 200 * time.Millisecond, PingInterval: -1,
		StartupTimeout: 10 * time.Second,
		Decider:        events.DeciderOptions{BackoffBaseMs: 20, BackoffMaxMs: 50, MaxAttempts: 3, StormLimit: 50}}
}

// waitFor waits until cond holds for the manager's view.
func waitFor(t *testing.T, m *runtime.Manager, what string, cond func(v *runtime.View) bool) *runtime.View {
	t.Helper()
	views, cancel := m.Subscribe()
	defer cancel()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case v := <-views:
			if cond(v) {
				return v
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s; status %+v", what, m.Status())
		}
	}
}

func state(v *runtime.View, name string) projections.ServerStatus {
	s, _ := v.Server(name)
	return s
}

func TestStdioLifecycleAndNoLeaks(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	c1, s1 := stdio("good", bin, nil, "MCPTEST_NAME=good")
	m, _ := runtime.New(adapter, fastOpts(configOf(c1, s1)))
	rep, err := m.Start(t.Context())
	if err != nil || !slices.Equal(rep.Ready, []string{"good"}) {
		t.Fatalf("start: %v %+v", err, rep)
	}
	st := state(m.Snapshot(), "good")
	if st.PID == 0 || st.ProtocolVersion != "2026-07-28" { // auto, and go-sdk's server offers it
		t.Errorf("status %+v", st)
	}
	res, err := m.CallTool(t.Context(), "mcp__good__echo", map[string]any{"message": "over stdio"})
	if err != nil || res.IsError {
		t.Fatalf("call %v %+v", err, res)
	}
	pgid := st.PID
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := runtimetest.ProcessesInGroup(pgid); len(left) > 0 {
		t.Errorf("processes left in group %d after Close: %v", pgid, left)
	}
	evs := sessionEvents(t, j, m.Session())
	var exited *events.ProcessExited
	for _, e := range evs {
		if p, ok := e.Payload.(*events.ProcessExited); ok {
			exited = p
		}
	}
	if exited == nil || !exited.Expected {
		t.Errorf("no expected process.exited journaled: %+v", exited)
	}
}

func TestStdioCrashReconnectsAndNeighbourUnaffected(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	cc, sc := stdio("crashy", bin, nil, "MCPTEST_CRASH_AFTER=1")
	cg, sg := stdio("good", bin, nil)
	m, _ := runtime.New(adapter, fastOpts(configOf(cc, sc, cg, sg)))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	first := state(m.Snapshot(), "crashy")
	// The first call is served; the server then exits with code 4.
	_, _ = m.CallTool(t.Context(), "mcp__crashy__echo", map[string]any{"message": "1"})
	v := waitFor(t, m, "crashy back with a new process", func(v *runtime.View) bool {
		s := state(v, "crashy")
		return s.State == events.StateReady && s.Attempt > first.Attempt
	})
	if s := state(v, "crashy"); s.Tools == 0 {
		t.Errorf("tools not re-listed after reconnect: %+v", s)
	}
	// The neighbour kept its session and answers.
	if g := state(v, "good"); g.Attempt != 1 || g.State != events.StateReady {
		t.Errorf("neighbour disturbed: %+v", g)
	}
	if _, err := m.CallTool(t.Context(), "mcp__good__echo", map[string]any{"message": "still here"}); err != nil {
		t.Errorf("neighbour call: %v", err)
	}
	evs := sessionEvents(t, j, m.Session())
	got := kinds(evs, "crashy")
	if !inOrder(got, "process.exited", "server.transitioned:reconnecting", "timer.scheduled", "timer.fired", "server.transitioned:launching") {
		t.Errorf("crash not journaled as exit → reconnecting → backoff → relaunch:\n%s", strings.Join(got, " "))
	}
}

func TestStdioCrashOnStartEndsFailedWithStderr(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	c, s := stdio("dead", bin, nil, "MCPTEST_CRASH_ON_START=1")
	m, _ := runtime.New(adapter, fastOpts(configOf(c, s)))
	rep, err := m.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !slices.Equal(rep.Failed, []string{"dead"}) {
		v := waitFor(t, m, "dead failed", func(v *runtime.View) bool { return state(v, "dead").State == events.StateFailed })
		_ = v
	}
	st := state(m.Snapshot(), "dead")
	if st.Reason != events.ReasonExhausted || !strings.Contains(st.Error, "exit") {
		t.Errorf("status %+v", st)
	}
	launches, stderrSeen := 0, false
	for _, e := range sessionEvents(t, j, m.Session()) {
		switch p := e.Payload.(type) {
		case *events.ServerTransitioned:
			if p.To == events.StateLaunching {
				launches++
			}
		case *events.ProcessExited:
			stderrSeen = stderrSeen || slices.ContainsFunc(p.StderrTail, func(l string) bool { return strings.Contains(l, "crashing on start") })
		}
	}
	if launches != 3 { // MaxAttempts=3 counts every launch of the episode
		t.Errorf("launches = %d, want 3", launches)
	}
	if !stderrSeen {
		t.Error("stderr tail not journaled on exit")
	}
	// Calling a tool of a failed server says why and what to do.
	_, err = m.CallTool(t.Context(), "mcp__dead__echo", nil)
	if err == nil || !strings.Contains(err.Error(), "mcpledger reconnect dead") {
		t.Errorf("call to failed server: %v", err)
	}
}

func TestStdioHangInInitializeTimesOut(t *testing.T) {
	// When the handshake times out, go-sdk closes the server's stdin and
	// the server (like most) exits 0 at EOF. That exit must not be taken
	// for the cause. "exit-first" holds the connection's report back so
	// the exit is reaped first: under load that order happened by itself
	// and the journal said "exited with code 0" instead of the timeout.
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{{"plain", 0}, {"exit-first", 300 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			bin := runtimetest.BuildServer(t)
			j, adapter := openJournal(t)
			c, s := stdio("hang", bin, nil, "MCPTEST_HANG_INITIALIZE=1")
			o := fastOpts(configOf(c, s))
			o.StartupTimeout = 300 * time.Millisecond
			o.Decider.MaxAttempts = 1
			m, _ := runtime.New(adapter, o)
			if tc.delay > 0 {
				runtime.SetAfterConnect(m, func(err error) {
					if err != nil {
						time.Sleep(tc.delay)
					}
				})
			}
			if _, err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			v := waitFor(t, m, "hang failed", func(v *runtime.View) bool { return state(v, "hang").State == events.StateFailed })
			pid := 0
			var timeouts int
			evs := sessionEvents(t, j, m.Session())
			for _, e := range evs {
				switch p := e.Payload.(type) {
				case *events.ConnectFailed:
					if p.Error.Class == events.ErrTimeout {
						timeouts++
					}
				case *events.ProcessSpawned:
					pid = p.PID
				case *events.ProcessExited:
					if !p.Expected {
						t.Errorf("the exit after the timeout is journaled as unexpected: %+v", p)
					}
				}
			}
			if timeouts == 0 {
				t.Errorf("no connect.failed with class timeout; the session's events:\n%s", dumpEvents(evs))
			}
			if st := state(v, "hang"); !strings.Contains(st.Error, "deadline exceeded") {
				t.Errorf("status error %q, want the handshake's deadline", st.Error)
			}
			m.Close()
			if left := runtimetest.WaitGone(context.Background(), []int{pid}); len(left) > 0 {
				t.Errorf("hung server survived: %v", left)
			}
		})
	}
}

func TestCloseKillsWrapperGrandchildren(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	_, adapter := openJournal(t)
	// sh -c runs the server as a child of the shell: killing only the shell
	// would orphan it (go-sdk-notes.md §4). The server ignores stdin EOF and
	// SIGTERM and spawns a child of its own.
	c, s := stdio("wrapped", "/bin/sh", []string{"-c", bin + "; :"}, "MCPTEST_SPAWN_CHILD=1", "MCPTEST_IGNORE_EOF=1", "MCPTEST_IGNORE_SIGTERM=1")
	m, _ := runtime.New(adapter, fastOpts(configOf(c, s)))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := state(m.Snapshot(), "wrapped")
	if st.State != events.StateReady {
		t.Fatalf("not ready: %+v", st)
	}
	var before []int
	for i := 0; i < 50 && len(before) < 3; i++ {
		before, _ = runtimetest.ProcessesInGroup(st.PID)
		time.Sleep(20 * time.Millisecond)
	}
	if len(before) < 3 {
		t.Fatalf("want shell, server and grandchild in group %d, have %v", st.PID, before)
	}
	t0 := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("Close took %v", d)
	}
	if left := runtimetest.WaitGone(context.Background(), before); len(left) > 0 {
		t.Errorf("survivors after Close: %v", left)
	}
}

func TestStdioGarbageOnStdoutIsSkipped(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	_, adapter := openJournal(t)
	ct, st := stdio("text", bin, nil, "MCPTEST_GARBAGE_STDOUT=1")
	cj, sj := stdio("json", bin, nil, "MCPTEST_GARBAGE_STDOUT=json")
	m, _ := runtime.New(adapter, fastOpts(configOf(ct, st, cj, sj)))
	rep, err := m.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(rep.Ready) != 2 {
		t.Fatalf("ready %v; status %+v", rep.Ready, m.Status())
	}
	for _, name := range []string{"text", "json"} {
		if _, err := m.CallTool(t.Context(), "mcp__"+name+"__echo", map[string]any{"message": "ok"}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestReaperOneHelperPerManager runs two stdio servers (one behind
// `sh -c`, with a child of its own) with Options.ShimPath set, as
// mcpledger run does: the servers are the Manager's direct children, one
// reaper process serves both, and after Close neither the reaper nor any
// process of either group is left. (What the reaper does when mcpledger is
// killed: TestReaperKillsListedGroupsWhenThePipeEnds, and the binary's
// TestKill9LeavesNoServerProcess in cmd/mcpledger.)
func TestReaperOneHelperPerManager(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	_, adapter := openJournal(t)
	c1, s1 := stdio("direct", bin, nil, "MCPTEST_SPAWN_CHILD=1")
	c2, s2 := stdio("wrapped", "/bin/sh", []string{"-c", bin + "; :"}, "MCPTEST_SPAWN_CHILD=1")
	opts := fastOpts(configOf(c1, s1, c2, s2))
	opts.ShimPath = os.Args[0]
	m, err := runtime.New(adapter, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := m.Start(t.Context()); err != nil || len(rep.Ready) != 2 {
		t.Fatalf("start: %v %+v", err, rep)
	}
	self := os.Getpid()
	children := func() (reapers, servers []int) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			// pid (comm) state ppid …; comm may hold spaces: split after ')'.
			rest := string(b[bytes.LastIndexByte(b, ')')+2:])
			var state string
			var ppid int
			fmt.Sscan(rest, &state, &ppid)
			if ppid != self || state == "Z" {
				continue
			}
			env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
			if bytes.Contains(env, []byte("MCPLEDGER_SHIM=reaper")) {
				reapers = append(reapers, pid)
			} else {
				servers = append(servers, pid)
			}
		}
		return reapers, servers
	}
	var pids []int
	for _, s := range m.Status() {
		pids = append(pids, s.PID)
	}
	reapers, servers := children()
	if len(reapers) != 1 {
		t.Errorf("reaper processes: %v, want exactly one for both servers", reapers)
	}
	for _, p := range pids {
		if !slices.Contains(servers, p) {
			t.Errorf("server pid %d is not a direct child of the Manager's process (children %v)", p, servers)
		}
	}
	var members []int
	for _, p := range pids {
		ps, _ := runtimetest.ProcessesInGroup(p)
		members = append(members, ps...)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if left := runtimetest.WaitGone(t.Context(), append(members, reapers...)); len(left) > 0 {
		t.Errorf("left after Close: %v (server groups %v, reaper %v)", left, members, reapers)
	}
	// Close must end the reaper, not the garbage collector finalizing the
	// pipe of a Manager nobody holds.
	gort.KeepAlive(m)
}

// A server hanging in initialize holds Start at its gate, not the
// Manager: Opened is closed as soon as the session is open, and from
// then on status and calls to a ready server work while Start waits.
func TestOpenedBeforeTheGate(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	_, adapter := openJournal(t)
	hc, hs := stdio("hang", bin, nil, "MCPTEST_HANG_INITIALIZE=1")
	gc, gs := stdio("good", bin, nil)
	o := fastOpts(configOf(hc, hs, gc, gs))
	o.StartupTimeout = 30 * time.Second
	m, _ := runtime.New(adapter, o)
	defer m.Close()
	select {
	case <-m.Opened():
		t.Fatal("opened before Start")
	default:
	}
	started := make(chan error, 1)
	go func() { // ends when Start does: the hang's startup timeout, or Close
		_, err := m.Start(t.Context())
		started <- err
	}()
	select {
	case <-m.Opened():
	case <-time.After(10 * time.Second):
		t.Fatal("not opened 10 s after Start began")
	}
	waitFor(t, m, "good ready", func(v *runtime.View) bool { return state(v, "good").State == events.StateReady })
	if st := state(m.Snapshot(), "hang").State; st == events.StateReady || st == events.StateFailed {
		t.Fatalf("hang is %s", st)
	}
	res, err := m.CallTool(t.Context(), "mcp__good__echo", map[string]any{"message": "before the gate"})
	if err != nil || resultText(res) != "before the gate" {
		t.Fatalf("call to the ready server while Start waits: %v %+v", err, res)
	}
	select {
	case err := <-started:
		t.Fatalf("Start returned (%v) while a server hangs in initialize", err)
	default:
	}
	m.Close()
	<-started
}

// A stdio server's results reach the caller and the journal the same
// whether the runtime decodes them on the wire (text only) or go-sdk does
// (anything else), and the stand-in go-sdk is handed for the first never
// shows.
func TestStdioResultsDecodedEitherWay(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	c, s := stdio("srv", bin, nil)
	m, _ := runtime.New(adapter, fastOpts(configOf(c, s)))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	text, err := m.CallTool(t.Context(), "mcp__srv__echo", map[string]any{"message": "a<b \u00e9"})
	if err != nil || text.IsError || len(text.Content) != 1 {
		t.Fatalf("echo: %v %+v", err, text)
	}
	if tc, ok := text.Content[0].(*mcp.TextContent); !ok || tc.Text != "a<b \u00e9" {
		t.Errorf("echo's text %+v", text.Content[0])
	}
	failed, err := m.CallTool(t.Context(), "mcp__srv__fail", nil)
	if err != nil || !failed.IsError || failed.Content[0].(*mcp.TextContent).Text != "failed as asked" {
		t.Errorf("fail: %v %+v", err, failed)
	}
	sum, err := m.CallTool(t.Context(), "mcp__srv__add", map[string]any{"a": 2, "b": 3}) // structured: go-sdk's
	if err != nil || sum.IsError || fmt.Sprint(sum.StructuredContent) != "map[sum:5]" {
		t.Errorf("add: %v %+v", err, sum)
	}
	m.Close()
	var outcomes []string
	for _, e := range runtimetest.SessionEvents(t, j, m.Session()) {
		if p, ok := e.Payload.(*events.CallFinished); ok {
			outcomes = append(outcomes, string(p.Outcome)+":"+p.Error)
			if strings.Contains(fmt.Sprintf("%+v", p), "decoded by the runtime") {
				t.Errorf("the stand-in reached the journal: %+v", p)
			}
		}
	}
	if want := []string{"ok:", "tool_error:", "ok:"}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes %q, want %q", outcomes, want)
	}
}
