package replay_test

import (
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// TestTimelineSessionFlags checks the session-wide vertical lines: config
// errors, a reconnect of every failed server, a stop of the session; and
// that a stop or reconnect of one server is a mark in its lane instead.
func TestTimelineSessionFlags(t *testing.T) {
	s := newTLScene()
	s.add(100, "", &events.ConfigObserved{Trigger: "watch", Errors: []string{"a.json:3:1: unexpected }", "b.json:1:1: not JSON"}})
	s.add(300, "", &events.ReconnectRequested{FailedOnly: true, By: "cli"})
	s.to(350, "s", "", events.StateReady, "ready", 1)
	s.add(400, "s", &events.StopRequested{Reason: events.ReasonStopRequested, By: "user:cli"})
	s.add(500, "s", &events.ReconnectRequested{})
	s.add(900, "", &events.StopRequested{Reason: events.ReasonShutdown})
	page := s.render(t)
	for _, c := range []struct{ title, label, color string }{
		{"09:26:53.000 (+102µs) · #2 config.observed\na.json:3:1: unexpected }\nb.json:1:1: not JSON", "config errors", "#dc2626"},
		{"reconnect of every failed server requested by cli\n09:26:53.000 (+307µs) · #3 reconnect.requested", "reconnect", "#0369a1"},
		{"stop requested (shutdown) by -\n09:26:53.000 (+921µs) · #7 stop.requested", "stop", "#334155"},
	} {
		h := tlHover1(t, page, c.title)
		if h.title != c.title {
			t.Errorf("flag %q, want %q", h.title, c.title)
		}
		if got := h.attr(t, "path", "stroke", 0); got != c.color {
			t.Errorf("flag %q in %s, want %s", c.label, got, c.color)
		}
		if got := h.text(); got != c.label {
			t.Errorf("flag %q labelled %q", c.label, got)
		}
	}
	for mark, text := range map[string]string{
		"s · stop requested (stop_requested) by user:cli\n": "■",
		"s · reconnect requested by -\n":                    "↻",
	} {
		if got := tlHover1(t, page, mark).text(); got != text {
			t.Errorf("%q: glyph %q, want %q", mark, got, text)
		}
	}
}

// TestTimelineCallTooltip checks a call's tooltip says who allowed it,
// what it retries, what happened to its output, and that a finish of a
// call never started is ignored.
func TestTimelineCallTooltip(t *testing.T) {
	s := newTLScene()
	s.add(100, "s", &events.CallDecided{CallID: "c2", Tool: "rm", Decision: events.CallAllow, By: "approver:ci", Policy: "ask"})
	s.add(110, "s", &events.CallStarted{CallID: "c2", Tool: "rm", Name: "mcp__s__rm", Caller: "agent", Attempt: 2, RetryOf: "c1",
		Args: events.Blob{Text: `{"path":"/tmp/x"}`, Size: 17}})
	s.add(120, "s", &events.CallFinished{CallID: "nobody", Outcome: events.OutcomeOK})
	s.add(130, "s", &events.CallFinished{CallID: "c2", Outcome: events.OutcomeLost, Error: "connection lost", Retrying: true,
		Result: events.Blob{Text: "partial", Size: 9000, Truncated: true}, RenderedChars: 9000, CutChars: 8000})
	s.add(140, "s", &events.CallStarted{CallID: "c3", Tool: "ls"})
	page := s.render(t)
	want := "s · call rm (mcp__s__rm): lost in 20µs\n" +
		"started 09:26:53.000 (+112µs) (#3), by agent, to attempt 2\n" +
		"allowed by approver:ci (policy ask)\n" +
		"retry of call c1\n" +
		`args {"path":"/tmp/x"} (17 B)` + "\n" +
		"error connection lost\n" +
		"result partial (9000 B, truncated)\n" +
		"output cut: 8000 of 9000 characters removed\n" +
		"a reconnect and one retry follow"
	if got := tlHover1(t, page, "s · call rm").title; got != want {
		t.Errorf("call tooltip:\n%s\nwant\n%s", got, want)
	}
	if got, want := tlHover1(t, page, "s · call ls").title, "s · call ls (-): unfinished\nstarted 09:26:53.000 (+143µs) (#6)\nargs  (0 B)"; got != want {
		t.Errorf("a bare call's tooltip:\n%s\nwant\n%s", got, want)
	}
	if n := len(tlHovers(page, "s · call ")); n != 2 {
		t.Errorf("%d calls drawn, want 2: a finish without a start draws nothing", n)
	}
}

// TestTimelineFailureTooltip checks a failure's tooltip names its cause
// and quotes the stderr of the process whose exit caused it, when there
// is any.
func TestTimelineFailureTooltip(t *testing.T) {
	s := newTLScene()
	s.to(100, "s", "", events.StateReady, "ready", 1)
	exit := s.add(200, "s", &events.ProcessExited{Attempt: 1, PID: 7, Signal: "SIGKILL", StderrTail: []string{"out of memory"}})
	s.addCaused(200, "s", exit, &events.ServerTransitioned{From: events.StateReady, To: events.StateReconnecting, Trigger: "fail", Attempt: 1,
		Error: &events.ClassifiedError{Class: events.ErrExit, Signal: "SIGKILL"}})
	s.to(300, "quiet", "", events.StateReady, "ready", 1)
	exit = s.add(400, "quiet", &events.ProcessExited{Attempt: 1, PID: 8, ExitCode: 3})
	s.addCaused(400, "quiet", exit, &events.ServerTransitioned{From: events.StateReady, To: events.StateReconnecting, Trigger: "fail", Attempt: 1,
		Error: &events.ClassifiedError{Class: events.ErrExit, ExitCode: 3}})
	page := s.render(t)
	if got, want := tlHover1(t, page, "s · failure").title, "s · failure of attempt 1: exit\n09:26:53.000 (+204µs) · #4 server.transitioned\n"+
		"cause #3 process.exited pid 7 signal SIGKILL\nstderr:\n  out of memory"; got != want {
		t.Errorf("failure tooltip:\n%s\nwant\n%s", got, want)
	}
	if got, want := tlHover1(t, page, "quiet · failure").title, "quiet · failure of attempt 1: exit\n09:26:53.000 (+409µs) · #7 server.transitioned\n"+
		"cause #6 process.exited pid 8 code 3"; got != want {
		t.Errorf("failure tooltip without stderr:\n%s\nwant\n%s", got, want)
	}
	if got := tlHover1(t, page, "s · reconnecting").title; !strings.Contains(got, "\ncause #3 process.exited pid 7 signal SIGKILL\n") {
		t.Errorf("the band after the failure %q: want its cause", got)
	}
}

// TestTimelineToolsChangedTooltip checks a tools-changed mark says which
// tools were withheld, or that the definitions match again.
func TestTimelineToolsChangedTooltip(t *testing.T) {
	s := newTLScene()
	s.add(100, "s", &events.ToolsChanged{Changed: []events.ToolChange{{Name: "read"}, {Name: "write"}}})
	s.add(500, "s", &events.ToolsChanged{})
	page := s.render(t)
	for _, want := range []string{
		"s · withheld, definitions changed since approval: read, write\n",
		"s · tool definitions match the approval again\n",
	} {
		if h := tlHovers(page, want); len(h) != 1 {
			t.Errorf("%d marks %q, want 1", len(h), want)
		}
	}
}

// TestTimelineFlagLabelsNeedRoom checks a flag is labelled when its label
// (46 px for "reload") fits with 2 px to spare before the next flag or
// the end of the axis, and is a small pennant otherwise.
func TestTimelineFlagLabelsNeedRoom(t *testing.T) {
	for _, c := range []struct {
		name   string
		at     []float64 // reloads, px
		labels string    // per reload: L labelled, P pennant
	}{
		{"48 px to the next", []float64{100, 148}, "PL"},
		{"49 px to the next", []float64{100, 149}, "LL"},
		{"48 px to the end", []float64{976}, "P"},
		{"49 px to the end", []float64{975}, "L"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTLScene()
			for _, px := range c.at {
				s.add(px, "", &events.ReloadDecided{Trigger: "watch"})
			}
			var got string
			for _, h := range tlHovers(s.render(t), "reload · watch") {
				if h.text() == "reload" {
					got += "L"
				} else {
					got += "P"
				}
			}
			if got != c.labels {
				t.Errorf("flags %s, want %s", got, c.labels)
			}
		})
	}
}
