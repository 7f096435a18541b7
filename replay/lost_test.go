package replay_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
)

// lostScene is a session in which mcpledger was killed with calls in
// flight and the next session closed them as lost: one call finished
// before (ok), two were lost (one with no catalog name recorded), one
// finished lost by a connection lost earlier, and one call.finished names
// a call that never started.
func lostScene() *tlScene {
	s := newTLScene()
	s.call("a", "done", 10, 5, events.OutcomeOK, nil)
	s.add(20, "a", &events.CallStarted{CallID: "k1", Tool: "slow", Name: "mcp__a__slow"})
	s.add(21, "b", &events.CallStarted{CallID: "k2", Tool: "old"})
	s.add(22, "a", &events.CallStarted{CallID: "k3", Tool: "slow", Name: "mcp__a__slow"})
	s.add(23, "a", &events.CallFinished{CallID: "k3", Outcome: events.OutcomeLost, Error: "connection lost"})
	s.add(24, "a", &events.CallFinished{CallID: "ghost", Outcome: events.OutcomeLost})
	s.add(900, "a", &events.CallFinished{CallID: "k1", Outcome: events.OutcomeLost, Error: "killed"})
	s.add(900, "b", &events.CallFinished{CallID: "k2", Outcome: events.OutcomeLost, Error: "killed"})
	s.add(900, "", &events.StopRequested{Reason: events.ReasonInterrupted})
	return s
}

func TestLostCalls(t *testing.T) {
	s := lostScene()
	got := replay.LostCalls(s.evs)
	at := s.at(900).UnixNano()
	want := []replay.LostCall{
		{CallID: "k3", Server: "a", Name: "mcp__a__slow", Tool: "slow", Started: 6, Seq: 7, Time: s.at(23).UnixNano(), Error: "connection lost"},
		{CallID: "k1", Server: "a", Name: "mcp__a__slow", Tool: "slow", Started: 4, Seq: 9, Time: at, Error: "killed"},
		{CallID: "k2", Server: "b", Name: "mcp__b__old", Tool: "old", Started: 5, Seq: 10, Time: at, Error: "killed"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LostCalls =\n%+v\nwant\n%+v", got, want)
	}
	// A call lost twice (a second call.finished) counts once.
	again := append(s.evs[:len(s.evs):len(s.evs)], s.evs[8])
	if n := len(replay.LostCalls(again)); n != 3 {
		t.Errorf("a repeated call.finished gives %d lost calls", n)
	}
}

// At and Why show the calls lost by the moment asked, Why only the
// tool's.
func TestAtAndWhyShowLostCalls(t *testing.T) {
	s := lostScene()
	j := load(t, s.evs)
	sid := s.evs[0].Session
	for _, c := range []struct {
		seq  uint64
		all  []string
		slow []string
	}{{6, nil, nil}, {7, []string{"k3"}, []string{"k3"}}, {9, []string{"k3", "k1"}, []string{"k3", "k1"}}, {0, []string{"k3", "k1", "k2"}, []string{"k3", "k1"}}} {
		snap, err := replay.At(context.Background(), j, sid, c.seq)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := replay.Why(context.Background(), j, sid, "mcp__a__slow", c.seq)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(snap.Lost); !reflect.DeepEqual(got, c.all) {
			t.Errorf("At seq %d: lost %v, want %v", c.seq, got, c.all)
		}
		if got := ids(ex.Lost); !reflect.DeepEqual(got, c.slow) {
			t.Errorf("Why mcp__a__slow at seq %d: lost %v, want %v", c.seq, got, c.slow)
		}
	}
}

func ids(lost []replay.LostCall) []string {
	var out []string
	for _, c := range lost {
		out = append(out, c.CallID)
	}
	return out
}

// A call lost when mcpledger was killed says so, and that its outcome
// is unknown, not how long it took (a call whose connection was lost has
// its duration); the summary counts both lost.
func TestTimelineShowsLostCalls(t *testing.T) {
	page := lostScene().render(t)
	hs := tlHovers(page, "a · call slow (mcp__a__slow): lost")
	if len(hs) != 2 || !strings.HasPrefix(hs[0].title, "a · call slow (mcp__a__slow): lost (mcpledger was killed with it in flight: its outcome is unknown)\nstarted") ||
		!strings.Contains(hs[0].title, "error killed") ||
		!strings.HasPrefix(hs[1].title, "a · call slow (mcp__a__slow): lost in 1µs\n") {
		t.Errorf("lost calls' tooltips: %q", hs)
	}
	if row := strings.Join(tlSummary(t, page, "a"), " | "); !strings.Contains(row, "2 lost") {
		t.Errorf("summary row of a: %s", row)
	}
}
