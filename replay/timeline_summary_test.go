package replay_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpledger/mcpledger/events"
)

// TestTimelineFinalStateShowsWhatWentWrong checks the final state in the
// lane labels and the summary: a server the shutdown found failed shows
// it failed, not merely stopped, in red; one stopped from ready shows the
// stop and its reason; a server with no transition shows none.
func TestTimelineFinalStateShowsWhatWentWrong(t *testing.T) {
	s := newTLScene()
	s.add(0, "", &events.ConfigObserved{Trigger: "start", Servers: []events.ServerConfig{{Name: "idle", Transport: events.TransportSSE}}})
	boom := &events.ClassifiedError{Class: events.ErrExit, ExitCode: 1, Message: "boom"}
	s.to(100, "crashed", "", events.StateLaunching, "admit", 1)
	s.add(200, "crashed", &events.ServerTransitioned{From: events.StateLaunching, To: events.StateFailed, Trigger: "fail", Attempt: 1, Error: boom})
	s.add(800, "crashed", &events.ServerTransitioned{From: events.StateFailed, To: events.StateStopped, Trigger: "stop", Reason: events.ReasonShutdown, Attempt: 1})
	s.to(100, "clean", "", events.StateLaunching, "admit", 1)
	s.to(200, "clean", events.StateLaunching, events.StateReady, "ready", 1)
	s.add(712, "clean", &events.ServerTransitioned{From: events.StateReady, To: events.StateStopped, Trigger: "stop", Reason: events.ReasonShutdown, Attempt: 1})
	s.add(100, "once", &events.ServerTransitioned{To: events.StateStopped, Trigger: "stop", Reason: events.ReasonShutdown})
	s.to(100, "gave-up", "", events.StateReconnecting, "fail", 3)
	s.add(200, "gave-up", &events.ServerTransitioned{From: events.StateReconnecting, To: events.StateFailed, Trigger: "exhaust",
		Reason: events.ReasonExhausted, Attempt: 3, Error: boom})
	page := s.render(t)

	pill := func(state, color string) string {
		return `<span class="pill" style="background:` + color + `">` + state + `</span>`
	}
	for _, c := range []struct {
		server, final    string // the summary's final state (HTML)
		label, labelFill string // the label's pill
		inv              bool   // white text (on red)
	}{
		{"crashed", pill("stopped", "#e5e7eb") + ` <span class="muted">shutdown</span> <span class="muted">(was</span> ` + pill("failed", "#ef4444") + `<span class="muted">)</span>`,
			"failed, then shut down", "#ef4444", true},
		{"clean", pill("stopped", "#e5e7eb") + ` <span class="muted">shutdown</span>`, "stopped · shutdown", "#e5e7eb", false},
		{"once", pill("stopped", "#e5e7eb") + ` <span class="muted">shutdown</span>`, "stopped · shutdown", "#e5e7eb", false},
		{"gave-up", pill("failed", "#ef4444") + ` <span class="muted">attempts_exhausted</span>`, "failed · attempts_exhausted", "#ef4444", true},
		{"idle", "-", "", "", false},
	} {
		if got := tlSummary(t, page, c.server)[tlColFinal]; got != c.final {
			t.Errorf("%s: final state\n%s\nwant\n%s", c.server, got, c.final)
		}
		label := tlLabel(t, page, c.server)
		text := label.text()
		if c.label == "" {
			if strings.Contains(label.body, `class="pill`) {
				t.Errorf("%s: label %q shows a state, want none", c.server, text)
			}
			continue
		}
		if !strings.HasSuffix(text, "|"+c.label) {
			t.Errorf("%s: label %q, want the state %q", c.server, text, c.label)
		}
		if !strings.Contains(label.body, `rx="7.5" fill="`+c.labelFill+`"`) {
			t.Errorf("%s: label %s, want its pill in %s", c.server, label.body, c.labelFill)
		}
		if inv := strings.Contains(label.body, `class="pill inv"`); inv != c.inv {
			t.Errorf("%s: white pill text %v, want %v", c.server, inv, c.inv)
		}
	}
	row := tlSummary(t, page, "clean")
	// Ready 512 px of the 924 px from its first event to the end.
	if got, want := row[tlColReady], "524µs (55%)"; got != want {
		t.Errorf("clean: ready %q, want %q", got, want)
	}
	if got := tlSummary(t, page, "crashed")[tlColReady]; got != "-" {
		t.Errorf("crashed: ready %q, want - (never ready)", got)
	}
	if got := tlSummary(t, page, "idle")[tlColTransport]; got != "sse" {
		t.Errorf("idle: transport %q, want sse from its config", got)
	}
	if got := tlSummary(t, page, "clean")[tlColTransport]; got != "-" {
		t.Errorf("clean: transport %q, want - (not configured)", got)
	}
}

// TestTimelineSummaryClipsTheLastError checks a long last error is cut to
// 90 characters in the table and shown whole in its tooltip and in the
// lane label's.
func TestTimelineSummaryClipsTheLastError(t *testing.T) {
	s := newTLScene()
	long := strings.Repeat("é", 50) + strings.Repeat("x", 50) // 100 runes, 150 bytes
	s.to(100, "s", "", events.StateLaunching, "admit", 1)
	s.add(200, "s", &events.ServerTransitioned{From: events.StateLaunching, To: events.StateReconnecting, Trigger: "fail", Attempt: 1,
		Error: &events.ClassifiedError{Class: events.ErrHandshake, Message: "first"}})
	s.add(300, "s", &events.ServerTransitioned{From: events.StateReconnecting, To: events.StateFailed, Trigger: "fail", Attempt: 2,
		Error: &events.ClassifiedError{Class: events.ErrHandshake, Message: long}})
	page := s.render(t)
	full := "handshake: " + long
	cell := tlSummary(t, page, "s")[tlColLastError]
	if got := []rune(cell); len(got) != 90 || got[89] != '…' || !strings.HasPrefix(full, string(got[:89])) {
		t.Errorf("last error cell %q (%d runes): want the error's first 89 characters and …", cell, utf8.RuneCountInString(cell))
	}
	if !strings.Contains(page, `class="err" title="`+full+`"`) {
		t.Error("the last error's tooltip is not the whole error")
	}
	if got := tlLabel(t, page, "s").title; !strings.HasSuffix(got, "\nlast error: "+full) {
		t.Errorf("label title %q: want it to end with the last error", got)
	}
	if got := tlSummary(t, page, "s")[tlColFailures]; got != "2" {
		t.Errorf("failures %q, want 2", got)
	}
}

// TestTimelineClockGoingBack checks a session whose clock went back (a
// server first seen at the session's last instant, ready before it)
// renders no infinite or undefined numbers.
func TestTimelineClockGoingBack(t *testing.T) {
	s := newTLScene()
	s.add(tlScenePx, "s", &events.AdmissionDecided{Admitted: true})
	s.to(500, "s", "", events.StateReady, "ready", 1)
	page := s.render(t)
	if got := tlSummary(t, page, "s")[tlColReady]; got != "-" {
		t.Errorf("ready %q, want -", got)
	}
	for _, bad := range []string{"Inf", "NaN"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page shows %s", bad)
		}
	}
}
