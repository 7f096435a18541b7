package runtime_test

// The fault matrix (issue 8): one table of misbehaving servers, each run
// next to a healthy neighbour that is called throughout the row and must
// not notice. RELIABILITY.md at the repository root summarizes what each
// row shows; keep the two in step.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// faultFixture is one row's world: the journal, the manager supervising
// the misbehaving server "bad" and the neighbour "good", and the
// manager's log.
type faultFixture struct {
	t    *testing.T
	bin  string
	j    *store.Journal
	m    *runtime.Manager
	logs *syncBuffer
	// groups are process groups the row started itself (HTTP test
	// servers); they must be gone after Close too.
	groups []int
	// broken switches the http_500s row's server to answering 500.
	broken atomic.Bool
}

func (f *faultFixture) events() []events.Event { return sessionEvents(f.t, f.j, f.m.Session()) }

// waitBad waits until server "bad" satisfies cond.
func (f *faultFixture) waitBad(what string, cond func(s projections.ServerStatus) bool) projections.ServerStatus {
	f.t.Helper()
	return state(waitFor(f.t, f.m, what, func(v *runtime.View) bool { return cond(state(v, "bad")) }), "bad")
}

// call calls one of bad's tools with a deadline.
func (f *faultFixture) call(tool string, args any) (*runtime.CallResult, error) {
	ctx, cancel := context.WithTimeout(f.t.Context(), 20*time.Second)
	defer cancel()
	return f.m.CallToolWith(ctx, "mcp__bad__"+tool, args, nil)
}

// echo calls bad's echo and checks the answer.
func (f *faultFixture) echo(msg string) {
	f.t.Helper()
	r, err := f.call("echo", map[string]any{"message": msg})
	if err != nil || r.Result.IsError || resultText(r.Result) != msg {
		f.t.Errorf("bad's echo %q: %v %+v", msg, err, r)
	}
}

type faultRow struct {
	name string
	// bad returns the misbehaving server's config entry (named "bad").
	bad func(f *faultFixture) (events.ServerConfig, config.Spec)
	// opts adjusts the manager's options (fastOpts to start with).
	opts func(o *runtime.Options)
	// check drives the fault and asserts the state, reason and events.
	check func(t *testing.T, f *faultFixture)
}

// TestFaultMatrix runs every row of the fault matrix. For each row it
// checks, besides the row's own assertions: the neighbour answered every
// call made during the row and kept its process and session; no process of
// a group whose leader exited is left (zombies included) during the row,
// and none of any group after Close; the journal verifies and the session
// replays.
func TestFaultMatrix(t *testing.T) {
	for _, row := range faultRows() {
		t.Run(row.name, func(t *testing.T) { runFaultRow(t, row) })
	}
}

func runFaultRow(t *testing.T, row faultRow) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	f := &faultFixture{t: t, bin: bin, j: j, logs: &syncBuffer{}}
	cb, sb := row.bad(f)
	cg, sg := stdio("good", bin, nil, "MCPTEST_NAME=good")
	o := fastOpts(configOf(cb, sb, cg, sg))
	o.Logger = slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if row.opts != nil {
		row.opts(o)
	}
	m, err := runtime.New(adapter, o)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	closed := false
	t.Cleanup(func() {
		if !closed {
			m.Close()
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", f.logs.tail(6000))
		}
	})
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	good := state(waitFor(t, m, "the neighbour ready", func(v *runtime.View) bool {
		return state(v, "good").State == events.StateReady
	}), "good")

	nb := startNeighbour(m)
	row.check(t, f)
	ok, failed := nb.stop(3)
	if len(failed) > 0 {
		t.Errorf("the neighbour failed %d of %d calls during the row: %s", len(failed), ok+len(failed), strings.Join(failed[:min(3, len(failed))], "; "))
	}
	if ok == 0 {
		t.Error("the neighbour was never called during the row")
	}
	if g := state(m.Snapshot(), "good"); g.State != events.StateReady || g.Attempt != 1 || g.PID != good.PID || g.Tools != good.Tools {
		t.Errorf("the neighbour was disturbed: %+v, was %+v", g, good)
	}
	evs := f.events()
	for _, tr := range transitions(evs, "good") {
		if tr.To != events.StateLaunching && tr.To != events.StateHandshaking && tr.To != events.StateReady {
			t.Errorf("the neighbour went %s → %s (%s) during the row", tr.From, tr.To, tr.Trigger)
		}
	}
	noLeaks(t, "after the row (groups whose leader exited)", exitedGroups(evs))
	t.Logf("events of bad: %s", runs(kinds(evs, "bad")))

	t0 := time.Now()
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	closed = true
	closeTook := time.Since(t0)
	if closeTook > 5*time.Second {
		t.Errorf("Close took %v", closeTook)
	}
	evs = f.events()
	noLeaks(t, "after Close", append(spawnedGroups(evs), f.groups...))
	if len(payloadsOf[*events.SessionStopped](evs, "")) != 1 {
		t.Error("no session.stopped journaled")
	}
	if s, x := len(payloadsOf[*events.ProcessSpawned](evs, "")), len(payloadsOf[*events.ProcessExited](evs, "")); s != x {
		t.Errorf("%d processes spawned, %d exits journaled", s, x)
	}
	if _, err := j.Verify(context.Background()); err != nil {
		t.Errorf("journal verify: %v", err)
	}
	if err := replay.Verify(context.Background(), j, m.Session()); err != nil {
		t.Errorf("the session does not replay: %v", err)
	}
	t.Logf("%d events journaled; neighbour answered %d calls; Close took %v", len(evs), ok, closeTook.Round(time.Millisecond))
}

func faultRows() []faultRow {
	return []faultRow{
		{
			// Exits 3 before serving, every time: each launch is journaled
			// with its exit and stderr, backoff between them, and the
			// budget (MaxAttempts 3) ends it failed.
			name: "crash_on_start",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil, "MCPTEST_CRASH_ON_START=1")
			},
			check: func(t *testing.T, f *faultFixture) {
				st := f.waitBad("bad failed", func(s projections.ServerStatus) bool { return s.State == events.StateFailed })
				if st.Reason != events.ReasonExhausted || st.Attempt != 3 {
					t.Errorf("status %+v, want failed (attempts_exhausted) after attempt 3", st)
				}
				if !strings.Contains(st.Error, "exited with code 3") || !strings.Contains(st.Error, "crashing on start") {
					t.Errorf("status error %q, want the exit (code 3) and its stderr", st.Error)
				}
				evs := f.events()
				exits := payloadsOf[*events.ProcessExited](evs, "bad")
				if n := len(payloadsOf[*events.ProcessSpawned](evs, "bad")); n != 3 || len(exits) != 3 {
					t.Errorf("%d spawns and %d exits, want 3 of each", n, len(exits))
				}
				for _, x := range exits {
					if x.ExitCode != 3 || x.Expected || !slices.ContainsFunc(x.StderrTail, func(l string) bool { return strings.Contains(l, "crashing on start") }) {
						t.Errorf("exit %+v, want code 3, unexpected, with the stderr line", x)
					}
				}
				if got := kinds(evs, "bad"); !inOrder(got, "server.transitioned:launching", "process.exited", "server.transitioned:reconnecting", "timer.scheduled", "timer.fired",
					"server.transitioned:launching", "process.exited", "server.transitioned:reconnecting", "timer.scheduled", "timer.fired",
					"server.transitioned:launching", "process.exited", "server.transitioned:failed") {
					t.Errorf("events of bad:\n%s", strings.Join(got, " "))
				}
				_, err := f.call("echo", map[string]any{"message": "x"})
				var ue *runtime.UnavailableError
				if !errors.As(err, &ue) || ue.Reason != events.ReasonExhausted || !strings.Contains(err.Error(), "mcpledger reconnect bad") {
					t.Errorf("call to the failed server: %v", err)
				}
			},
		},
		{
			// Serves one call and exits 4, on every launch: each crash is a
			// reconnect (tools re-listed), until the budget ends it failed.
			// Every call was answered before its crash.
			name: "crash_loop",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil, "MCPTEST_CRASH_AFTER=1")
			},
			check: func(t *testing.T, f *faultFixture) {
				for i := 1; i <= 3; i++ {
					st := f.waitBad("bad ready, attempt "+strconv.Itoa(i), func(s projections.ServerStatus) bool {
						return s.State == events.StateReady && s.Attempt == i
					})
					if st.Tools == 0 {
						t.Errorf("attempt %d: no tools listed", i)
					}
					f.echo("call " + strconv.Itoa(i))
				}
				st := f.waitBad("bad failed", func(s projections.ServerStatus) bool { return s.State == events.StateFailed })
				if st.Reason != events.ReasonExhausted {
					t.Errorf("status %+v, want failed (attempts_exhausted)", st)
				}
				evs := f.events()
				exits := payloadsOf[*events.ProcessExited](evs, "bad")
				if len(exits) != 3 {
					t.Errorf("%d exits, want 3", len(exits))
				}
				for _, x := range exits {
					if x.ExitCode != 4 || x.Expected {
						t.Errorf("exit %+v, want code 4, unexpected", x)
					}
				}
				listed := 0
				for _, l := range payloadsOf[*events.ToolsListed](evs, "bad") {
					if l.Trigger == "initial" {
						listed++
					}
				}
				if listed != 3 {
					t.Errorf("%d initial listings, want one per launch (3)", listed)
				}
				if got, _ := callEvents(t, f.j, f.m.Session()); strings.Count(strings.Join(got, " "), "finished:ok") < 3 {
					t.Errorf("calls journaled: %v", got)
				}
			},
		},
		{
			// os.Exit(7) inside a call: the call fails as outcome unknown
			// (it may have acted), journaled as lost; the server is
			// relaunched and serves again.
			name: "exit_mid_call",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil)
			},
			check: func(t *testing.T, f *faultFixture) {
				_, err := f.call("exit", map[string]any{"code": 7})
				if !errors.Is(err, runtime.ErrOutcomeUnknown) {
					t.Errorf("exit mid-call: %v, want ErrOutcomeUnknown", err)
				}
				st := f.waitBad("bad ready again", func(s projections.ServerStatus) bool {
					return s.State == events.StateReady && s.Attempt == 2
				})
				if st.Tools == 0 {
					t.Errorf("tools not re-listed after the relaunch: %+v", st)
				}
				f.echo("after the crash")
				evs := f.events()
				fins := payloadsOf[*events.CallFinished](evs, "bad")
				if len(fins) == 0 || fins[0].Outcome != events.OutcomeLost {
					t.Errorf("the crashed call is journaled %+v, want outcome lost", fins[:min(1, len(fins))])
				}
				exits := payloadsOf[*events.ProcessExited](evs, "bad")
				if len(exits) == 0 || exits[0].ExitCode != 7 || exits[0].Expected {
					t.Errorf("exits %+v, want the first with code 7, unexpected", exits)
				}
				if got := kinds(evs, "bad"); !inOrder(got, "call.started", "process.exited", "server.transitioned:reconnecting",
					"timer.fired", "server.transitioned:launching", "server.transitioned:ready", "call.started", "call.finished") {
					t.Errorf("events of bad:\n%s", strings.Join(got, " "))
				}
			},
		},
		{
			// Never answers initialize and ignores stdin EOF: each attempt
			// times out (the server's "timeout", 400 ms), its process group
			// is killed, and the budget (2) ends it failed.
			name: "hang_in_initialize",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				c, s := stdio("bad", f.bin, nil, "MCPTEST_HANG_INITIALIZE=1", "MCPTEST_IGNORE_EOF=1")
				s.Timeout = 400 * time.Millisecond
				return c, s
			},
			opts: func(o *runtime.Options) { o.Decider.MaxAttempts = 2 },
			check: func(t *testing.T, f *faultFixture) {
				st := f.waitBad("bad failed", func(s projections.ServerStatus) bool { return s.State == events.StateFailed })
				if st.Reason != events.ReasonExhausted || !strings.Contains(st.Error, "timeout") {
					t.Errorf("status %+v, want failed (attempts_exhausted) on a timeout", st)
				}
				evs := f.events()
				var timeouts int
				for _, c := range payloadsOf[*events.ConnectFailed](evs, "bad") {
					if c.Error.Class == events.ErrTimeout && c.Phase == "handshake" {
						timeouts++
					}
				}
				if timeouts != 2 {
					t.Errorf("%d handshake timeouts journaled, want 2", timeouts)
				}
				for _, x := range payloadsOf[*events.ProcessExited](evs, "bad") {
					if x.Signal != "killed" || !x.Expected {
						t.Errorf("exit %+v, want killed by mcpledger", x)
					}
				}
			},
		},
		{
			// A call that never returns, with the tool's timeout at 300 ms:
			// the call times out (journaled), the server is told to cancel,
			// and the session carries on.
			name: "hang_in_call",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				c, s := stdio("bad", f.bin, nil)
				s.Call.ToolTimeouts = map[string]time.Duration{"slow": 300 * time.Millisecond}
				return c, s
			},
			check: func(t *testing.T, f *faultFixture) {
				t0 := time.Now()
				_, err := f.call("slow", map[string]any{"ms": 60_000})
				took := time.Since(t0)
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 300ms") {
					t.Errorf("hung call: %v", err)
				}
				if took > 3*time.Second {
					t.Errorf("the hung call returned after %v", took)
				}
				f.echo("after the timeout")
				if st := state(f.m.Snapshot(), "bad"); st.State != events.StateReady || st.Attempt != 1 {
					t.Errorf("status %+v, want still ready on attempt 1", st)
				}
				fins := payloadsOf[*events.CallFinished](f.events(), "bad")
				if len(fins) < 1 || fins[0].Outcome != events.OutcomeTimeout {
					t.Errorf("hung call journaled %+v, want outcome timeout", fins)
				}
				t.Logf("hung call returned after %v", took)
			},
		},
		{
			// Does not exit when stdin closes: stopping it escalates to
			// SIGTERM after the grace (200 ms).
			name: "ignore_stdin_eof",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil, "MCPTEST_IGNORE_EOF=1")
			},
			check: func(t *testing.T, f *faultFixture) {
				stopAndCheck(t, f, "terminated")
			},
		},
		{
			// Ignores stdin EOF and SIGTERM: stopping it escalates to
			// SIGKILL of its group after twice the grace.
			name: "ignore_sigterm",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil, "MCPTEST_IGNORE_EOF=1", "MCPTEST_IGNORE_SIGTERM=1")
			},
			check: func(t *testing.T, f *faultFixture) {
				stopAndCheck(t, f, "killed")
			},
		},
		{
			// sh -c runs the server, which spawns a grandchild holding the
			// protocol pipes and ignores EOF and SIGTERM. When the server
			// exits mid-call the shell exits; the whole group (the
			// grandchild too) is killed, and the server comes back.
			name: "wrapper_grandchild",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", "/bin/sh", []string{"-c", f.bin + "; :"},
					"MCPTEST_SPAWN_CHILD=inherit", "MCPTEST_IGNORE_EOF=1", "MCPTEST_IGNORE_SIGTERM=1")
			},
			check: func(t *testing.T, f *faultFixture) {
				st := f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				members := waitGroupSize(t, st.PID, 3)
				// The call should fail at once (the leader exited, its group
				// is killed, the pipes close); give it 3 s.
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
				_, err := f.m.CallTool(ctx, "mcp__bad__exit", map[string]any{"code": 5})
				cancel()
				switch took := time.Since(t0); {
				case err == nil:
					t.Error("the call that exited the server succeeded")
				case took > 2*time.Second:
					t.Errorf("the wrapper's exit went unnoticed while the grandchild held its stderr: the call returned after %v: %v", took, err)
				case !errors.Is(err, runtime.ErrOutcomeUnknown):
					t.Errorf("exit mid-call behind a wrapper: %v (after %v), want ErrOutcomeUnknown", err, took)
				default:
					t.Logf("exit call: %v after %v", err, took)
				}
				if left := runtimetest.WaitGone(t.Context(), members); len(left) > 0 {
					t.Errorf("left of the first group %v: %v", members, left)
				}
				gone := time.Since(t0)
				st2 := f.waitBad("bad back", func(s projections.ServerStatus) bool { return s.State == events.StateReady && s.Attempt == 2 })
				waitGroupSize(t, st2.PID, 3)
				f.echo("after the wrapper's crash")
				t.Logf("first group gone after %v, back after %v", gone, time.Since(t0))
			},
		},
		{
			// Writes non-JSON lines on stdout before serving: they are
			// skipped and journaled (process.output_skipped), and the
			// server works.
			name: "garbage_stdout",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil, "MCPTEST_GARBAGE_STDOUT=1")
			},
			check: func(t *testing.T, f *faultFixture) {
				st := f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				if st.Attempt != 1 {
					t.Errorf("status %+v, want ready on attempt 1", st)
				}
				f.echo("through the garbage")
				logs := f.logs.String()
				for _, line := range []string{"mcptest: this line is not JSON", "Starting server... done", `a JSON object that is not JSON-RPC`} {
					if !strings.Contains(logs, "non-JSON line") || !strings.Contains(logs, strings.ReplaceAll(line, `"`, `\"`)) {
						t.Errorf("skipped line %q not logged", line)
					}
				}
				var lines []string
				last := 0
				for _, p := range payloadsOf[*events.OutputSkipped](f.events(), "bad") {
					lines = append(lines, p.Line)
					last = p.Skipped
				}
				want := []string{"mcptest: this line is not JSON", "Starting server... done", `{"hello":"a JSON object that is not JSON-RPC"}`}
				if !slices.Equal(lines, want) || last != 3 {
					t.Errorf("journaled skipped lines %q (count %d), want %q (3)", lines, last, want)
				}
			},
		},
		{
			// 10,000 extra tools: listed in pages, journaled in one
			// tools.listed, all in the catalog, callable.
			name: "tools_10000",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil, "MCPTEST_TOOL_COUNT=10000")
			},
			check: func(t *testing.T, f *faultFixture) {
				const want = 10_000 + 8 // t0000…t9999 and the 8 built-in tools
				st := f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				if st.Tools != want {
					t.Errorf("%d tools, want %d", st.Tools, want)
				}
				if _, ok := f.m.Snapshot().Tool("mcp__bad__t9999"); !ok {
					t.Error("mcp__bad__t9999 not in the catalog")
				}
				r, err := f.call("t0042", nil)
				if err != nil || resultText(r.Result) != "t0042" {
					t.Errorf("t0042: %v %+v", err, r)
				}
				listed := payloadsOf[*events.ToolsListed](f.events(), "bad")
				if len(listed) != 1 || len(listed[0].Tools) != want {
					t.Errorf("%d tools.listed events, want one of %d tools", len(listed), want)
				}
			},
		},
		{
			// Tools with broken definitions (a string schema, a non-object
			// schema, a null schema, a dangling $ref, an invalid name):
			// listed and journaled as sent; calling them never crashes
			// anything, and the valid tools work.
			name: "invalid_tool_schemas",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil, "MCPTEST_BAD_SCHEMA=1")
			},
			check: func(t *testing.T, f *faultFixture) {
				st := f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				f.echo("valid tools still work")
				var names []string
				for _, e := range f.m.Tools() {
					if e.Server == "bad" && strings.HasPrefix(e.Tool, "bad") {
						names = append(names, e.Name)
					}
				}
				if len(names) == 0 {
					t.Fatal("no broken tool reached the catalog")
				}
				for _, name := range names {
					_, err := f.m.CallTool(t.Context(), name, map[string]any{})
					var ae *runtime.ArgumentsError
					if err == nil || !(errors.Is(err, runtime.ErrUnknownTool) || errors.As(err, &ae)) {
						t.Errorf("%s: %v, want the server's unknown tool or a local arguments error", name, err)
					}
					t.Logf("%s: %v", name, err)
				}
				if s := state(f.m.Snapshot(), "bad"); s.State != events.StateReady || s.Attempt != 1 {
					t.Errorf("status %+v after calling broken tools, want ready on attempt 1", s)
				}
				// go-sdk's client drops bad_header (a duplicate
				// x-mcp-header): the listing journals it with the reason.
				listed := payloadsOf[*events.ToolsListed](f.events(), "bad")
				if len(listed) == 0 || len(listed[0].Excluded) != 1 || listed[0].Excluded[0].Name != "bad_header" ||
					!strings.Contains(listed[0].Excluded[0].Reason, "duplicate x-mcp-header") {
					t.Errorf("the listing does not journal bad_header as excluded: %+v", listed)
				}
				if countTools(listed[0].Tools, "bad_header") != 0 {
					t.Error("bad_header is both listed and excluded")
				}
				t.Logf("%d tools, broken ones in the catalog: %v", st.Tools, names)
			},
		},
		{
			// tools/list names "echo" twice: the catalog keeps the first
			// definition, the journal keeps the list as sent.
			name: "duplicate_tool_names",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil, "MCPTEST_DUP_TOOLS=1")
			},
			check: func(t *testing.T, f *faultFixture) {
				f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				n := 0
				for _, e := range f.m.Tools() {
					if e.Server == "bad" && e.Tool == "echo" {
						n++
						if strings.Contains(e.Description, "second") {
							t.Errorf("the catalog kept the second definition: %+v", e)
						}
					}
				}
				if n != 1 {
					t.Errorf("%d catalog entries for bad's echo, want 1", n)
				}
				f.echo("the first echo")
				listed := payloadsOf[*events.ToolsListed](f.events(), "bad")
				if len(listed) == 0 || countTools(listed[0].Tools, "echo") != 2 {
					t.Errorf("the journaled list does not hold both echo entries")
				}
			},
		},
		{
			// A 100 MB result over stdio: cut as it streams (never
			// held), the call gets the result's first characters with the
			// marker naming its whole size, the session stays up. Peak RSS
			// may grow by the 16 MiB frame cap and garbage, never by the
			// result (checked without -race, which multiplies memory).
			name: "result_100MB",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil)
			},
			check: func(t *testing.T, f *faultFixture) {
				hwm0 := vmHWM(t)
				t0 := time.Now()
				r, err := f.call("big", map[string]any{"bytes": 100_000_000})
				took := time.Since(t0)
				if err != nil || !strings.HasSuffix(r.Text, "[mcpledger: output truncated: 99950000 of 100000000 characters cut]") {
					t.Errorf("100 MB result: %v, %v", err, r)
				}
				grew := vmHWM(t) - hwm0
				if !raceEnabled && grew > 80<<20 {
					t.Errorf("peak RSS grew by %d MiB while a 100 MB result streamed", grew>>20)
				}
				f.echo("after the big result")
				if st := state(f.m.Snapshot(), "bad"); st.State != events.StateReady || st.Attempt != 1 {
					t.Errorf("status %+v, want still ready on attempt 1", st)
				}
				fins := payloadsOf[*events.CallFinished](f.events(), "bad")
				if len(fins) == 0 || fins[0].Outcome != events.OutcomeOK || fins[0].WireBytes <= 100_000_000 || fins[0].RenderedChars != 100_000_000 {
					t.Errorf("big call journaled %+v", fins[:min(1, len(fins))])
				}
				t.Logf("100 MB result cut in %v; peak RSS grew %d MiB (race %v)", took, grew>>20, raceEnabled)
			},
		},
		{
			// 200 list_changed notifications back to back: re-lists are
			// coalesced (one pending at a time), and the last listing
			// matches the server's final tools.
			name: "list_changed_storm",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				return stdio("bad", f.bin, nil, "MCPTEST_LIST_CHANGED_STORM=200")
			},
			check: func(t *testing.T, f *faultFixture) {
				f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				// Wait for the re-listing to settle: no new tools.listed for 500 ms.
				relists, last := 0, -1
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
					n := len(payloadsOf[*events.ToolsListed](f.events(), "bad"))
					if n == last {
						break
					}
					last = n
				}
				listed := payloadsOf[*events.ToolsListed](f.events(), "bad")
				for _, l := range listed {
					if l.Trigger == "list_changed" {
						relists++
					}
				}
				if relists == 0 || relists > 100 {
					t.Errorf("%d re-lists for 200 notifications, want some, coalesced (≤ 100)", relists)
				}
				if final := listed[len(listed)-1]; countTools(final.Tools, "storm") != 0 {
					t.Error("the last listing still has the storm tool the server removed")
				}
				if _, ok := f.m.Snapshot().Tool("mcp__bad__storm"); ok {
					t.Error("the catalog still has mcp__bad__storm")
				}
				f.echo("after the storm")
				if st := state(f.m.Snapshot(), "bad"); st.State != events.StateReady || st.Attempt != 1 {
					t.Errorf("status %+v, want still ready on attempt 1", st)
				}
				t.Logf("%d notifications → %d re-lists", 200, relists)
			},
		},
		{
			// The same storm while ready, over HTTP: 100 toggles 12 ms
			// apart, each notified. Re-lists never exceed the
			// notifications, and the catalog ends as the server does.
			name: "list_changed_storm_http",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				url, _ := runtimetest.StartHTTP(f.t, f.bin, []string{"MCPTEST_LIST_CHANGED_STORM=100"})
				return remote("bad", events.TransportHTTP, url, nil)
			},
			check: func(t *testing.T, f *faultFixture) {
				f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				relists, last := 0, -1
				for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
					n := len(payloadsOf[*events.ToolsListed](f.events(), "bad"))
					if n == last {
						break
					}
					last = n
				}
				listed := payloadsOf[*events.ToolsListed](f.events(), "bad")
				for _, l := range listed {
					if l.Trigger == "list_changed" {
						relists++
					}
				}
				if relists == 0 || relists > 100 {
					t.Errorf("%d re-lists for 100 notifications, want some, never more", relists)
				}
				if final := listed[len(listed)-1]; countTools(final.Tools, "storm") != 0 {
					t.Error("the last listing still has the storm tool the server removed")
				}
				f.echo("after the storm")
				if st := state(f.m.Snapshot(), "bad"); st.State != events.StateReady || st.Attempt != 1 {
					t.Errorf("status %+v, want still ready on attempt 1", st)
				}
				t.Logf("100 notifications → %d re-lists", relists)
			},
		},
		{
			// An HTTP server process that is SIGKILLed: pings detect it,
			// reconnects find the endpoint unreachable, and the budget ends
			// it failed. Calls fail fast meanwhile.
			name: "http_server_dies",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				url, cmd := runtimetest.StartHTTP(f.t, f.bin, nil)
				f.groups = append(f.groups, cmd.Process.Pid)
				return remote("bad", events.TransportHTTP, url, nil)
			},
			opts: httpOpts,
			check: func(t *testing.T, f *faultFixture) {
				f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				f.echo("before")
				pgid := f.groups[0]
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				t0 := time.Now()
				f.waitBad("bad detected down", func(s projections.ServerStatus) bool { return s.State != events.StateReady })
				detected := time.Since(t0)
				if _, err := f.call("echo", map[string]any{"message": "x"}); err == nil {
					t.Error("a call to the dead server succeeded")
				}
				st := f.waitBad("bad failed", func(s projections.ServerStatus) bool { return s.State == events.StateFailed })
				if st.Reason != events.ReasonExhausted {
					t.Errorf("status %+v, want failed (attempts_exhausted)", st)
				}
				evs := f.events()
				unreachable := 0
				for _, c := range payloadsOf[*events.ConnectFailed](evs, "bad") {
					if strings.Contains(c.Error.Message, "unreachable") {
						unreachable++
					}
				}
				if unreachable == 0 {
					t.Errorf("no connect.failed says the endpoint is unreachable: %s", strings.Join(kinds(evs, "bad"), " "))
				}
				t.Logf("death detected after %v, failed after %v", detected, time.Since(t0))
			},
		},
		{
			// An HTTP server that starts answering 500 to everything:
			// calls fail (not hang), pings fail, the server is reconnected
			// and, still getting 500s, ends failed; once it is healthy
			// again a reconnect brings it back.
			name: "http_500s",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				srv := echoServer("web")
				h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
				ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if f.broken.Load() {
						http.Error(w, "internal error", http.StatusInternalServerError)
						return
					}
					h.ServeHTTP(w, r)
				}))
				f.t.Cleanup(ts.Close)
				return remote("bad", events.TransportHTTP, ts.URL, nil)
			},
			opts: httpOpts,
			check: func(t *testing.T, f *faultFixture) {
				f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				f.echo("before")
				f.broken.Store(true)
				t0 := time.Now()
				if _, err := f.call("echo", map[string]any{"message": "x"}); err == nil {
					t.Error("a call answered with 500 succeeded")
				} else {
					t.Logf("call during 500s: %v (after %v)", err, time.Since(t0))
				}
				st := f.waitBad("bad failed", func(s projections.ServerStatus) bool { return s.State == events.StateFailed })
				if st.Reason != events.ReasonExhausted || !strings.Contains(st.Error, "Internal Server Error") {
					t.Errorf("status %+v, want failed (attempts_exhausted) naming the 500", st)
				}
				f.broken.Store(false)
				if err := f.m.Reconnect(t.Context(), "bad"); err != nil {
					t.Fatal(err)
				}
				f.waitBad("bad back", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				f.echo("after the 500s")
				if n := len(payloadsOf[*events.PingFailed](f.events(), "bad")); n == 0 {
					t.Error("no ping.failed journaled")
				}
			},
		},
		{
			// An HTTP server process restarted on the same address: the
			// old MCP session is gone there. The loss is detected, the
			// server reconnected and its tools re-listed.
			name: "http_session_lost",
			bad: func(f *faultFixture) (events.ServerConfig, config.Spec) {
				// The restart reuses the port: one below the ephemeral
				// range, which no dial can take while the server is down.
				url, cmd, err := startHTTPOn(f.t, f.bin, runtimetest.AddrOutsideEphemeral(f.t))
				if err != nil {
					f.t.Fatal(err)
				}
				f.groups = append(f.groups, cmd.Process.Pid)
				return remote("bad", events.TransportHTTP, url, nil)
			},
			opts: func(o *runtime.Options) {
				httpOpts(o)
				o.Decider.MaxAttempts = 20
			},
			check: func(t *testing.T, f *faultFixture) {
				first := f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
				f.echo("before")
				addr := strings.TrimPrefix(strings.TrimSuffix(endpointOf(t, f), "/mcp"), "http://")
				_ = syscall.Kill(-f.groups[0], syscall.SIGKILL)
				runtimetest.WaitGone(t.Context(), []int{f.groups[0]})
				if _, _, err := startHTTPOn(t, f.bin, addr); err != nil {
					t.Fatal(err)
				}
				st := f.waitBad("bad reconnected", func(s projections.ServerStatus) bool {
					return s.State == events.StateReady && s.Attempt > first.Attempt
				})
				if st.Tools != first.Tools {
					t.Errorf("%d tools after the reconnect, had %d", st.Tools, first.Tools)
				}
				f.echo("after the restart")
				evs := f.events()
				initial := 0
				for _, l := range payloadsOf[*events.ToolsListed](evs, "bad") {
					if l.Trigger == "initial" && l.Attempt == st.Attempt {
						initial++
					}
				}
				if initial != 1 {
					t.Errorf("the new session's tools were not listed")
				}
				t.Logf("events of bad: %s", strings.Join(kinds(evs, "bad"), " "))
			},
		},
	}
}

// httpOpts are the options of the HTTP rows: pings every 100 ms, two
// failures declare the session broken.
func httpOpts(o *runtime.Options) {
	o.PingInterval, o.PingTimeout = 100*time.Millisecond, 300*time.Millisecond
	o.Decider.PingFailures = 2
	o.Retry = runtime.RetryOptions{Attempts: 2, Backoff: 20 * time.Millisecond}
}

// endpointOf returns the URL bad's config names.
func endpointOf(t *testing.T, f *faultFixture) string {
	t.Helper()
	for _, e := range f.events() {
		if p, ok := e.Payload.(*events.TransportOpened); ok && e.Server == "bad" {
			return p.Endpoint
		}
	}
	t.Fatal("no transport.opened for bad")
	return ""
}

// stopAndCheck stops bad (which ignores stdin EOF, and maybe SIGTERM),
// checks how its process ended and that its group is gone, and brings it
// back.
func stopAndCheck(t *testing.T, f *faultFixture, signal string) {
	t.Helper()
	st := f.waitBad("bad ready", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
	f.echo("before the stop")
	t0 := time.Now()
	if err := f.m.Stop(t.Context(), "bad"); err != nil {
		t.Fatal(err)
	}
	f.waitBad("bad stopped", func(s projections.ServerStatus) bool { return s.State == events.StateStopped })
	var exit *events.ProcessExited
	for exit == nil && time.Since(t0) < 5*time.Second {
		if xs := payloadsOf[*events.ProcessExited](f.events(), "bad"); len(xs) > 0 {
			exit = xs[0]
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	took := time.Since(t0)
	if exit == nil || exit.Signal != signal || !exit.Expected {
		t.Errorf("exit %+v, want signal %s, expected", exit, signal)
	}
	if took > 2*time.Second {
		t.Errorf("stopping took %v (grace 200 ms per step)", took)
	}
	if s := state(f.m.Snapshot(), "bad"); s.Reason != events.ReasonStopRequested {
		t.Errorf("status %+v, want stopped (stop_requested)", s)
	}
	noLeaks(t, "after the stop", []int{st.PID})
	if err := f.m.Reconnect(t.Context(), "bad"); err != nil {
		t.Fatal(err)
	}
	f.waitBad("bad back", func(s projections.ServerStatus) bool { return s.State == events.StateReady })
	f.echo("after the restart")
	t.Logf("stopped (%s) after %v", signal, took)
}

// TestStormBreakerProof: a server that crashes on start is launched no
// more than the breaker allows per window (4 per 60 s here, with a retry
// budget of 100 so only the breaker limits it): in one session, and over
// two restarts on the same journal, which launch it no more. The
// neighbour is unaffected in every session.
func TestStormBreakerProof(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	cb, sb := stdio("bad", bin, nil, "MCPTEST_CRASH_ON_START=1")
	cg, sg := stdio("good", bin, nil, "MCPTEST_NAME=good")
	const limit = 4
	total := 0
	var groups []int
	for session := 1; session <= 3; session++ {
		o := fastOpts(configOf(cb, sb, cg, sg))
		o.Decider = events.DeciderOptions{BackoffBaseMs: 10, BackoffMaxMs: 20, MaxAttempts: 100, StormLimit: limit, StormWindowMs: 60_000}
		m, err := runtime.New(adapter, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		v := waitFor(t, m, "bad held", func(v *runtime.View) bool {
			s := state(v, "bad")
			return s.State == events.StateStopped && s.Reason == events.ReasonStormHold
		})
		if g := state(v, "good"); g.State != events.StateReady {
			t.Errorf("session %d: neighbour %+v", session, g)
		}
		if r, err := m.CallTool(t.Context(), "mcp__good__echo", map[string]any{"message": "hi"}); err != nil || resultText(r) != "hi" {
			t.Errorf("session %d: neighbour call: %v", session, err)
		}
		_, err = m.CallTool(t.Context(), "mcp__bad__echo", nil)
		var ue *runtime.UnavailableError
		if !errors.As(err, &ue) || ue.Reason != events.ReasonStormHold {
			t.Errorf("session %d: call while held: %v", session, err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		evs := sessionEvents(t, j, m.Session())
		spawned := len(payloadsOf[*events.ProcessSpawned](evs, "bad"))
		total += spawned
		holds := 0
		for _, ts := range payloadsOf[*events.TimerScheduled](evs, "bad") {
			if ts.Purpose == events.TimerHold {
				holds++
			}
		}
		if holds == 0 {
			t.Errorf("session %d: no storm_hold timer journaled", session)
		}
		want := 0
		if session == 1 {
			want = limit
		}
		if spawned != want {
			t.Errorf("session %d launched the crashing server %d times, want %d", session, spawned, want)
		}
		groups = append(groups, spawnedGroups(evs)...)
		noLeaks(t, fmt.Sprintf("after session %d", session), groups)
		if err := replay.Verify(context.Background(), j, m.Session()); err != nil {
			t.Errorf("session %d does not replay: %v", session, err)
		}
		t.Logf("session %d: %d launches of the crashing server", session, spawned)
	}
	if total > limit {
		t.Errorf("%d launches in all within one window, the breaker allows %d", total, limit)
	}
}

// neighbour calls good's echo every 40 ms until stopped.
type neighbour struct {
	quit, done chan struct{}
	made       atomic.Int64
	ok         int
	failed     []string
}

func startNeighbour(m *runtime.Manager) *neighbour {
	n := &neighbour{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(n.done)
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			msg := "n" + strconv.Itoa(i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t0 := time.Now()
			r, err := m.CallTool(ctx, "mcp__good__echo", map[string]any{"message": msg})
			cancel()
			n.made.Add(1)
			switch {
			case err != nil:
				n.failed = append(n.failed, fmt.Sprintf("%s: %v", msg, err))
			case r.IsError || resultText(r) != msg:
				n.failed = append(n.failed, fmt.Sprintf("%s: answered %+v", msg, r))
			case time.Since(t0) > 5*time.Second:
				n.failed = append(n.failed, fmt.Sprintf("%s: took %v", msg, time.Since(t0)))
			default:
				n.ok++
			}
			select {
			case <-n.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return n
}

// stop stops the calls once at least atLeast have been made (or 5 s
// passed) and returns how many were answered and the failures.
func (n *neighbour) stop(atLeast int) (ok int, failed []string) {
	for deadline := time.Now().Add(5 * time.Second); n.made.Load() < int64(atLeast) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(n.quit)
	<-n.done
	return n.ok, n.failed
}

// noLeaks waits up to 3 s for every process group in pgids to be empty
// and fails the test with what is left: live processes, and zombies
// (exited, not reaped). A zombie whose parent is PID 1 was orphaned and
// handed to init, whose reaping is the environment's (here it takes about
// a second): it is logged, not failed.
func noLeaks(t *testing.T, when string, pgids []int) {
	t.Helper()
	t0 := time.Now()
	deadline := t0.Add(3 * time.Second)
	var first []string
	for {
		var left, initZombies []string
		for _, g := range pgids {
			live, zombies, err := runtimetest.GroupMembers(g)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range live {
				left = append(left, fmt.Sprintf("%d (group %d): %s", p, g, cmdline(p)))
			}
			for _, p := range zombies {
				z := fmt.Sprintf("zombie %d (group %d, parent %s)", p, g, parentOf(p))
				if ppid(p) == 1 {
					initZombies = append(initZombies, z)
				} else {
					left = append(left, z)
				}
			}
		}
		all := append(left, initZombies...)
		if len(all) == 0 {
			if d := time.Since(t0); d > 500*time.Millisecond {
				t.Logf("processes left %s took %v to go: %s", when, d, strings.Join(first, "; "))
			}
			return
		}
		if first == nil {
			first = all
		}
		if time.Now().After(deadline) {
			if len(left) > 0 {
				t.Errorf("processes left %s: %s", when, strings.Join(left, "; "))
			}
			if len(initZombies) > 0 {
				t.Logf("zombies handed to PID 1 still unreaped %s (the environment's): %s", when, strings.Join(initZombies, "; "))
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ppid(pid int) int {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if i := bytes.LastIndexByte(b, ')'); i >= 0 {
		if f := strings.Fields(string(b[i+1:])); len(f) > 1 {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// parentOf names pid's parent process.
func parentOf(pid int) string {
	p := ppid(pid)
	return strconv.Itoa(p) + " " + cmdline(p)
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
}

// waitGroupSize waits until process group pgid has at least n live
// members and returns them.
func waitGroupSize(t *testing.T, pgid, n int) []int {
	t.Helper()
	var live []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if live, _ = runtimetest.ProcessesInGroup(pgid); len(live) >= n {
			return live
		}
	}
	t.Fatalf("group %d has %v, want %d processes", pgid, live, n)
	return nil
}

// spawnedGroups returns the process group of every process.spawned.
func spawnedGroups(evs []events.Event) []int {
	var out []int
	for _, p := range payloadsOf[*events.ProcessSpawned](evs, "") {
		out = append(out, p.PGID)
	}
	return out
}

// exitedGroups returns the process groups whose leader's exit was
// journaled.
func exitedGroups(evs []events.Event) []int {
	pgid := map[int]int{}
	for _, p := range payloadsOf[*events.ProcessSpawned](evs, "") {
		pgid[p.PID] = p.PGID
	}
	var out []int
	for _, p := range payloadsOf[*events.ProcessExited](evs, "") {
		out = append(out, pgid[p.PID])
	}
	return out
}

// payloadsOf returns the payloads of type P among evs (of server, unless
// server is "").
func payloadsOf[P events.Payload](evs []events.Event, server string) []P {
	var out []P
	for _, e := range evs {
		if p, ok := e.Payload.(P); ok && (server == "" || e.Server == server) {
			out = append(out, p)
		}
	}
	return out
}

func transitions(evs []events.Event, server string) []*events.ServerTransitioned {
	return payloadsOf[*events.ServerTransitioned](evs, server)
}

// runs joins names, writing a run of one name as name×n.
func runs(names []string) string {
	var out []string
	for i := 0; i < len(names); {
		j := i
		for j < len(names) && names[j] == names[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s×%d", names[i], j-i))
		} else {
			out = append(out, names[i])
		}
		i = j
	}
	return strings.Join(out, " ")
}

func countTools(ts []events.Tool, name string) int {
	n := 0
	for _, t := range ts {
		if t.Name == name {
			n++
		}
	}
	return n
}

// resultText is the text of a result's first block, or "".
func resultText(r *mcp.CallToolResult) string {
	if r == nil || len(r.Content) == 0 {
		return ""
	}
	if tc, ok := r.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// syncBuffer is a bytes.Buffer safe for concurrent writers (a logger).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) tail(n int) string {
	s := b.String()
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
