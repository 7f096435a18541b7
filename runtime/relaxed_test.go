package runtime_test

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
)

// TestRelaxedRecordsReachTheJournal checks Relaxed mode's hold: call
// records are not waited for, yet they are committed within a few
// milliseconds on their own (no Close, no other journal activity), in seq
// order, and a durable input decided after them commits them first.
func TestRelaxedRecordsReachTheJournal(t *testing.T) {
	j, adapter := openJournal(t)
	m, err := runtime.New(adapter, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": echoServer("mem")},
		Seed: 7, PingInterval: -1, Durability: runtime.Relaxed})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	count := func() (calls int) {
		for _, e := range sessionEvents(t, j, m.Session()) {
			if e.Kind == events.KindCallStarted || e.Kind == events.KindCallFinished {
				calls++
			}
		}
		return calls
	}
	const n = 5
	for range n {
		if _, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for count() < 2*n {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s the journal holds %d of the %d relaxed call records: the hold never ended", count(), 2*n)
		}
		time.Sleep(time.Millisecond)
	}

	// A call, then at once a durable command: the command's commit
	// carries the held records ahead of it.
	if _, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(ctx, "mem"); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 2*(n+1) {
		t.Errorf("after the durable stop the journal holds %d call records, want %d", got, 2*(n+1))
	}
	for i, e := range sessionEvents(t, j, m.Session()) {
		if e.Seq != uint64(i+1) {
			t.Fatalf("seq %d at index %d", e.Seq, i)
		}
	}
}
