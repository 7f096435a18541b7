package runtime_test

import (
	"context"
	"testing"

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
