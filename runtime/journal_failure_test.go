package runtime_test

// A journal append that fails: the Manager refuses all later work with the
// journal's error, and an audited call whose call.started cannot be
// journaled is never sent.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/runtime"
)

// errDiskFull is the append failure faultJournal injects.
var errDiskFull = errors.New("injected: disk full")

// faultJournal passes every append through to a real journal except one:
// once failOn(kind) is armed, the first append that carries an event of
// that kind is refused with errDiskFull and writes nothing. Every append
// after it reaches the real journal again, which would accept it (the
// refused one left no gap).
type faultJournal struct {
	runtime.Journal

	mu       sync.Mutex
	failKind events.Kind // armed while not ""
	failed   bool        // the one append was refused
	after    int         // appends made after the refused one
}

func (f *faultJournal) failOn(kind events.Kind) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failKind = kind
}

// appendsAfterFailure returns how many appends the Manager made after the
// refused one.
func (f *faultJournal) appendsAfterFailure() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.after
}

func (f *faultJournal) Append(ctx context.Context, sid uuid.UUID, evs []events.Event) error {
	if f.refuse(evs) {
		return errDiskFull
	}
	return f.Journal.Append(ctx, sid, evs)
}

func (f *faultJournal) AppendLater(sid uuid.UUID, evs []events.Event) func(context.Context) error {
	if f.refuse(evs) {
		return func(context.Context) error { return errDiskFull }
	}
	return f.Journal.AppendLater(sid, evs)
}

// refuse reports whether evs is the append to fail, and counts the appends
// that follow it.
func (f *faultJournal) refuse(evs []events.Event) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed {
		f.after++
		return false
	}
	if f.failKind != "" && slices.ContainsFunc(evs, func(e events.Event) bool { return e.Kind == f.failKind }) {
		f.failKind, f.failed = "", true
		return true
	}
	return false
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

// startFaulty starts a Manager with durability d supervising the
// in-process echo server "mem" on a faultJournal over a real journal. It
// returns the manager, the journal, and mem's count of tools/call requests.
func startFaulty(t *testing.T, d runtime.Durability) (*runtime.Manager, *faultJournal, *atomic.Int64) {
	t.Helper()
	_, adapter := openJournal(t)
	fj := &faultJournal{Journal: adapter}
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
	return m, fj, calls
}

// isJournalErr reports whether err is the Manager's refusal carrying the
// journal's own error.
func isJournalErr(err error) bool {
	return errors.Is(err, runtime.ErrJournal) && errors.Is(err, errDiskFull)
}

// TestJournalFailureIsSticky: once one append fails, the Manager refuses
// every later command and call with that journal error, although the
// journal would accept the next append: it cannot know which decisions
// reached the disk, so it builds on none of them. Nothing more is
// appended, and no refused call reaches the server, in either durability:
// a relaxed call, whose records are only queued, is refused too.
func TestJournalFailureIsSticky(t *testing.T) {
	for name, d := range map[string]runtime.Durability{"audit": runtime.Audit, "relaxed": runtime.Relaxed} {
		t.Run(name, func(t *testing.T) { testJournalFailureIsSticky(t, d) })
	}
}

func testJournalFailureIsSticky(t *testing.T, d runtime.Durability) {
	m, fj, calls := startFaulty(t, d)
	ctx := t.Context()

	fj.failOn(events.KindStopRequested)
	if err := m.Stop(ctx, "mem"); !isJournalErr(err) {
		t.Fatalf("Stop with the append failing: %v, want ErrJournal wrapping %v", err, errDiskFull)
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
			t.Errorf("%s after the failed append: %v, want ErrJournal wrapping %v", op.name, err, errDiskFull)
		}
	}
	if err := m.Close(); !isJournalErr(err) {
		t.Errorf("Close: %v, want ErrJournal wrapping %v (its stop could not be journaled)", err, errDiskFull)
	}
	if n := fj.appendsAfterFailure(); n != 0 {
		t.Errorf("the manager appended %d times after the failed append, want none", n)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("mem received %d tools/call after the failed append, want none", n)
	}
}

// TestAuditedCallNotSentWhenStartNotJournaled: under Audit durability
// call.started must be durable before the request is sent; when its append
// fails the server never sees the call and the caller gets the journal
// error.
func TestAuditedCallNotSentWhenStartNotJournaled(t *testing.T) {
	m, fj, calls := startFaulty(t, runtime.Audit)
	ctx := t.Context()

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
