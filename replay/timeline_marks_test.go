package replay_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// fail journals a failure of server at px, ending attempt.
func (s *tlScene) fail(px float64, server string, attempt int) {
	s.add(px, server, &events.ServerTransitioned{From: events.StateReady, To: events.StateReconnecting, Trigger: "fail", Attempt: attempt,
		Error: &events.ClassifiedError{Class: events.ErrExit, ExitCode: attempt}})
}

// TestTimelineMarksTooCloseMerge checks marks of one kind closer than their
// glyph are drawn as one, at the first, with a tooltip naming how many and
// the first and the last; marks just far enough apart stay two.
func TestTimelineMarksTooCloseMerge(t *testing.T) {
	s := newTLScene()
	s.fail(100, "near", 1) // failure glyphs need 14 px
	s.fail(113, "near", 2)
	s.fail(100, "far", 1)
	s.fail(114, "far", 2)
	retry := func(px float64, server string, attempt int) {
		s.to(px, server, events.StateReconnecting, events.StateLaunching, "retry", attempt)
	}
	retry(100, "badges", 2) // one-digit badges need 18 px
	retry(117, "badges", 3)
	retry(135, "badges", 4)
	retry(100, "wide-badges", 11) // two-digit badges need 20.8 px
	retry(120, "wide-badges", 12)
	page := s.render(t)

	near := tlHover1(t, page, "near · 2 failures")
	if want := "near · 2 failures from 09:26:53.000 (+102µs) to 09:26:53.000 (+115µs), too close together to draw apart\n\n" +
		"the first:\nfailure of attempt 1: exit\n09:26:53.000 (+102µs) · #2 server.transitioned\n\n" +
		"the last:\nfailure of attempt 2: exit\n09:26:53.000 (+115µs) · #3 server.transitioned"; near.title != want {
		t.Errorf("merged failures:\n%s\nwant\n%s", near.title, want)
	}
	if cx, cy := near.num(t, "circle", "cx", 0), near.num(t, "circle", "cy", 0); cx != tlPlotX+100 || cy != tlLaneTop(2)+tlFailDy {
		t.Errorf("merged failures at (%v, %v), want on the band at the first, (%v, %v)", cx, cy, tlPlotX+100, tlLaneTop(2)+tlFailDy)
	}
	if n := len(tlHovers(page, "far · failure of attempt")); n != 2 {
		t.Errorf("failures 14 px apart: %d marks, want 2", n)
	}
	// A merged run of badges shows the latest attempt's number.
	if h := tlHovers(page, "badges · 2 retry attempts from"); len(h) != 1 || h[0].text() != "3" {
		t.Errorf("badges 17 px apart: %d merged marks, want attempts 2 and 3 as one showing 3", len(h))
	}
	if h := tlHovers(page, "badges · attempt "); len(h) != 1 || h[0].text() != "4" {
		t.Errorf("badges 18 px apart: %d single marks, want attempt 4 alone", len(h))
	}
	wide := tlHovers(page, "wide-badges · 2 retry attempts from")
	if len(wide) != 1 || wide[0].text() != "12" {
		t.Fatalf("two-digit badges 20 px apart: %d merged marks, want one showing 12", len(wide))
	}
	// The badge holds its 10.8 px of text with 3 px on each side.
	if x, w := wide[0].num(t, "rect", "x", 0), wide[0].num(t, "rect", "width", 0); x != tlPlotX+100-8.4 || w != 16.8 {
		t.Errorf("badge 12 at x %v width %v, want %v and 16.8", x, w, tlPlotX+100-8.4)
	}
}

// TestTimelineVerdictRightOfGlyphs checks a reload verdict's text starts
// right of the glyphs drawn at the same time, and of the verdict before
// it, instead of over them.
func TestTimelineVerdictRightOfGlyphs(t *testing.T) {
	s := newTLScene()
	reload := func(px float64, server, verdict string) {
		s.add(px, "", &events.ReloadDecided{Trigger: "watch", Verdicts: []events.ReloadVerdict{{Server: server, Verdict: verdict}}})
	}
	s.add(100, "asked", &events.ApprovalRequested{Hash: "sha256:1"})
	reload(100, "asked", events.VerdictRestart) // "restart" is 42 px at 10 px
	reload(130, "asked", events.VerdictRemove)
	s.to(100, "badge", events.StateReconnecting, events.StateLaunching, "retry", 12)
	reload(100, "badge", events.VerdictRestart)
	s.add(100, "denied", &events.CallDecided{CallID: "x", Tool: "rm", Decision: events.CallDeny, By: "policy", Policy: "never"})
	reload(100, "denied", events.VerdictRestart)
	reload(100, "alone", events.VerdictAdd)
	page := s.render(t)
	for _, c := range []struct {
		verdict string
		x       float64 // of its text
	}{
		{"asked · reload (watch): restart", 112 + 7 - 2 + 4},     // the approval glyph's 7 px, less 2
		{"asked · reload (watch): remove", 117 + 6 + 42 - 2 + 4}, // the previous verdict's text
		{"badge · reload (watch): restart", 112 + 8.4 - 2 + 4},   // half the "12" badge and 3 px
		{"denied · reload (watch): restart", 112 + 4},            // the denied call's glyph is in the calls row
		{"alone · reload (watch): add", 112 + 4},
	} {
		if x := tlHover1(t, page, c.verdict).num(t, "text", "x", 0); x != c.x {
			t.Errorf("%s: text at x %v, want %v", c.verdict, x, c.x)
		}
	}
}

// TestTimelineTimers checks a timer is a bracket from when it was
// scheduled to when it fired (or was due, dashed, when it never did), at
// least 1 px long, labelled with its delay when that fits, and that
// timers too close to tell apart are drawn as one.
func TestTimelineTimers(t *testing.T) {
	s := newTLScene()
	id := uint64(0)
	timer := func(server string, px, firePx, firedPx float64, purpose string, delayMs, ceilMs int64) {
		id++
		s.add(px, server, &events.TimerScheduled{TimerID: id, Purpose: purpose, Attempt: 2, Retry: 1, DelayMs: delayMs, CeilMs: ceilMs,
			FireAt: s.at(firePx).UnixNano()})
		if firedPx >= 0 {
			s.add(firedPx, server, &events.TimerFired{TimerID: id, Purpose: purpose, Attempt: 2})
		}
	}
	// "500ms" is 27 px at 9 px: a label needs a bracket over 43 px.
	timer("labelled", 100, 144, 144, events.TimerBackoff, 500, 1000)
	timer("tight", 100, 143, 143, events.TimerBackoff, 500, 0)
	timer("instant", 100, 100, 100, events.TimerBackoff, 0, 0)
	timer("dead", 100, 300, -1, events.TimerHold, 60000, 0)
	timer("close", 100, 102, 102, events.TimerBackoff, 1, 0)
	timer("close", 109, 111, 111, events.TimerBackoff, 1, 0)
	timer("apart", 100, 102, 102, events.TimerBackoff, 1, 0)
	timer("apart", 110, 112, 112, events.TimerBackoff, 1, 0)
	page := s.render(t)

	line := func(i int) float64 { return tlLaneTop(i) + tlTimerDy }
	labelled := tlHover1(t, page, "labelled · backoff timer 1")
	if got, want := labelled.attr(t, "path", "d", 0), fmt.Sprintf("M112 %vv8M112 %vH156", line(4)-4, line(4)); got != want {
		t.Errorf("labelled: bracket %q, want %q", got, want)
	}
	if got := labelled.text(); got != "500ms" {
		t.Errorf("labelled: label %q, want 500ms", got)
	}
	if x, y := labelled.num(t, "text", "x", 0), labelled.num(t, "text", "y", 0); x != 134 || y != line(4)-3 {
		t.Errorf("labelled: label at (%v, %v), want centred over the bracket, (134, %v)", x, y, line(4)-3)
	}
	if want := "labelled · backoff timer 1 → attempt 2\nscheduled 09:26:53.000 (+102µs): 500ms (retry 1, jitter within 1s)\nfired 09:26:53.000 (+147µs)"; labelled.title != want {
		t.Errorf("labelled: title\n%s\nwant\n%s", labelled.title, want)
	}
	tight := tlHover1(t, page, "tight · ")
	if got := tight.text(); got != "" {
		t.Errorf("tight: label %q, want none on a 43 px bracket", got)
	}
	if strings.Contains(tight.title, "jitter") {
		t.Errorf("tight: title %q mentions jitter, want none without a ceiling", tight.title)
	}
	if got, want := tlHover1(t, page, "instant · ").attr(t, "path", "d", 0), fmt.Sprintf("M112 %vv8M112 %vH113", line(3)-4, line(3)); got != want {
		t.Errorf("instant: bracket %q, want %q, 1 px long", got, want)
	}
	dead := tlHover1(t, page, "dead · ")
	if got, want := dead.attr(t, "path", "class", 0), "timer dead hold"; got != want {
		t.Errorf("dead: class %q, want %q", got, want)
	}
	if got, want := dead.attr(t, "path", "d", 0), fmt.Sprintf("M112 %vv8M112 %vH312", line(2)-4, line(2)); got != want {
		t.Errorf("dead: bracket %q, want %q, to when it was due", got, want)
	}
	if !strings.HasSuffix(dead.title, "\nnever fired (cancelled, or the session ended first); due 09:26:53.000 (+307µs)") {
		t.Errorf("dead: title %q", dead.title)
	}
	// A merged tooltip names the server in its first and last timer's.
	if h := tlHovers(page, "2 timers from 09:26:53.000 (+102µs) to 09:26:53.000 (+113µs)"); len(h) != 1 || !strings.Contains(h[0].title, "the first:\nclose · backoff timer 5") {
		t.Errorf("timers 9 px apart: %d merged brackets, want one for close's", len(h))
	}
	if h := tlHovers(page, "apart · "); len(h) != 2 {
		t.Errorf("timers 10 px apart: %d brackets, want 2", len(h))
	}
}

// TestTimelineProcesses checks a process is a line from its start to its
// exit, with a red dot when it ended unexpectedly, running on to the end
// of the session when it did not end; that processes too close to tell
// apart are one; and that an exit without a recorded start still shows.
func TestTimelineProcesses(t *testing.T) {
	s := newTLScene()
	proc := func(server string, px, endPx float64, pid int, unexpected bool) {
		s.add(px, server, &events.ProcessSpawned{Attempt: 1, PID: pid, Command: "srv"})
		if endPx >= 0 {
			s.add(endPx, server, &events.ProcessExited{Attempt: 1, PID: pid, ExitCode: 1, Expected: !unexpected})
		}
	}
	proc("close", 100, 102, 1, true)
	proc("close", 109, 111, 2, false)
	proc("apart", 100, 102, 1, false)
	proc("apart", 110, 112, 2, false)
	proc("wide", 100, 104, 1, false)
	proc("wide", 106, 107, 2, false)
	proc("running", 500, -1, 1, false)
	s.add(600, "orphan", &events.ProcessExited{Attempt: 1, PID: 9, Signal: "SIGKILL"})
	s.add(100, "http", &events.TransportOpened{Attempt: 1, Transport: events.TransportHTTP, Endpoint: "http://127.0.0.1:9/mcp"})
	s.add(300, "http", &events.TransportClosed{Attempt: 1, Error: events.ClassifiedError{Class: events.ErrTransportClosed, Message: "EOF"}})
	// A connection whose handshake failed ends there (no session, so no
	// transport.closed); another attempt's failure, or a process's, ends
	// nothing else.
	refused := events.ClassifiedError{Class: events.ErrHandshake, Message: "connection refused"}
	s.add(100, "refused", &events.TransportOpened{Attempt: 1, Transport: events.TransportHTTP, Endpoint: "http://127.0.0.1:9/mcp"})
	s.add(150, "refused", &events.ConnectFailed{Attempt: 1, Phase: "handshake", Error: refused})
	s.add(160, "refused", &events.ConnectFailed{Attempt: 1, Phase: "handshake", Error: refused})
	s.add(700, "refused", &events.TransportOpened{Attempt: 2, Transport: events.TransportHTTP, Endpoint: "http://127.0.0.1:9/mcp"})
	s.add(750, "refused", &events.ConnectFailed{Attempt: 3, Phase: "handshake", Error: refused})
	s.add(550, "running", &events.ConnectFailed{Attempt: 1, Phase: "handshake", Error: refused})
	page := s.render(t)

	close := tlHovers(page, "2 processes (1 ended unexpectedly) from 09:26:53.000 (+102µs) to 09:26:53.000 (+113µs)")
	if len(close) != 1 || !strings.Contains(close[0].title, "the first:\nclose · process") || len(tlHovers(page, "close · ")) != 0 {
		t.Fatalf("processes 9 px apart: %d merged lines, want one for both of close's", len(close))
	}
	if fill, cx := close[0].attr(t, "circle", "fill", 0), close[0].num(t, "circle", "cx", 0); fill != "#dc2626" || cx != tlPlotX+111 {
		t.Errorf("close: end dot %s at %v, want red at the last exit, %v", fill, cx, tlPlotX+111)
	}
	for server, n := range map[string]int{"apart": 2, "wide": 2} {
		if got := len(tlHovers(page, server+" · ")); got != n {
			t.Errorf("%s: %d lines, want %d", server, got, n)
		}
	}
	if h := tlHovers(page, "apart · process")[0]; h.attr(t, "circle", "fill", 0) != "#94a3b8" {
		t.Errorf("apart: an expected exit's dot is %s, want grey", h.attr(t, "circle", "fill", 0))
	}
	running := tlHover1(t, page, "running · ")
	if strings.Contains(running.body, "<circle") || !strings.HasSuffix(running.title, "\nstill running at the end of the session") {
		t.Errorf("running: %q %s: want no end dot", running.title, running.body)
	}
	if w := running.num(t, "rect", "width", 0); w != tlScenePx-500 {
		t.Errorf("running: %v px long, want to the end of the session", w)
	}
	if h := tlHovers(page, "refused · connection"); len(h) != 2 ||
		!strings.HasSuffix(h[0].title, "after 51µs: connect failed (handshake): handshake: connection refused") ||
		h[0].num(t, "rect", "width", 0) != 50 || h[0].attr(t, "circle", "fill", 0) != "#dc2626" ||
		!strings.HasSuffix(h[1].title, "\nstill running at the end of the session") {
		t.Errorf("refused: %+v", h)
	}
	orphan := tlHover1(t, page, "orphan · ")
	if !strings.Contains(orphan.title, "(start not recorded)") || !strings.Contains(orphan.title, "after 0s: signal SIGKILL") {
		t.Errorf("orphan: title %q", orphan.title)
	}
	if h := tlHover1(t, page, "http · connection"); !strings.Contains(h.title, "http http://127.0.0.1:9/mcp") ||
		!strings.HasSuffix(h.title, "after 204µs: closed: transport_closed: EOF") || h.num(t, "rect", "width", 0) != 200 {
		t.Errorf("http: %q %s", h.title, h.body)
	}
}
