package replay_test

import (
	"context"
	"maps"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/store"
)

// interleaved journals crash-loop.jsonl up to crashy's first listing (seq
// 21, crashy ready), then all of tool-pinning.jsonl, then the rest of
// crash-loop: two sessions whose events alternate in the global log.
func interleaved(t *testing.T) (j *store.MemJournal, crash, pin []events.Event) {
	t.Helper()
	crash, pin = golden(t, "crash-loop.jsonl"), golden(t, "tool-pinning.jsonl")
	j = store.NewMem()
	ctx := context.Background()
	for _, part := range [][]events.Event{crash[:21], pin, crash[21:]} {
		if _, err := j.Append(ctx, part[0].Session, store.Any, part); err != nil {
			t.Fatal(err)
		}
	}
	return j, crash, pin
}

func approvalsOf(snap *replay.Snapshot) map[string]string {
	out := map[string]string{}
	for _, a := range snap.Approvals {
		if a.Decision != nil {
			out[a.Server] = a.Decision.Decision
		}
	}
	return out
}

func statusOf(snap *replay.Snapshot) map[string]events.ServerState {
	out := map[string]events.ServerState{}
	for _, s := range snap.Status.Servers {
		out[s.Name] = s.State
	}
	return out
}

// The snapshot after an event includes that event and nothing after it:
// status and catalog from the session's own events, approvals from every
// session's.
func TestAtIncludesTheEventAndNothingAfter(t *testing.T) {
	j, crash, pin := interleaved(t)
	ctx := context.Background()
	sid := pin[0].Session
	// pin's approval is its seq 7; its first listing, 14, makes it ready at 15.
	for _, c := range []struct {
		seq      uint64
		approved bool
		state    events.ServerState
		listed   bool // pin's tools are in the catalog
	}{
		{6, false, events.StateStopped, false},
		{7, true, events.StateStopped, false},
		{14, true, events.StateHandshaking, true},
		{15, true, events.StateReady, true},
	} {
		snap, err := replay.At(ctx, j, sid, c.seq)
		if err != nil {
			t.Fatal(err)
		}
		target := pin[c.seq-1]
		if snap.Session != sid || snap.Seq != c.seq || snap.Time != target.Time || len(snap.Events) != int(c.seq) ||
			snap.Events[c.seq-1].ID != target.ID {
			t.Errorf("At %d located seq %d time %d with %d events, want seq %d time %d", c.seq, snap.Seq, snap.Time, len(snap.Events), c.seq, target.Time)
		}
		want := map[string]string{}
		if c.approved {
			want["pin"] = events.DecisionApprove
		}
		if got := approvalsOf(snap); !maps.Equal(got, want) {
			t.Errorf("approvals after seq %d: %v, want %v", c.seq, got, want)
		}
		// crashy was ready in the other session at the time: not here.
		if got := statusOf(snap); len(got) != 1 || got["pin"] != c.state {
			t.Errorf("status after seq %d: %v, want pin %s only", c.seq, got, c.state)
		}
		servers := map[string]bool{}
		for _, e := range snap.Catalog.Tools {
			servers[e.Server] = true
		}
		if !maps.Equal(servers, map[string]bool{"pin": true}) && c.listed || len(servers) != 0 && !c.listed {
			t.Errorf("catalog after seq %d has tools of %v, want pin's %v and no other's", c.seq, servers, c.listed)
		}
		if srv, _ := snap.State.Server("pin"); srv.Phase != c.state {
			t.Errorf("decider state after seq %d: pin %s, want %s", c.seq, srv.Phase, c.state)
		}
	}
	// The global position orders the sessions: crash-loop's seq 22 came
	// after all of pin's events, and its snapshot folds them.
	snap, err := replay.At(ctx, j, crash[0].Session, 22)
	if err != nil {
		t.Fatal(err)
	}
	if got := approvalsOf(snap); got["pin"] != events.DecisionApprove {
		t.Errorf("approvals after crash-loop seq 22: %v, want pin's from the other session", got)
	}
	if got, want := snap.GPos, uint64(21+len(pin)+1); got != want {
		t.Errorf("crash-loop seq 22 at gpos %d, want %d", got, want)
	}
}
