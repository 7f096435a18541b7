package replay_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// call journals a call of tool on server from px to px+d (d < 0: never
// finished) with outcome.
func (s *tlScene) call(server, tool string, px, d float64, outcome string, mod func(*events.CallFinished)) {
	id := fmt.Sprintf("c%d", len(s.evs)+1)
	s.add(px, server, &events.CallStarted{CallID: id, Tool: tool, Name: "mcp__" + server + "__" + tool})
	if d < 0 {
		return
	}
	f := &events.CallFinished{CallID: id, Outcome: outcome}
	if mod != nil {
		mod(f)
	}
	s.add(px+d, server, f)
}

// TestTimelineCallBarsNudgedApart checks each call is a bar from its start
// to its end (at least 3 px wide, to the session's end when it never
// finished), and that a call starting on a bar's last few px is moved
// just past it so both show.
func TestTimelineCallBarsNudgedApart(t *testing.T) {
	s := newTLScene()
	ok := events.OutcomeOK
	s.call("a", "first", 100, 1, ok, nil)   // drawn 3 px: to 115
	s.call("a", "second", 101, 20, ok, nil) // starts 2 px into the first: moved to 116
	s.call("b", "long", 100, 10, ok, nil)   // to 122
	s.call("b", "six", 104, 1, ok, nil)     // 6 px into it: moved to 123
	s.call("c", "first", 100, 3, ok, nil)   // to 115
	s.call("c", "touching", 103, 5, ok, nil)
	s.call("d", "long", 200, 100, ok, nil)
	s.call("d", "inside", 250, 10, ok, nil) // well inside: drawn over it
	s.call("e", "hung", 900, -1, "", nil)
	page := s.render(t)
	for _, c := range []struct {
		call string
		x, w float64
	}{
		{"a · call first", 112, 3},
		{"a · call second", 116, 20},
		{"b · call long", 112, 10},
		{"b · call six", 123, 3},
		{"c · call first", 112, 3},
		{"c · call touching", 115, 5},
		{"d · call long", 212, 100},
		{"d · call inside", 262, 10},
		{"e · call hung", 912, 124},
	} {
		h := tlHover1(t, page, c.call)
		if x, w := h.num(t, "rect", "x", 0), h.num(t, "rect", "width", 0); x != c.x || w != c.w {
			t.Errorf("%s: x %v width %v, want %v and %v", c.call, x, w, c.x, c.w)
		}
	}
	if h := tlHover1(t, page, "e · call hung"); !strings.HasPrefix(h.title, "e · call hung (mcp__e__hung): unfinished\n") {
		t.Errorf("an unfinished call's title %q: want no duration", tlFirstLine(h.title))
	}
	if h := tlHover1(t, page, "a · call second"); !strings.HasPrefix(h.title, "a · call second (mcp__a__second): ok in 20µs\n") {
		t.Errorf("a call's title %q: want its outcome and duration", tlFirstLine(h.title))
	}
}

// TestTimelineCallsAggregateWhenDense checks calls are drawn one bar each
// while there are at most one per 6 px of the axis, and as a histogram
// beyond.
func TestTimelineCallsAggregateWhenDense(t *testing.T) {
	for _, c := range []struct {
		calls int
		bars  bool
	}{{10, true}, {11, false}} {
		s := newTLScene()
		s.width = 60 // room for 10 bars
		for i := range c.calls {
			s.call("s", "work", float64(10+80*i), 10, events.OutcomeOK, nil)
		}
		page := s.render(t)
		bars, buckets := len(tlHovers(page, "s · call work")), len(tlHovers(page, "s · 1 calls from"))
		if c.bars && (bars != c.calls || buckets != 0) || !c.bars && (bars != 0 || buckets != c.calls) {
			t.Errorf("%d calls on 60 px: %d bars and %d buckets, want bars %v", c.calls, bars, buckets, c.bars)
		}
	}
}

// TestTimelineCallHistogram checks the histogram's 4 px buckets: where
// each is, what its tooltip counts, that heights follow the busiest
// bucket, failures stacked on top, and the mark over calls with injection
// signals.
func TestTimelineCallHistogram(t *testing.T) {
	s := newTLScene()
	s.width = 64     // a px of the plot is 16 px of scene time; a bucket 64
	s.pxNs = 1 << 20 // about 1 ms: the buckets' times show
	signals := func(f *events.CallFinished) { f.Signals = []string{"role_marker"} }
	// Bucket 0: 3 ok (one flagged), a tool error, a cancelled call and
	// one unfinished.
	s.call("s", "read", 0, 2, events.OutcomeOK, nil)
	s.call("s", "read", 8, 2, events.OutcomeOK, signals)
	s.call("s", "write", 16, 2, events.OutcomeOK, nil)
	s.call("s", "write", 24, 2, events.OutcomeToolError, nil)
	s.call("s", "write", 32, 2, events.OutcomeCancelled, nil)
	// Bucket 5: 10 calls of 8 tools, the busiest bucket, a failed and a
	// cancelled one among them: the peak counts every call.
	for i, tool := range []string{"t1", "t1", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"} {
		outcome := events.OutcomeOK
		switch i {
		case 0:
			outcome = events.OutcomeError
		case 1:
			outcome = events.OutcomeCancelled
		}
		s.call("s", tool, float64(320+4*i), 2, outcome, nil)
	}
	s.call("s", "hung", 62, -1, "", nil)
	// Bucket 16: the session's last instant.
	s.call("s", "late", tlScenePx, -1, "", nil)
	page := s.render(t)

	row := tlLaneTop(0) + tlCallDy + 12 // the histogram's baseline
	b0 := tlHover1(t, page, "s · 6 calls from")
	if want := "s · 6 calls from 09:26:53.000 (+0s) to 09:26:53.067\n3 ok, 1 failed, 2 cancelled or unfinished\n⚠ 1 with injection signals\nwrite ×3, read ×2, hung ×1"; b0.title != want {
		t.Errorf("bucket 0:\n%s\nwant\n%s", b0.title, want)
	}
	b5 := tlHover1(t, page, "s · 10 calls from")
	if want := "s · 10 calls from 09:26:53.335 (+336ms) to 09:26:53.402\n8 ok, 1 failed, 1 cancelled or unfinished\n"; !strings.HasPrefix(b5.title, want) {
		t.Errorf("bucket 5 %q: want it to start %q", b5.title, want)
	}
	if want := "t1 ×3, t2 ×1, t3 ×1, t4 ×1, t5 ×1, t6 ×1, and 2 more tools"; !strings.HasSuffix(b5.title, "\n"+want) {
		t.Errorf("bucket 5 %q: want it to end with %q", b5.title, want)
	}
	if strings.Contains(b5.title, "injection") {
		t.Error("bucket 5 mentions injection signals, want none")
	}
	last := tlHover1(t, page, "s · 1 calls from")
	for _, c := range []struct {
		name  string
		h     tlHover
		x     float64
		parts []string  // fills, top to bottom
		hs    []float64 // their heights: their share, at least 1.5 px
		total float64   // height
	}{
		{"bucket 0", b0, tlPlotX, []string{"#dc2626", "#94a3b8", "#16a34a"}, []float64{1.5, 2.7, 4}, 2 + 10*6.0/10},
		{"bucket 5", b5, tlPlotX + 20, []string{"#dc2626", "#94a3b8", "#16a34a"}, []float64{1.5, 1.5, 9.6}, 12},
		{"bucket 16", last, tlPlotX + 64, []string{"#94a3b8"}, []float64{3}, 2 + 10*1.0/10},
	} {
		if x := c.h.num(t, "rect", "x", 0); x != c.x {
			t.Errorf("%s at x %v, want %v", c.name, x, c.x)
		}
		top := c.h.num(t, "rect", "y", 0)
		if want := row - c.total; top < want-0.05 || top > want+0.05 {
			t.Errorf("%s's top at %v, want %v (height %v)", c.name, top, want, c.total)
		}
		for i, fill := range c.parts {
			if got := c.h.attr(t, "rect", "fill", i); got != fill {
				t.Errorf("%s: part %d in %s, want %s", c.name, i, got, fill)
			}
			if got := c.h.num(t, "rect", "height", i); got != c.hs[i] {
				t.Errorf("%s: part %d %v px high, want %v", c.name, i, got, c.hs[i])
			}
			if i > 0 && c.h.num(t, "rect", "y", i) <= c.h.num(t, "rect", "y", i-1) {
				t.Errorf("%s: part %d drawn above part %d", c.name, i, i-1)
			}
		}
		if n := strings.Count(c.h.body, "<rect "); n != len(c.parts) {
			t.Errorf("%s has %d parts, want %d", c.name, n, len(c.parts))
		}
	}
	if !strings.Contains(b0.body, "<circle ") || strings.Contains(b5.body, "<circle ") {
		t.Error("want a dot over bucket 0, with injection signals, and none over bucket 5")
	}
	if cx, cy := b0.num(t, "circle", "cx", 0), b0.num(t, "circle", "cy", 0); cx != tlPlotX+1.7 || cy != row-8-3 {
		t.Errorf("the injection dot at (%v, %v), want (%v, %v): over the bucket", cx, cy, tlPlotX+1.7, row-8-3)
	}
}
