package replay_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
)

// tlChartWidth returns the chart's width: the time axis and its padding.
func tlChartWidth(t *testing.T, page string) int {
	t.Helper()
	m := regexp.MustCompile(`<svg width="(\d+)" height="\d+" viewBox="[^"]*" class="plot">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no chart")
	}
	w, _ := strconv.Atoi(m[1])
	return w
}

// TestTimelineWidensForBusyServers checks the chosen width: 1,120 px of
// axis, or 8 px for each state the busiest server went through (and for
// every two of its marks) when that is more, up to 16,000 px.
func TestTimelineWidensForBusyServers(t *testing.T) {
	for _, c := range []struct {
		name          string
		states, pings int
		axis          int
	}{
		{"quiet", 100, 0, tlFitW},
		{"just fits", 140, 0, tlFitW},
		{"busy", 150, 0, 1200},
		{"busy with marks", 140, 20, 1200},
		{"too busy", 2100, 0, 16000},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTLScene()
			// The first transition is at the server's first event: no
			// state before it to count.
			from := events.StateConfiguring
			for i := range c.states {
				to := []events.ServerState{events.StateLaunching, events.StateReady}[i%2]
				s.to(float64(i)/4, "busy", from, to, "x", 1)
				from = to
			}
			for i := range c.pings {
				s.add(float64(600+i), "busy", &events.PingFailed{Attempt: 1, Consecutive: 1})
			}
			s.to(0, "calm", "", events.StateReady, "ready", 1)
			s.add(tlScenePx, "", &events.SessionStopped{})
			if got, want := tlChartWidth(t, string(tlRender(t, s.evs, nil))), c.axis+2*tlPlotX; got != want {
				t.Errorf("%d states and %d marks: chart %d px wide, want %d", c.states, c.pings, got, want)
			}
		})
	}
	s := newTLScene()
	s.to(0, "s", "", events.StateReady, "ready", 1)
	if got, want := tlChartWidth(t, string(tlRender(t, s.evs, &replay.TimelineOptions{Width: 300}))), 300+2*tlPlotX; got != want {
		t.Errorf("with Width 300: chart %d px wide, want %d", got, want)
	}
}

// TestTimelineAxisTicks checks the axes: round offsets from the start on
// top, each with a grid line, the last at the end when the end is round,
// labelled unless the label would be cut; round times of day under the
// lanes, where their labels fit.
func TestTimelineAxisTicks(t *testing.T) {
	for _, c := range []struct {
		name              string
		pxNs              int64
		from, to          float64 // the session, in px of time
		top, grid, bottom string
	}{
		{"1s", 1_000_000, 0, 1000, "+0s +200ms +400ms +600ms +800ms +1s", "12 216.8 421.6 626.4 831.2 1036",
			// 09:26:53.000 and 09:26:54.000 are too close to the edges to label.
			"09:26:53.200 09:26:53.400 09:26:53.600 09:26:53.800"},
		// "+10s" at the end would stick out of the chart.
		{"10s", 10_000_000, 0, 1000, "+0s +2s +4s +6s +8s", "12 216.8 421.6 626.4 831.2 1036",
			"09:26:54 09:26:56 09:26:58 09:27:00 09:27:02"}, // whole seconds: no milliseconds
		// Ticks a second apart: no milliseconds either.
		{"8s", 8_000_000, 0, 1000, "+0s +1s +2s +3s +4s +5s +6s +7s +8s", "",
			"09:26:54 09:26:55 09:26:56 09:26:57 09:26:58 09:26:59 09:27:00"},
		// A time of day 28 px from the chart's edge is labelled, its label
		// just fitting.
		{"left edge", 1_000_000, -28, 996, "", "",
			"09:26:53.000 09:26:53.200 09:26:53.400 09:26:53.600 09:26:53.800"},
		{"right edge", 1_000_000, -196, 828, "", "",
			"09:26:53.000 09:26:53.200 09:26:53.400 09:26:53.600 09:26:53.800"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &tlScene{pxNs: c.pxNs}
			s.add(c.from, "", &events.SessionStarted{})
			s.to(c.from, "s", "", events.StateReady, "ready", 1)
			s.add(c.to, "", &events.SessionStopped{})
			page := string(tlRender(t, s.evs, &replay.TimelineOptions{Width: 1024}))
			var top, grid, bottom []string
			for _, m := range regexp.MustCompile(`<text x="[^"]*" y="19" class="tick">([^<]*)</text>`).FindAllStringSubmatch(page, -1) {
				top = append(top, m[1])
			}
			for _, m := range regexp.MustCompile(`<path d="M([0-9.]+) 24V\d+" class="grid"/>`).FindAllStringSubmatch(page, -1) {
				grid = append(grid, m[1])
			}
			for _, m := range regexp.MustCompile(`class="axis"/><text x="[^"]*" y="\d+" class="tick">([^<]*)</text>`).FindAllStringSubmatch(page, -1) {
				bottom = append(bottom, m[1])
			}
			if got := strings.Join(top, " "); c.top != "" && got != c.top {
				t.Errorf("offsets %q, want %q", got, c.top)
			}
			if got := strings.Join(grid, " "); c.grid != "" && got != c.grid {
				t.Errorf("grid lines at %q, want %q", got, c.grid)
			}
			if got := strings.Join(bottom, " "); got != c.bottom {
				t.Errorf("times of day %q, want %q", got, c.bottom)
			}
		})
	}
}
