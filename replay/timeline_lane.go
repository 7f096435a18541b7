package replay

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpledger/mcpledger/events"
)

// ---- rendering: one lane's rows (bands, processes, timers, marks, calls) ----

func (r *tlRender) lane(l *tlLane, y int) {
	r.bands(l, y+22)
	r.procs(l, y+42)
	r.timers(l, float64(y+12))
	r.marks(l, y)
	r.calls(l, y+52)
}

// tlGroup is a run of items of one row drawn as one because they are too
// close to tell apart.
type tlGroup struct {
	i, j   int // items [i, j)
	x0, x1 float64
	narrow bool
}

// tlGroups groups items in x order: an item joins the open group when both
// are narrower than narrow px and it starts within gap px of the group's
// start. Wide items stay alone.
func tlGroups(n int, span func(int) (float64, float64), narrow, gap float64) []tlGroup {
	var gs []tlGroup
	for k := range n {
		x0, x1 := span(k)
		if len(gs) > 0 {
			if g := &gs[len(gs)-1]; g.narrow && x1-x0 < narrow && x0 < g.x0+gap {
				g.j, g.x1 = k+1, max(g.x1, x1)
				continue
			}
		}
		gs = append(gs, tlGroup{i: k, j: k + 1, x0: x0, x1: x1, narrow: x1-x0 < narrow})
	}
	return gs
}

// groupTitle summarizes a group of n items from t0 to t1 by its first and
// last item's titles.
func (r *tlRender) groupTitle(n int, what string, t0, t1 int64, first, last string) string {
	return fmt.Sprintf("%d %s from %s to %s, too close together to draw apart\n\nthe first:\n%s\n\nthe last:\n%s",
		n, what, r.m.clock(t0), r.m.clock(t1), first, last)
}

// tlSeverity orders states, most severe first: a merged stretch of bands
// takes the colour of the state it spent most time in, the most severe of
// equals.
var tlSeverity = []events.ServerState{events.StateFailed, events.StateReconnecting, events.StateHandshaking,
	events.StateLaunching, events.StateConfiguring, events.StateStopped, events.StateReady}

// bands draws the state bands in a 20 px row from y. Runs of bands under
// 2 px wide (a fast crash loop on a long axis) merge into one.
func (r *tlRender) bands(l *tlLane, y int) {
	var segs []*tlSeg
	for i := range l.segs {
		if s := &l.segs[i]; s.to > s.from {
			segs = append(segs, s)
		}
	}
	for _, g := range tlGroups(len(segs), func(k int) (float64, float64) { return r.x(segs[k].from), r.x(segs[k].to) }, 2, math.Inf(1)) {
		if g.j-g.i == 1 {
			r.band(l, segs[g.i], y)
			continue
		}
		run := segs[g.i:g.j]
		count, dur := map[events.ServerState]int{}, map[events.ServerState]int64{}
		for _, s := range run {
			count[s.state]++
			dur[s.state] += s.to - s.from
		}
		var main events.ServerState // the state it spent most time in
		var parts []string
		for _, st := range tlSeverity {
			if count[st] > 0 {
				if main == "" || dur[st] > dur[main] {
					main = st
				}
				parts = append(parts, fmt.Sprintf("%d× %s (%s)", count[st], st, tlDur(dur[st])))
			}
		}
		color := tlStateColor[main]
		from, to := run[0].from, run[len(run)-1].to
		title := fmt.Sprintf("%s · %d states from %s to %s (%s), too short to draw apart:\n%s",
			l.name, len(run), r.m.clock(from), r.m.clock(to), tlDur(to-from), strings.Join(parts, ", "))
		r.w(`<g class="h"><title>%s</title><rect x="%s" y="%d" width="%s" height="20" fill="%s"/><path d="M%s %dH%s" class="churn"/></g>`+"\n",
			tlEsc(title), tlF(g.x0), y, tlF(math.Max(g.x1-g.x0, 1)), color, tlF(g.x0), y+18, tlF(g.x1))
	}
}

func (r *tlRender) band(l *tlLane, s *tlSeg, y int) {
	x0, x1 := r.x(s.from), r.x(s.to)
	w := math.Max(x1-x0, 0.8)
	title := fmt.Sprintf("%s · %s%s\n%s → %s, %s\n%s", l.name, s.state, tlPrefix(", attempt ", tlItoa(s.attempt)),
		r.m.clock(s.from), r.m.clock(s.to), tlDur(s.to-s.from), strings.Join(s.info, "\n"))
	r.w(`<g class="h"><title>%s</title><rect x="%s" y="%d" width="%s" height="20" fill="%s"/>`,
		tlEsc(title), tlF(x0), y, tlF(w), tlStateColor[s.state])
	lx := x0 + 5
	if s.marked {
		lx += 6 // clear of the failure glyph on the boundary
	}
	for _, label := range tlBandLabels(s) {
		if tlTextW(label, 11)+(lx-x0)+5 <= w {
			cls := "band"
			if s.state == events.StateFailed {
				cls = "band inv"
			}
			r.w(`<text x="%s" y="%d" class="%s">%s</text>`, tlF(lx), y+14, cls, tlEsc(label))
			break
		}
	}
	r.w("</g>\n")
}

// procs draws processes and connections as lines from y: a tick at the
// start, a dot at the end (red when unexpected).
func (r *tlRender) procs(l *tlLane, y int) {
	end := func(p *tlProc) int64 {
		if p.to == 0 {
			return r.m.end
		}
		return p.to
	}
	title := func(p *tlProc) string {
		kind := "process"
		if p.pid == 0 {
			kind = "connection"
		}
		t := fmt.Sprintf("%s · %s%s\n%s\nstarted %s", l.name, kind, tlPrefix(", attempt ", tlItoa(p.attempt)), p.what, r.m.clock(p.from))
		if p.to != 0 {
			t += fmt.Sprintf("\nended %s after %s: %s", r.m.clock(p.to), tlDur(p.to-p.from), p.exit)
		} else {
			t += "\nstill running at the end of the session"
		}
		if len(p.stderr) > 0 {
			t += "\nstderr (last lines):\n  " + strings.Join(tlTail(p.stderr, 12), "\n  ")
		}
		return t
	}
	for _, g := range tlGroups(len(l.procs), func(k int) (float64, float64) { return r.x(l.procs[k].from), r.x(end(&l.procs[k])) }, 4, 10) {
		first, last := &l.procs[g.i], &l.procs[g.j-1]
		t, unexpected := title(first), 0
		for _, p := range l.procs[g.i:g.j] {
			if p.unexpected {
				unexpected++
			}
		}
		if n := g.j - g.i; n > 1 {
			t = r.groupTitle(n, fmt.Sprintf("processes (%d ended unexpectedly)", unexpected), first.from, end(last), t, title(last))
		}
		r.w(`<g class="h"><title>%s</title><path d="M%s %dv8" class="spawn"/><rect x="%s" y="%d" width="%s" height="4" fill="#475569"/>`,
			tlEsc(t), tlF(g.x0), y, tlF(g.x0), y+2, tlF(math.Max(g.x1-g.x0, 1.5)))
		if last.to != 0 {
			fill := "#94a3b8"
			if unexpected > 0 {
				fill = "#dc2626"
			}
			r.w(`<circle cx="%s" cy="%d" r="3" fill="%s"/>`, tlF(g.x1), y+4, fill)
		}
		r.w("</g>\n")
	}
}

// timers draws timers as brackets from scheduled to fired on the line y.
func (r *tlRender) timers(l *tlLane, y float64) {
	end := func(t *tlTimer) int64 {
		if t.fired == 0 {
			return t.fireAt
		}
		return t.fired
	}
	title := func(t *tlTimer) string {
		s := fmt.Sprintf("%s · %s timer %d → attempt %d\nscheduled %s: %s", l.name, t.purpose, t.id, t.attempt, r.m.clock(t.at), tlMs(t.delayMs))
		if t.ceilMs > 0 {
			s += fmt.Sprintf(" (retry %d, jitter within %s)", t.retry, tlMs(t.ceilMs))
		}
		if t.fired != 0 {
			return s + "\nfired " + r.m.clock(t.fired)
		}
		return s + "\nnever fired (cancelled, or the session ended first); due " + r.m.clock(t.fireAt)
	}
	for _, g := range tlGroups(len(l.timers), func(k int) (float64, float64) { return r.x(l.timers[k].at), r.x(end(&l.timers[k])) }, 4, 10) {
		t := &l.timers[g.i]
		cls, tt := "timer", title(t)
		if t.fired == 0 {
			cls = "timer dead"
		}
		if t.purpose == events.TimerHold {
			cls += " hold"
		}
		if n := g.j - g.i; n > 1 {
			last := &l.timers[g.j-1]
			tt = r.groupTitle(n, "timers", t.at, end(last), tt, title(last))
		}
		x0, x1 := g.x0, g.x1
		r.w(`<g class="h"><title>%s</title><path d="M%s %sv8M%s %sH%s" class="%s"/>`,
			tlEsc(tt), tlF(x0), tlF(y-4), tlF(x0), tlF(y), tlF(math.Max(x1, x0+1)), cls)
		if lbl := tlMs(t.delayMs); g.j-g.i == 1 && x1-x0 > tlTextW(lbl, 9)+16 {
			r.w(`<text x="%s" y="%s" class="tlbl">%s</text>`, tlF((x0+x1)/2), tlF(y-3), tlEsc(lbl))
		}
		r.w("</g>\n")
	}
}

var tlMarkWhat = [...]string{tlMkFail: "failures", tlMkGaveUp: "give-ups", tlMkAttempt: "retry attempts",
	tlMkApprovalAsked: "approval requests", tlMkApproved: "approvals", tlMkRejected: "rejections", tlMkPing: "failed pings",
	tlMkRelisted: "tool listings", tlMkToolsChanged: "tool changes", tlMkPinned: "pinnings", tlMkCommand: "commands",
	tlMkVerdict: "reload verdicts", tlMkDenied: "denied calls", tlMkAuthBlocked: "authorization blocks",
	tlMkAuth: "authorization events"}

// marks draws the point marks of a lane whose top is y: failures on the
// band, denied calls in the calls row, the rest above the band, where a
// verdict's text moves right of the glyphs drawn at its time. Marks of
// one kind closer than their glyph (12 to 18 px) are drawn as one.
func (r *tlRender) marks(l *tlLane, y int) {
	type drawn struct {
		g    tlGroup
		kind tlMarkKind
		ms   []tlMark
	}
	var all []drawn
	for k := tlMkFail; k <= tlMkVerdict; k++ {
		var ms []tlMark
		for _, m := range l.marks {
			if m.kind == k {
				ms = append(ms, m)
			}
		}
		gap := 12.0
		switch k {
		case tlMkAttempt:
			gap = 18
			if len(ms) > 0 {
				gap = max(gap, tlTextW(ms[len(ms)-1].text, 9)+10)
			}
		case tlMkFail, tlMkGaveUp, tlMkAuthBlocked:
			gap = 14
		}
		for _, g := range tlGroups(len(ms), func(i int) (float64, float64) { x := r.x(ms[i].t); return x, x }, 1, gap) {
			all = append(all, drawn{g, k, ms[g.i:g.j]})
		}
	}
	slices.SortStableFunc(all, func(a, b drawn) int {
		return cmp.Compare(a.ms[0].t, b.ms[0].t)
	})
	right := math.Inf(-1) // the right edge of the row above the band so far
	for _, d := range all {
		first, last := d.ms[0], d.ms[len(d.ms)-1]
		cy, x := float64(y+12), d.g.x0
		switch d.kind {
		case tlMkFail, tlMkGaveUp, tlMkAuthBlocked:
			cy = float64(y + 32)
		case tlMkPing:
			cy = float64(y + 22)
		case tlMkDenied:
			cy = float64(y + 58)
		case tlMkVerdict:
			x = math.Max(x, right-2)
			right = x + 6 + tlTextW(last.text, 10)
		case tlMkCommand:
			x -= 15 // clear of the attempt badge of the launch it asked for
		case tlMkAttempt:
			right = math.Max(right, x+max(7, tlTextW(last.text, 9)/2+3))
		default:
			right = math.Max(right, x+7)
		}
		title := l.name + " · " + first.title
		if len(d.ms) > 1 {
			title = l.name + " · " + r.groupTitle(len(d.ms), tlMarkWhat[d.kind], first.t, last.t, first.title, last.title)
		}
		r.w(`<g class="h"><title>%s</title>`, tlEsc(title))
		r.glyph(d.kind, x, cy, last.text)
		r.w("</g>\n")
	}
}

// calls draws l's calls in a 12 px row from y: a bar per call while they
// are sparse enough to tell apart, else a histogram of 4 px buckets (ok,
// failed, other stacked). Calls with injection signals get a magenta
// outline, or a magenta dot over their bucket.
func (r *tlRender) calls(l *tlLane, y int) {
	if len(l.calls) == 0 {
		return
	}
	if float64(len(l.calls)) <= r.plotW/6 {
		right := math.Inf(-1) // calls a few px apart are nudged apart to show as two
		for i := range l.calls {
			c := &l.calls[i]
			end := c.to
			if end == 0 {
				end = r.m.end
			}
			x0, x1 := r.x(c.from), r.x(end)
			w := math.Max(x1-x0, 3)
			if x0 < right && right-x0 <= 6 {
				x0 = right + 1
			}
			right = math.Max(right, x0+w)
			title := fmt.Sprintf("%s · call %s (%s): %s", l.name, c.tool, tlOr(c.name), strings.ReplaceAll(c.outcome, "_", " "))
			if c.to != 0 && !c.killed {
				title += " in " + tlDur(c.to-c.from)
			}
			if c.killed {
				title += " (mcpledger was killed with it in flight: its outcome is unknown)"
			}
			stroke := ""
			if c.signals != "" {
				title += "\n⚠ " + c.signals
				stroke = ` stroke="#c026d3" stroke-width="2"`
			}
			title += "\n" + strings.Join(c.detail, "\n")
			r.w(`<g class="h"><title>%s</title><rect x="%s" y="%d" width="%s" height="12" rx="1.5" fill="%s"%s/></g>`+"\n",
				tlEsc(title), tlF(x0), y, tlF(w), tlOutcomeColor[c.outcome], stroke)
		}
		return
	}
	const bucketPx = 4
	type bucket struct {
		ok, failed, other, flagged int
		tools                      map[string]int
	}
	bs := make([]bucket, int(math.Ceil(r.plotW/bucketPx))+1)
	peak := 0
	for i := range l.calls {
		c := &l.calls[i]
		b := &bs[int((r.x(c.from)-tlPad)/bucketPx)]
		if c.outcome == events.OutcomeOK {
			b.ok++
		} else if slices.Contains(tlCallsFailed, c.outcome) {
			b.failed++
		} else {
			b.other++
		}
		if c.signals != "" {
			b.flagged++
		}
		if b.tools == nil {
			b.tools = map[string]int{}
		}
		b.tools[c.tool]++
		peak = max(peak, b.ok+b.failed+b.other)
	}
	for i, b := range bs {
		total := b.ok + b.failed + b.other
		if total == 0 {
			continue
		}
		t0 := r.m.start + int64(float64(i*bucketPx)/r.plotW*r.span)
		t1 := r.m.start + int64(float64((i+1)*bucketPx)/r.plotW*r.span)
		title := fmt.Sprintf("%s · %d calls from %s to %s\n%d ok, %d failed, %d cancelled or unfinished", l.name, total,
			r.m.clock(t0), time.Unix(0, t1).UTC().Format("15:04:05.000"), b.ok, b.failed, b.other)
		if b.flagged > 0 {
			title += fmt.Sprintf("\n⚠ %d with injection signals", b.flagged)
		}
		title += "\n" + tlTopTools(b.tools, 6)
		x := tlPad + float64(i*bucketPx)
		h := 2 + 10*float64(total)/float64(peak)
		top := float64(y+12) - h
		r.w(`<g class="h"><title>%s</title>`, tlEsc(title))
		for _, part := range []struct {
			n    int
			fill string
		}{{b.failed, "#dc2626"}, {b.other, "#94a3b8"}, {b.ok, "#16a34a"}} {
			if part.n == 0 {
				continue
			}
			ph := math.Max(h*float64(part.n)/float64(total), 1.5)
			r.w(`<rect x="%s" y="%s" width="3.4" height="%s" fill="%s"/>`, tlF(x), tlF(top), tlF(ph), part.fill)
			top += ph
		}
		if b.flagged > 0 {
			r.w(`<circle cx="%s" cy="%s" r="2" fill="#c026d3"/>`, tlF(x+1.7), tlF(float64(y+12)-h-3))
		}
		r.w("</g>\n")
	}
}

// tlBandLabels returns the labels a state band may show, longest first.
func tlBandLabels(s *tlSeg) []string {
	name := string(s.state)
	var long []string
	if s.err != "" && s.reason != "" {
		long = append(long, name+" · "+string(s.reason)+" · "+s.err)
	} else if s.err != "" {
		long = append(long, name+" · "+s.err)
	}
	if s.reason != "" && s.state != events.StateReady {
		long = append(long, name+" · "+string(s.reason))
	} else if s.attempt > 1 && s.state != events.StateStopped {
		long = append(long, name+" · attempt "+strconv.Itoa(s.attempt))
	}
	return append(long, name)
}

// tlTopTools lists the most called tools of a bucket, most first.
func tlTopTools(tools map[string]int, n int) string {
	names := make([]string, 0, len(tools))
	for t := range tools {
		names = append(names, t)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := tools[b] - tools[a]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for i, t := range names {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more tools", len(names)-n))
			break
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", t, tools[t]))
	}
	return strings.Join(parts, ", ")
}
