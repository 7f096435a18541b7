package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/store"
)

// TestNextRunClosesInterruptedSession: a session whose mcpledger died (no
// session.stopped) is closed by the next run with reason interrupted, and
// still replays.
func TestNextRunClosesInterruptedSession(t *testing.T) {
	_, a1 := openJournal(t)
	m1, _ := runtime.New(a1, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": echoServer("mem")}, Seed: 3})
	if _, err := m1.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The journal as a kill -9 would leave it: everything up to now, no stop.
	j2, a2 := openJournal(t)
	old := sessionEvents(t, a1.J, m1.Session())
	if _, err := j2.Append(context.Background(), m1.Session(), store.NoStream, old); err != nil {
		t.Fatal(err)
	}
	m1.Close()

	m2, _ := runtime.New(a2, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": echoServer("mem")}})
	if _, err := m2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	closed := sessionEvents(t, j2, m1.Session())
	tail := kinds(closed[len(old):], "")
	if len(tail) < 3 || tail[0] != "stop.requested" || tail[len(tail)-1] != "session.stopped" {
		t.Fatalf("the interrupted session was closed with %v", tail)
	}
	if p := closed[len(old)].Payload.(*events.StopRequested); p.Reason != events.ReasonInterrupted {
		t.Errorf("reason %s", p.Reason)
	}
	if err := replay.Verify(context.Background(), j2, m1.Session()); err != nil {
		t.Errorf("closed session does not replay: %v", err)
	}
	first := sessionEvents(t, j2, m2.Session())[0].Payload.(*events.SessionStarted)
	if first.Previous != m1.Session().String() {
		t.Errorf("new session's previous = %q", first.Previous)
	}
}

// TestNextRunClosesLostCalls: calls an interrupted session left without
// an outcome (its mcpledger was killed with them in flight) are closed by
// the next run, each with one call.finished of outcome lost, before the
// stop; calls that finished keep their own outcome; the session still
// replays.
func TestNextRunClosesLostCalls(t *testing.T) {
	_, a1 := openJournal(t)
	srv := echoServer("mem")
	release := make(chan struct{})
	mcp.AddTool(srv, &mcp.Tool{Name: "hang", Description: "waits until released"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	m1, _ := runtime.New(a1, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": srv}, Seed: 3})
	if _, err := m1.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := m1.CallTool(t.Context(), "mcp__mem__echo", map[string]any{"message": "done"}); err != nil {
		t.Fatal(err)
	}
	const hanging = 3
	for range hanging {
		go m1.CallTool(t.Context(), "mcp__mem__hang", map[string]any{}) //nolint:errcheck // ended by Close
	}
	var old []events.Event
	for deadline := time.Now().Add(10 * time.Second); ; {
		old = sessionEvents(t, a1.J, m1.Session())
		n := 0
		for _, k := range kinds(old, "mem") {
			if k == "call.started" {
				n++
			}
		}
		if n == hanging+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hanging calls never started: %s", dumpEvents(old))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The journal as a kill -9 would leave it: three calls in flight.
	j2, a2 := openJournal(t)
	if _, err := j2.Append(context.Background(), m1.Session(), store.NoStream, old); err != nil {
		t.Fatal(err)
	}
	close(release)
	m1.Close()

	m2, _ := runtime.New(a2, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": echoServer("mem")}})
	if _, err := m2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	closed := sessionEvents(t, j2, m1.Session())
	outcomes := map[string][]string{} // call ID → outcomes
	var started []string
	stopAt, lostAt := 0, 0
	for i, e := range closed {
		switch p := e.Payload.(type) {
		case *events.CallStarted:
			started = append(started, p.CallID)
		case *events.CallFinished:
			outcomes[p.CallID] = append(outcomes[p.CallID], p.Outcome)
			if p.Outcome == events.OutcomeLost {
				lostAt = i
				if i < len(old) || p.Error != runtime.LostCallError || e.Server != "mem" {
					t.Errorf("lost call recorded as %s at seq %d (server %q, error %q)", p.CallID, e.Seq, e.Server, p.Error)
				}
			}
		case *events.StopRequested:
			stopAt = i
		}
	}
	lost := 0
	for _, id := range started {
		switch o := outcomes[id]; {
		case len(o) != 1:
			t.Errorf("call %s has outcomes %v, want exactly one", id, o)
		case o[0] == events.OutcomeLost:
			lost++
		case o[0] != events.OutcomeOK:
			t.Errorf("call %s: outcome %s", id, o[0])
		}
	}
	if lost != hanging || len(started) != hanging+1 {
		t.Errorf("%d of %d calls lost, want %d of %d", lost, len(started), hanging, hanging+1)
	}
	if stopAt < lostAt {
		t.Errorf("stop.requested (index %d) comes before the last lost call (index %d)", stopAt, lostAt)
	}
	if err := replay.Verify(context.Background(), j2, m1.Session()); err != nil {
		t.Errorf("closed session does not replay: %v", err)
	}
}
