package replay_test

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
)

// The tests in timeline_*_test.go other than timeline_test.go build
// sessions event by event on a pixel grid, so they can check where the
// chart draws things to the pixel: a scene spans tlScenePx px of time
// drawn tlScenePx px wide, and a px of time is 1,024 ns (or another span
// a test picks), so every position is exact.
const (
	tlScenePx = 1024
	tlPlotX   = 12   // the x of the scene's start: the plot's left padding
	tlLane0   = 48   // the top of the first lane: the axis and the flag row above it
	tlLaneH   = 68   // the height of a lane
	tlBandDy  = 22   // the state band's top within its lane
	tlCallDy  = 52   // the calls row's top
	tlTimerDy = 12   // the timer row's line
	tlFailDy  = 32   // the centre of failure marks, on the band
	tlFitW    = 1120 // the axis when nothing asks for more
)

// tlScene is a session built event by event at chosen pixels: the events
// need not be ones the decider would produce, only ones a journal can hold.
type tlScene struct {
	evs   []events.Event
	width int   // TimelineOptions.Width; tlScenePx unless set
	pxNs  int64 // the time of a px in ns
}

func newTLScene() *tlScene {
	s := &tlScene{width: tlScenePx, pxNs: 1024}
	s.add(0, "", &events.SessionStarted{Seed: 1, Version: "v0.4.0"})
	return s
}

// at is the time of pixel px.
func (s *tlScene) at(px float64) time.Time { return tlT0.Add(time.Duration(px * float64(s.pxNs))) }

// add journals p about server at pixel px and returns its seq.
func (s *tlScene) add(px float64, server string, p events.Payload) uint64 {
	return s.addCaused(px, server, 0, p)
}

func (s *tlScene) addCaused(px float64, server string, cause uint64, p events.Payload) uint64 {
	e := events.New(s.at(px), server, p)
	e.Session = uuid.MustParse("01a20252-0207-7aed-8451-e46063cb8033")
	e.Seq, e.Cause = uint64(len(s.evs)+1), cause
	s.evs = append(s.evs, e)
	return e.Seq
}

// to journals server's transition from → to at px by trigger.
func (s *tlScene) to(px float64, server string, from, to events.ServerState, trigger string, attempt int) uint64 {
	return s.add(px, server, &events.ServerTransitioned{From: from, To: to, Trigger: trigger, Attempt: attempt})
}

// render ends the session at tlScenePx (unless an event already is
// there) and renders it.
func (s *tlScene) render(t *testing.T) string {
	t.Helper()
	if last := s.evs[len(s.evs)-1].Time; last < s.at(tlScenePx).UnixNano() {
		s.add(tlScenePx, "", &events.SessionStopped{Reason: events.ReasonShutdown})
	}
	return string(tlRender(t, s.evs, &replay.TimelineOptions{Width: s.width}))
}

// tlHover is one element with a tooltip: its title (unescaped) and what
// it draws.
type tlHover struct{ title, body string }

var tlHoverRE = regexp.MustCompile(`(?s)<g class="h"><title>(.*?)</title>(.*?)</g>\n`)

// tlHovers returns the page's elements with a tooltip whose title starts
// with prefix, in page order.
func tlHovers(page, prefix string) []tlHover {
	var out []tlHover
	for _, m := range tlHoverRE.FindAllStringSubmatch(page, -1) {
		if h := (tlHover{html.UnescapeString(m[1]), m[2]}); strings.HasPrefix(h.title, prefix) {
			out = append(out, h)
		}
	}
	return out
}

// tlHover1 returns the one element whose title starts with prefix.
func tlHover1(t *testing.T, page, prefix string) tlHover {
	t.Helper()
	hs := tlHovers(page, prefix)
	if len(hs) != 1 {
		t.Fatalf("%d elements titled %q…, want 1", len(hs), prefix)
	}
	return hs[0]
}

// attr returns attribute name of the n-th (from 0) elem in h's body.
func (h tlHover) attr(t *testing.T, elem, name string, n int) string {
	t.Helper()
	tags := regexp.MustCompile(`<`+elem+` [^>]*>`).FindAllString(h.body, -1)
	if n >= len(tags) {
		t.Fatalf("%q has %d <%s>, want #%d:\n%s", tlFirstLine(h.title), len(tags), elem, n, h.body)
	}
	m := regexp.MustCompile(`\s` + name + `="([^"]*)"`).FindStringSubmatch(tags[n])
	if m == nil {
		t.Fatalf("%s has no %s", tags[n], name)
	}
	return m[1]
}

// num returns numeric attribute name of the n-th elem in h's body.
func (h tlHover) num(t *testing.T, elem, name string, n int) float64 {
	t.Helper()
	a := h.attr(t, elem, name, n)
	v, err := strconv.ParseFloat(a, 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", elem, name, a, err)
	}
	return v
}

// text returns the text of h's <text> elements, joined by "|".
func (h tlHover) text() string {
	var parts []string
	for _, m := range regexp.MustCompile(`<text [^>]*>([^<]*)</text>`).FindAllStringSubmatch(h.body, -1) {
		parts = append(parts, html.UnescapeString(m[1]))
	}
	return strings.Join(parts, "|")
}

func tlFirstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// tlLaneTop is the y of lane i's top.
func tlLaneTop(i int) float64 { return float64(tlLane0 + i*tlLaneH) }
