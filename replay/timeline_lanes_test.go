package replay_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// tlLabel returns the lane label of server: the element whose title's
// first line is its name.
func tlLabel(t *testing.T, page, server string) tlHover {
	t.Helper()
	var out []tlHover
	for _, h := range tlHovers(page, server) {
		if tlFirstLine(h.title) == server {
			out = append(out, h)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d labels for %s, want 1", len(out), server)
	}
	return out[0]
}

// tlSummary returns the cells of server's row in the summary table, as
// HTML, from the transport on.
func tlSummary(t *testing.T, page, server string) []string {
	t.Helper()
	m := regexp.MustCompile(`<tr><td class="srv">` + regexp.QuoteMeta(server) + `</td>(.*)</tr>\n`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no summary row for %s", server)
	}
	cells := regexp.MustCompile(`<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(m[1], -1)
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = c[1]
	}
	return out
}

// Summary columns after the server's name.
const (
	tlColTransport = iota
	tlColLaunches
	tlColFailures
	tlColReady
	tlColCallsOK
	tlColCallsFailed
	tlColFinal
	tlColLastError
)

func TestTimelineLanesInNameOrder(t *testing.T) {
	s := newTLScene()
	for i, name := range []string{"zeta", "alpha", "mid"} { // first seen in this order
		px := float64(10 + 10*i)
		s.to(px, name, "", events.StateLaunching, "admit", 1)
		s.to(px+100, name, events.StateLaunching, events.StateReady, "ready", 1)
	}
	page := s.render(t)
	order := regexp.MustCompile(`class="name">([^<]*)<`).FindAllStringSubmatch(page, -1)
	rows := regexp.MustCompile(`<td class="srv">([^<]*)<`).FindAllStringSubmatch(page, -1)
	for i, name := range []string{"alpha", "mid", "zeta"} {
		if len(order) != 3 || order[i][1] != name {
			t.Fatalf("lane labels %v, want alpha, mid, zeta", order)
		}
		if len(rows) != 3 || rows[i][1] != name {
			t.Fatalf("summary rows %v, want alpha, mid, zeta", rows)
		}
		// Each server's marks are drawn in its own lane.
		for _, state := range []string{"launching", "ready"} {
			if got, want := tlHover1(t, page, name+" · "+state).num(t, "rect", "y", 0), tlLaneTop(i)+tlBandDy; got != want {
				t.Errorf("%s's %s band at y %v, want %v (lane %d)", name, state, got, want, i)
			}
		}
		if got, want := tlLabel(t, page, name).num(t, "rect", "y", 0), tlLaneTop(i); got != want {
			t.Errorf("%s's label at y %v, want %v", name, got, want)
		}
	}
	// Lanes alternate their background so a row can be followed across.
	bg := regexp.MustCompile(`<rect x="0" y="(\d+)" width="1048" height="68" fill="(#[0-9a-f]+)"/>`).FindAllStringSubmatch(page, -1)
	if len(bg) != 3 || bg[0][2] == bg[1][2] || bg[0][2] != bg[2][2] {
		t.Errorf("lane backgrounds %v: want 3, alternating", bg)
	}
}

// TestTimelineBandsCoverTheirTimes checks each state band starts at the
// transition into its state and ends at the next one, the last at the end
// of the session, and that a lane first seen before its first recorded
// transition shows the state it was in since.
func TestTimelineBandsCoverTheirTimes(t *testing.T) {
	s := newTLScene()
	s.add(0, "", &events.ConfigObserved{Trigger: "start", Servers: []events.ServerConfig{{Name: "s", Transport: events.TransportStdio}}})
	s.to(100, "s", events.StateConfiguring, events.StateLaunching, "admit", 1)
	s.to(150, "s", events.StateLaunching, events.StateHandshaking, "launched", 1)
	s.to(300, "s", events.StateHandshaking, events.StateReady, "ready", 1)
	s.to(700, "s", events.StateReady, events.StateFailed, "fail", 1)
	// A lane whose first event is its first transition, and one whose
	// first transition has no state before it.
	s.to(200, "t", events.StateConfiguring, events.StateLaunching, "admit", 1)
	s.add(100, "u", &events.AdmissionDecided{Admitted: true})
	s.to(200, "u", "", events.StateLaunching, "admit", 1)
	page := s.render(t)
	for _, c := range []struct {
		band       string
		from, to   float64 // px
		wantAbsent bool
	}{
		{band: "s · configuring", from: 0, to: 100},
		{band: "s · launching", from: 100, to: 150},
		{band: "s · handshaking", from: 150, to: 300},
		{band: "s · ready", from: 300, to: 700},
		{band: "s · failed", from: 700, to: tlScenePx},
		{band: "t · launching", from: 200, to: tlScenePx},
		{band: "t · configuring", wantAbsent: true},
		{band: "u · launching", from: 200, to: tlScenePx},
	} {
		hs := tlHovers(page, c.band)
		if c.wantAbsent {
			if len(hs) != 0 {
				t.Errorf("%s: drawn, want no band", c.band)
			}
			continue
		}
		if len(hs) != 1 {
			t.Errorf("%s: %d bands, want 1", c.band, len(hs))
			continue
		}
		x, w := hs[0].num(t, "rect", "x", 0), hs[0].num(t, "rect", "width", 0)
		if x != tlPlotX+c.from || w != c.to-c.from {
			t.Errorf("%s: x %v width %v, want %v and %v", c.band, x, w, tlPlotX+c.from, c.to-c.from)
		}
	}
	if n := len(tlHovers(page, "u · ")); n != 1 {
		t.Errorf("u has %d bands, want 1 (no state before its first transition)", n)
	}
}

// TestTimelineMergesBandsTooNarrowToTell checks that a run of bands under
// 2 px becomes one band spanning the run, coloured by the state it spent
// most time in (the most severe of equals), with a tooltip counting the
// states; bands 2 px wide stay apart.
func TestTimelineMergesBandsTooNarrowToTell(t *testing.T) {
	s := newTLScene()
	loop := func(server string, px float64, step float64, states ...events.ServerState) {
		from := events.ServerState("")
		for _, st := range states {
			s.to(px, server, from, st, "x", 1)
			from, px = st, px+step
		}
		s.to(px, server, from, events.StateReady, "ready", 1)
	}
	L, F := events.StateLaunching, events.StateFailed
	loop("most", 100, 1, L, F, L, F, L)  // launching 3 px, failed 2 px
	loop("tie", 100, 1, L, F, L, F)      // 2 px each
	loop("apart", 100, 2, L, F)          // 2 px bands
	loop("blip", 100, 0.125, L, F, L, F) // half a px in all
	loop("onefast", 100, 1, L)           // one narrow band alone
	// A 2 px band between narrow ones: three bands.
	s.to(100, "edge", "", L, "x", 1)
	s.to(101, "edge", L, F, "x", 1)
	s.to(103, "edge", F, L, "x", 1)
	s.to(104, "edge", L, events.StateReady, "x", 1)
	page := s.render(t)

	most := tlHover1(t, page, "most · 5 states")
	if got, want := most.title, "most · 5 states from 09:26:53.000 (+102µs) to 09:26:53.000 (+107µs) (5µs), too short to draw apart:\n2× failed (2µs), 3× launching (3µs)"; got != want {
		t.Errorf("merged band's title:\n%s\nwant\n%s", got, want)
	}
	if x, w := most.num(t, "rect", "x", 0), most.num(t, "rect", "width", 0); x != tlPlotX+100 || w != 5 {
		t.Errorf("merged band at x %v width %v, want %v and 5", x, w, tlPlotX+100)
	}
	if !strings.Contains(most.body, `fill="#93c5fd"`) {
		t.Errorf("merged band %s: want launching's colour, the state of most time", most.body)
	}
	// The dashed line under the merged band (in the 4th lane) spans it.
	if want := fmt.Sprintf(`<path d="M112 %vH117" class="churn"/>`, tlLaneTop(3)+tlBandDy+18); !strings.Contains(most.body, want) {
		t.Errorf("merged band %s: want %s", most.body, want)
	}
	if tie := tlHover1(t, page, "tie · 4 states"); !strings.Contains(tie.body, `fill="#ef4444"`) {
		t.Errorf("tie %s: want failed's colour, the more severe of equal times", tie.body)
	}
	blip := tlHover1(t, page, "blip · 4 states")
	if w := blip.num(t, "rect", "width", 0); w != 1 {
		t.Errorf("a merged run of half a px is drawn %v px wide, want 1", w)
	}
	if n := len(tlHovers(page, "edge · launching")) + len(tlHovers(page, "edge · failed")); n != 3 {
		t.Errorf("edge: %d bands, want a narrow one, a 2 px one and a narrow one apart", n)
	}
	for _, band := range []string{"apart · launching", "apart · failed", "onefast · launching"} {
		if h := tlHovers(page, band); len(h) != 1 {
			t.Errorf("%s: %d bands, want it drawn on its own", band, len(h))
		}
	}
	if h := tlHovers(page, "apart · 2 states"); len(h) != 0 {
		t.Error("2 px bands were merged")
	}
}

// TestTimelineBandLabelFits checks a band shows its state's name when it
// fits with 5 px on each side (and clear of a failure glyph on its start),
// and nothing when it does not.
func TestTimelineBandLabelFits(t *testing.T) {
	s := newTLScene()
	// "ready" is 33 px at 11 px: it needs a band of 43 px.
	s.to(100, "fits", events.StateLaunching, events.StateReady, "ready", 1)
	s.to(143, "fits", events.StateReady, events.StateStopped, "stop", 1)
	s.to(100, "short", events.StateLaunching, events.StateReady, "ready", 1)
	s.to(142, "short", events.StateReady, events.StateStopped, "stop", 1)
	// "failed" is 39.6 px; after a failure, 6 px more for the glyph.
	s.to(100, "glyph", events.StateReady, events.StateFailed, "fail", 1)
	s.to(156, "glyph", events.StateFailed, events.StateStopped, "stop", 1)
	s.to(100, "glyph-short", events.StateReady, events.StateFailed, "fail", 1)
	s.to(155, "glyph-short", events.StateFailed, events.StateStopped, "stop", 1)
	page := s.render(t)
	for band, want := range map[string]string{
		"fits · ready": "ready", "short · ready": "", "glyph · failed": "failed", "glyph-short · failed": "",
	} {
		if got := tlHover1(t, page, band).text(); got != want {
			t.Errorf("%s: label %q, want %q", band, got, want)
		}
	}
	if h := tlHover1(t, page, "glyph · failed"); h.num(t, "text", "x", 0) != tlPlotX+100+11 {
		t.Errorf("the label after a failure starts at %v, want 11 px into the band", h.num(t, "text", "x", 0))
	}
}

// TestTimelineBandLabelSaysWhy checks the longest label a wide band shows:
// why a server stopped or failed, and which attempt it is on.
func TestTimelineBandLabelSaysWhy(t *testing.T) {
	s := newTLScene()
	add := func(server string, p *events.ServerTransitioned) { s.add(100, server, p) }
	exit2 := &events.ClassifiedError{Class: events.ErrExit, ExitCode: 2, Message: "exited"}
	add("gave-up", &events.ServerTransitioned{From: events.StateReconnecting, To: events.StateFailed, Trigger: "exhaust",
		Reason: events.ReasonExhausted, Attempt: 4, Error: exit2})
	add("killed", &events.ServerTransitioned{From: events.StateReady, To: events.StateReconnecting, Trigger: "fail", Attempt: 1,
		Error: &events.ClassifiedError{Class: events.ErrExit, Signal: "SIGKILL"}})
	add("slow", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateFailed, Trigger: "fail", Attempt: 1,
		Error: &events.ClassifiedError{Class: events.ErrTimeout, Message: "initialize took 30s"}})
	add("exited", &events.ServerTransitioned{From: events.StateReady, To: events.StateReconnecting, Trigger: "fail", Attempt: 2, Error: exit2})
	add("shut", &events.ServerTransitioned{From: events.StateReady, To: events.StateStopped, Trigger: "stop", Reason: events.ReasonShutdown, Attempt: 3})
	add("third", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateReady, Trigger: "ready", Attempt: 3})
	add("first", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateReady, Trigger: "ready", Attempt: 1})
	add("revived", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateReady, Trigger: "ready",
		Reason: events.ReasonReconnect, Attempt: 1})
	add("stopped3", &events.ServerTransitioned{From: events.StateReady, To: events.StateStopped, Trigger: "stop", Attempt: 3})
	page := s.render(t)
	for server, want := range map[string]string{
		"gave-up":  "failed · attempts_exhausted · exit code 2",
		"killed":   "reconnecting · signal SIGKILL",
		"slow":     "failed · timeout",
		"exited":   "reconnecting · exit code 2",
		"shut":     "stopped · shutdown",
		"third":    "ready · attempt 3",
		"first":    "ready",
		"revived":  "ready",
		"stopped3": "stopped",
	} {
		state, _, _ := strings.Cut(want, " ")
		h := tlHovers(page, server+" · "+state)
		if len(h) != 1 {
			t.Errorf("%s: %d bands, want 1", server, len(h))
			continue
		}
		if got := h[0].text(); got != want {
			t.Errorf("%s: label %q, want %q", server, got, want)
		}
		inv := strings.Contains(h[0].body, `class="band inv"`)
		if failed := strings.HasPrefix(want, "failed"); inv != failed {
			t.Errorf("%s: white text %v, want it on failed bands only", server, inv)
		}
	}
	if h := tlHovers(page, "killed · reconnecting"); len(h) == 1 && !strings.Contains(h[0].title, "error exit") {
		t.Errorf("killed: title %q lacks the error", h[0].title)
	}
}
