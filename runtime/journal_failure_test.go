package runtime_test

// A journal that refuses appends (a full disk): the Manager is degraded,
// refuses work with an error that says why, keeps the observations that
// arrive meanwhile, retries the journal with backoff and resumes without a
// restart; an audited call whose call.started cannot be journaled is never
// sent. The real full disk, through the CLI, is in cmd/mcpledger
// (TestJournalDiskFull).

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// errDiskFull is the append failure faultJournal injects.
var errDiskFull = errors.New("injected: disk full")

// faultJournal passes appends through to a real journal until failOn(kind)
// arms it: from the first append that carries an event of that kind ("":
// any) until heal, every append is refused with errDiskFull and writes
// nothing. With landed set, the refused appends are written first (a
// commit whose fsync failed after bbolt wrote it).
type faultJournal struct {
	storeJournal

	mu       sync.Mutex
	armed    bool
	failKind events.Kind
	failing  bool // refusing appends
	landed   bool
	refused  int // appends refused
	after    int // appends that reached the journal after the first refusal
}

func (f *faultJournal) failOn(kind events.Kind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.failKind = true, kind
}

// heal makes appends reach the journal again.
func (f *faultJournal) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.failing = false, false
}

func (f *faultJournal) counts() (refused, after int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused, f.after
}

func (f *faultJournal) Append(ctx context.Context, sid uuid.UUID, evs []events.Event) error {
	refuse, landed := f.refuse(evs)
	if !refuse {
		return f.storeJournal.Append(ctx, sid, evs)
	}
	if landed {
		if err := f.storeJournal.Append(ctx, sid, evs); err != nil {
			return err
		}
	}
	return errDiskFull
}

func (f *faultJournal) AppendLater(sid uuid.UUID, evs []events.Event) func(context.Context) error {
	if refuse, _ := f.refuse(evs); refuse {
		return func(context.Context) error { return errDiskFull }
	}
	return f.storeJournal.AppendLater(sid, evs)
}

// refuse reports whether evs is to be refused (and written first).
func (f *faultJournal) refuse(evs []events.Event) (refuse, landed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed && !f.failing && (f.failKind == "" || slices.ContainsFunc(evs, func(e events.Event) bool { return e.Kind == f.failKind })) {
		f.failing = true
	}
	if f.failing {
		f.refused++
		return true, f.landed
	}
	if f.refused > 0 {
		f.after++
	}
	return false, false
}

// toolsCallCounter counts the tools/call requests server receives, whatever
// becomes of them.
func toolsCallCounter(server *mcp.Server) *atomic.Int64 {
	n := new(atomic.Int64)
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				n.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	return n
}

// faulty is a Manager on a faultJournal, supervising the in-process echo
// server "mem".
type faulty struct {
	m     *runtime.Manager
	fj    *faultJournal
	j     *store.Journal
	srv   *mcp.Server
	calls *atomic.Int64 // mem's count of tools/call requests
}

// startFaulty starts a Manager with durability d supervising the
// in-process echo server "mem" on a faultJournal over a real journal.
func startFaulty(t *testing.T, d runtime.Durability) faulty {
	t.Helper()
	j, adapter := openJournal(t)
	fj := &faultJournal{storeJournal: adapter}
	srv := echoServer("mem")
	calls := toolsCallCounter(srv)
	opts := fastOpts(configOf())
	opts.InProcess = map[string]*mcp.Server{"mem": srv}
	opts.Durability = d
	m, err := runtime.New(fj, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, m, "mem ready", func(v *runtime.View) bool { return state(v, "mem").State == events.StateReady })
	return faulty{m: m, fj: fj, j: j, srv: srv, calls: calls}
}

// isJournalErr reports whether err is the Manager's refusal carrying the
// journal's own error.
func isJournalErr(err error) bool {
	var de *runtime.DegradedError
	return errors.Is(err, runtime.ErrJournal) && errors.Is(err, errDiskFull) && errors.As(err, &de)
}

// TestJournalFailureDegradesAndResumes: once an append fails, the Manager
// is degraded (its View says why and since when) and refuses every
// command and call with the journal's error and the promise of a retry,
// sending no call, in either durability (a relaxed call, whose records
// are only queued, is refused too). An observation that arrives meanwhile
// (mem's tool list changes) is kept. The Manager retries with backoff;
// once the journal takes appends again it resumes without a restart:
// journal.resumed records the outage, the kept observation follows it
// and reaches the catalog, and calls and commands work again. Nothing the
// refused commands asked for was journaled or done, and the session
// replays.
func TestJournalFailureDegradesAndResumes(t *testing.T) {
	for name, d := range map[string]runtime.Durability{"audit": runtime.Audit, "relaxed": runtime.Relaxed} {
		t.Run(name, func(t *testing.T) { testJournalFailureDegradesAndResumes(t, d) })
	}
}

func testJournalFailureDegradesAndResumes(t *testing.T, d runtime.Durability) {
	f := startFaulty(t, d)
	m, ctx := f.m, t.Context()
	before := len(sessionEvents(t, f.j, m.Session()))

	f.fj.failOn(events.KindStopRequested)
	if err := m.Stop(ctx, "mem"); !isJournalErr(err) || !strings.Contains(err.Error(), "retries") {
		t.Fatalf("Stop with the append failing: %v, want a DegradedError wrapping %v that says it retries", err, errDiskFull)
	}
	h := m.Snapshot().Journal
	if !h.Degraded || h.Final || !strings.Contains(h.Error, errDiskFull.Error()) || h.Since.IsZero() || h.NextRetry.Before(h.Since) {
		t.Fatalf("journal health after the failed append: %+v", h)
	}
	if st := state(m.Snapshot(), "mem"); st.State != events.StateReady {
		t.Errorf("mem is %s after a stop that was not journaled, want ready", st.State)
	}

	echo := map[string]any{"message": "hi"}
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"CallTool", func() error { _, err := m.CallTool(ctx, "mcp__mem__echo", echo); return err }},
		{"CallToolWith user-approved", func() error {
			_, err := m.CallToolWith(ctx, "mcp__mem__echo", echo, &runtime.CallOptions{UserApproved: "test"})
			return err
		}},
		{"Stop", func() error { return m.Stop(ctx, "mem") }},
		{"Reconnect", func() error { return m.Reconnect(ctx, "mem") }},
		{"ReconnectFailed", func() error { return m.ReconnectFailed(ctx) }},
		{"Reload", func() error { return m.Reload(ctx) }},
		{"Refresh", func() error { return m.Refresh(ctx, "mem") }},
		{"Approve", func() error { return m.Approve(ctx, "mem", "test") }},
		{"Reject", func() error { return m.Reject(ctx, "mem", "test") }},
	} {
		if err := op.do(); !isJournalErr(err) {
			t.Errorf("%s while degraded: %v, want a DegradedError wrapping %v", op.name, err, errDiskFull)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("mem received %d tools/call while degraded, want none", n)
	}

	// An observation while degraded: mem's list changes (a notification,
	// then a re-list whose tools.listed cannot be journaled yet).
	mcp.AddTool(f.srv, &mcp.Tool{Name: "added", Description: "added while the journal failed"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added"}}}, nil, nil
		})
	v := waitFor(t, m, "the re-list kept and two retries", func(v *runtime.View) bool { return v.Journal.Backlog > 0 && v.Journal.Attempts >= 2 })
	if _, ok := v.Tool("mcp__mem__added"); ok {
		t.Error("the catalog shows a tool whose listing is not journaled")
	}
	if refused, after := f.fj.counts(); refused < 3 || after != 0 {
		t.Errorf("%d appends refused, %d reached the journal while failing; want the failed one and its retries, none through", refused, after)
	}

	f.fj.heal()
	v = waitFor(t, m, "the journal resumed and the kept listing applied", func(v *runtime.View) bool {
		_, ok := v.Tool("mcp__mem__added")
		return !v.Journal.Degraded && ok
	})
	if r, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "after"}); err != nil || textOf(t, r) != "after" {
		t.Fatalf("call after the journal resumed: %v", err)
	}
	if err := m.Reload(ctx); err != nil {
		t.Errorf("Reload after the journal resumed: %v", err)
	}
	if err := m.Reconnect(ctx, "mem"); err != nil {
		t.Errorf("Reconnect after the journal resumed: %v", err)
	}
	waitFor(t, m, "mem ready again", func(v *runtime.View) bool { return state(v, "mem").State == events.StateReady })
	if err := m.Close(); err != nil {
		t.Errorf("Close after the journal resumed: %v", err)
	}

	evs := sessionEvents(t, f.j, m.Session())
	i := slices.IndexFunc(evs, func(e events.Event) bool { return e.Kind == events.KindJournalResumed })
	if i != before {
		t.Fatalf("journal.resumed at %d, want right after the %d events journaled before the failure:\n%s", i, before, dumpEvents(evs))
	}
	p := evs[i].Payload.(*events.JournalResumed)
	if p.Attempts < 2 || p.Error != errDiskFull.Error() || p.Backlog < 1 || p.Until <= p.Since || p.Dropped != 0 {
		t.Errorf("journal.resumed %+v", p)
	}
	listed := slices.IndexFunc(evs[i:], func(e events.Event) bool {
		l, ok := e.Payload.(*events.ToolsListed)
		return ok && slices.ContainsFunc(l.Tools, func(t events.Tool) bool { return t.Name == "added" })
	})
	if listed < 0 {
		t.Errorf("the listing kept while degraded was not journaled after journal.resumed:\n%s", dumpEvents(evs[i:]))
	}
	if n := slices.IndexFunc(evs[:i], func(e events.Event) bool { return e.Kind == events.KindStopRequested }); n >= 0 {
		t.Errorf("the refused stop was journaled at %d", n)
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("mem received %d tools/call, want 1 (the call after resuming)", n)
	}
	if err := replay.Verify(ctx, f.j, m.Session()); err != nil {
		t.Errorf("the session does not replay: %v", err)
	}
}

// TestJournalFailedCommitThatLandedIsFinal: a commit reported failed that
// did reach the journal (a failed fsync after bbolt wrote its pages) leaves
// the journal holding events whose decisions the Manager never applied:
// no retry can reconcile them, and the kernel may not have kept the pages.
// The retry finds the journal ahead of the Manager, which then refuses all
// work for good, saying to restart, and appends nothing more.
func TestJournalFailedCommitThatLandedIsFinal(t *testing.T) {
	f := startFaulty(t, runtime.Audit)
	m, ctx := f.m, t.Context()
	f.fj.landed = true
	f.fj.failOn(events.KindStopRequested)
	if err := m.Stop(ctx, "mem"); !isJournalErr(err) {
		t.Fatalf("Stop with the append failing: %v", err)
	}
	f.fj.heal()
	v := waitFor(t, m, "the journal found ahead", func(v *runtime.View) bool { return v.Journal.Final })
	if !v.Journal.Degraded || !v.Journal.NextRetry.IsZero() {
		t.Errorf("journal health %+v: want degraded, final, no retry", v.Journal)
	}
	_, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "x"})
	var de *runtime.DegradedError
	if !errors.As(err, &de) || !de.Final || !strings.Contains(err.Error(), "restart") {
		t.Errorf("call once the journal is found ahead: %v, want a final refusal that says to restart", err)
	}
	if err := m.Reconnect(ctx, "mem"); !isJournalErr(err) {
		t.Errorf("Reconnect: %v", err)
	}
	if _, after := f.fj.counts(); after != 0 {
		t.Errorf("%d appends reached the journal after the failed one, want none", after)
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("mem received %d tools/call, want none", n)
	}
}

// TestAuditedCallNotSentWhenStartNotJournaled: under Audit durability
// call.started must be durable before the request is sent; when its append
// fails the server never sees the call and the caller gets the journal
// error.
func TestAuditedCallNotSentWhenStartNotJournaled(t *testing.T) {
	f := startFaulty(t, runtime.Audit)
	m, fj, calls, ctx := f.m, f.fj, f.calls, t.Context()

	if r, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "first"}); err != nil || textOf(t, r) != "first" {
		t.Fatalf("call with a working journal: %v %+v", err, r)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("mem received %d tools/call for one call, want 1", n)
	}

	fj.failOn(events.KindCallStarted)
	r, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "second"})
	if !isJournalErr(err) || r != nil {
		t.Errorf("call whose call.started failed to append: %v %+v, want ErrJournal wrapping %v and no result", err, r, errDiskFull)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("mem received %d tools/call, want 1: the call whose call.started was not journaled was sent", n)
	}
}

// TestNewRefusesDeciderOutOfRange: a tunable the decider cannot honour (a
// storm limit past the launches it keeps) is refused by New, not
// silently ignored.
func TestNewRefusesDeciderOutOfRange(t *testing.T) {
	_, adapter := openJournal(t)
	opts := fastOpts(configOf())
	opts.Decider.StormLimit = fsm.MaxStormLimit + 1
	if _, err := runtime.New(adapter, opts); !errors.Is(err, fsm.ErrOptions) {
		t.Fatalf("New with storm limit %d: %v, want fsm.ErrOptions", opts.Decider.StormLimit, err)
	}
}

// TestRelaxedFlushFailureKeepsTheRecords: in Relaxed mode a call is
// answered before its records are journaled, and nothing durable need
// follow. When the hand-over of those records fails, the next call's
// record finds it: the Manager is degraded. That call, already on its
// way, runs, but its result is withheld (its outcome is kept); the next
// is refused and never sent. No record of a call that ran is lost: on
// resume the records handed over and those kept follow journal.resumed,
// and the session replays.
func TestRelaxedFlushFailureKeepsTheRecords(t *testing.T) {
	f := startFaulty(t, runtime.Relaxed)
	m, ctx := f.m, t.Context()
	f.fj.failOn(events.KindCallStarted)
	if r, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "first"}); err != nil || textOf(t, r) != "first" {
		t.Fatalf("relaxed call: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if refused, _ := f.fj.counts(); refused > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held records were not handed to the journal within 10 s")
		}
	}
	_, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "second"})
	if !isJournalErr(err) || !strings.Contains(err.Error(), "kept") {
		t.Errorf("the call that found the relaxed records failed: %v, want a DegradedError that says its outcome is kept", err)
	}
	if h := m.Snapshot().Journal; !h.Degraded || h.Error != errDiskFull.Error() {
		t.Errorf("journal health %+v, want degraded by %v", h, errDiskFull)
	}
	if _, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "refused"}); !isJournalErr(err) {
		t.Errorf("relaxed call while degraded: %v", err)
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("mem received %d tools/call, want 2: a call refused while degraded was sent, or one on its way was not", n)
	}

	f.fj.heal()
	waitFor(t, m, "the journal resumed", func(v *runtime.View) bool { return !v.Journal.Degraded })
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	evs := sessionEvents(t, f.j, m.Session())
	i := slices.IndexFunc(evs, func(e events.Event) bool { return e.Kind == events.KindJournalResumed })
	if i < 0 {
		t.Fatalf("no journal.resumed:\n%s", dumpEvents(evs))
	}
	if p := evs[i].Payload.(*events.JournalResumed); p.LostRelaxed != 0 || p.Backlog != 4 {
		t.Errorf("journal.resumed %+v: want the 4 records of the 2 calls kept, none lost", p)
	}
	var got []string
	for _, e := range evs[i+1:] {
		switch p := e.Payload.(type) {
		case *events.CallStarted:
			got = append(got, "started "+p.Args.Text)
		case *events.CallFinished:
			got = append(got, "finished "+p.Outcome)
		}
	}
	if want := []string{`started {"message":"first"}`, "finished ok", `started {"message":"second"}`, "finished ok"}; !slices.Equal(got, want) {
		t.Errorf("call records after journal.resumed: %q, want %q", got, want)
	}
	if err := replay.Verify(ctx, f.j, m.Session()); err != nil {
		t.Errorf("the session does not replay: %v", err)
	}
}

// TestCloseRetriesTheJournal: Close right after space returns, before the
// next retry is due, resumes the journal first: its stop is journaled and
// Close reports no error.
func TestCloseRetriesTheJournal(t *testing.T) {
	f := startFaulty(t, runtime.Audit)
	m, ctx := f.m, t.Context()
	f.fj.failOn("")
	if err := m.Reconnect(ctx, "mem"); !isJournalErr(err) {
		t.Fatalf("Reconnect with the append failing: %v", err)
	}
	f.fj.heal()
	if err := m.Close(); err != nil {
		t.Errorf("Close after the journal healed: %v", err)
	}
	evs := sessionEvents(t, f.j, m.Session())
	i := slices.IndexFunc(evs, func(e events.Event) bool { return e.Kind == events.KindJournalResumed })
	if i < 0 || !slices.ContainsFunc(evs[i:], func(e events.Event) bool { return e.Kind == events.KindSessionStopped }) {
		t.Errorf("want journal.resumed, then session.stopped:\n%s", dumpEvents(evs))
	}
}

// TestStartRefusedByTheJournal: when the session's first record cannot be
// journaled, Start fails with the journal's error and says to start again
// (its caller gives up on the Manager: no promise of a retry).
func TestStartRefusedByTheJournal(t *testing.T) {
	_, adapter := openJournal(t)
	fj := &faultJournal{storeJournal: adapter}
	fj.failOn(events.KindSessionStarted)
	opts := fastOpts(configOf())
	opts.InProcess = map[string]*mcp.Server{"mem": echoServer("mem")}
	m, err := runtime.New(fj, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.Start(t.Context())
	if !errors.Is(err, runtime.ErrJournal) || !errors.Is(err, errDiskFull) || !strings.Contains(err.Error(), "start again") || strings.Contains(err.Error(), "retries") {
		t.Errorf("Start with the journal failing: %v, want ErrJournal wrapping %v that says to start again", err, errDiskFull)
	}
}

// TestConfigChangeWhileDegraded: a config file edited while the journal
// fails is not lost: its reading is refused (nothing of it acted on), and
// once the journal resumes the watcher reads the file again and journals
// it, and the added server starts.
func TestConfigChangeWhileDegraded(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	fj := &faultJournal{storeJournal: adapter}
	w := newWorkspace(t)
	w.flagFile(map[string]any{"a": srv(bin)})
	m, err := runtime.New(fj, w.opts(true))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if rep, err := m.Start(t.Context()); err != nil || len(rep.Ready) != 1 {
		t.Fatalf("start %v %+v", err, rep)
	}
	fj.failOn("")
	w.flagFile(map[string]any{"a": srv(bin), "b": srv(bin)})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if refused, _ := fj.counts(); refused > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the edit was not read within 10 s")
		}
	}
	if _, ok := m.Snapshot().Server("b"); ok {
		t.Error("a server added while the journal failed is in the status")
	}
	fj.heal()
	waitFor(t, m, "b ready after the journal resumed", func(v *runtime.View) bool { return state(v, "b").State == events.StateReady })
	evs := sessionEvents(t, j, m.Session())
	i := slices.IndexFunc(evs, func(e events.Event) bool { return e.Kind == events.KindJournalResumed })
	if i < 0 || !slices.ContainsFunc(evs[i:], func(e events.Event) bool {
		c, ok := e.Payload.(*events.ConfigObserved)
		return ok && c.Trigger == "watch" && len(c.Servers) == 2
	}) {
		t.Errorf("want the edited config journaled after journal.resumed:\n%s", dumpEvents(evs))
	}
}

// TestCallOutcomeKeptWhileDegraded: an audited call whose call.started was
// journaled has run when its call.finished is refused: the caller gets no
// result (nothing not durable is shown as done), only an error saying the
// outcome is kept; once the journal resumes, the call.finished follows
// journal.resumed, so the call is not left without an outcome.
func TestCallOutcomeKeptWhileDegraded(t *testing.T) {
	f := startFaulty(t, runtime.Audit)
	m, ctx := f.m, t.Context()
	f.fj.failOn(events.KindCallFinished)
	r, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "ran"})
	if !isJournalErr(err) || !strings.Contains(err.Error(), "kept") || r != nil {
		t.Fatalf("call whose call.finished was refused: %+v, %v; want no result and a DegradedError saying the outcome is kept", r, err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("mem received %d tools/call, want 1", n)
	}
	f.fj.heal()
	waitFor(t, m, "the journal resumed", func(v *runtime.View) bool { return !v.Journal.Degraded })
	evs := sessionEvents(t, f.j, m.Session())
	i := slices.IndexFunc(evs, func(e events.Event) bool { return e.Kind == events.KindJournalResumed })
	var started string
	for _, e := range evs[:max(i, 0)] {
		if p, ok := e.Payload.(*events.CallStarted); ok {
			started = p.CallID
		}
	}
	if i < 0 || started == "" || !slices.ContainsFunc(evs[i:], func(e events.Event) bool {
		p, ok := e.Payload.(*events.CallFinished)
		return ok && p.CallID == started && p.Outcome == events.OutcomeOK
	}) {
		t.Errorf("want call.started before journal.resumed and its call.finished ok after:\n%s", dumpEvents(evs))
	}
	if err := replay.Verify(ctx, f.j, m.Session()); err != nil {
		t.Errorf("the session does not replay: %v", err)
	}
}
