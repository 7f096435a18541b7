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

// ---- rendering: the SVG canvas, axes, lane labels, flags and glyphs ----

const (
	tlLabelW  = 210 // the lane label column
	tlPad     = 12  // left and right padding of the plot
	tlAxisH   = 28  // the top axis
	tlFlagsH  = 20  // the row of session-wide flags under it
	tlLaneH   = 68  // one server
	tlBottomH = 30  // the UTC axis
	tlFitW    = 1120
	tlMaxW    = 16000
)

var tlStateColor = map[events.ServerState]string{
	events.StateConfiguring:  "#cbd5e1",
	events.StateLaunching:    "#93c5fd",
	events.StateHandshaking:  "#c4b5fd",
	events.StateReady:        "#4ade80",
	events.StateReconnecting: "#fbbf24",
	events.StateFailed:       "#ef4444",
	events.StateStopped:      "#e5e7eb",
}

var tlOutcomeColor = map[string]string{
	events.OutcomeOK:          "#16a34a",
	events.OutcomeToolError:   "#f97316",
	events.OutcomeInvalidArgs: "#eab308",
	events.OutcomeUnknownTool: "#fb7185",
	events.OutcomeError:       "#dc2626",
	events.OutcomeLost:        "#7f1d1d",
	events.OutcomeTimeout:     "#a21caf",
	events.OutcomeCancelled:   "#94a3b8",
	tlUnfinished:              "#475569",
}

type tlRender struct {
	m     *tlModel
	b     strings.Builder
	plotW float64
	span  float64
}

func (r *tlRender) layout(width int) {
	r.span = float64(max(r.m.end-r.m.start, int64(time.Millisecond)))
	if width > 0 {
		r.plotW = float64(width)
		return
	}
	busiest := 0
	for _, l := range r.m.lanes {
		busiest = max(busiest, len(l.segs)+len(l.marks)/2)
	}
	r.plotW = float64(min(max(tlFitW, busiest*8), tlMaxW))
}

// x maps a time to the plot's x coordinate.
func (r *tlRender) x(t int64) float64 {
	return tlPad + math.Max(0, math.Min(1, float64(t-r.m.start)/r.span))*r.plotW
}

func (r *tlRender) w(format string, args ...any) { fmt.Fprintf(&r.b, format, args...) }

func (r *tlRender) height() int { return tlAxisH + tlFlagsH + len(r.m.lanes)*tlLaneH + tlBottomH }

func tlLaneTop(i int) int { return tlAxisH + tlFlagsH + i*tlLaneH }

// tlAuthColor is the padlock colour of an auth.* mark, by its text.
var tlAuthColor = map[string]string{"in": "#16a34a", "refresh": "#0d9488", "fail": "#dc2626", "out": "#64748b"}

// glyph draws a mark's symbol centred on (x, y).
func (r *tlRender) glyph(k tlMarkKind, x, y float64, text string) {
	X, Y := tlF(x), tlF(y)
	switch k {
	case tlMkFail:
		r.w(`<circle cx="%s" cy="%s" r="5.5" fill="#fff" stroke="#dc2626" stroke-width="2"/><path d="M%s %sl5 5m0-5l-5 5" stroke="#dc2626" stroke-width="1.6"/>`,
			X, Y, tlF(x-2.5), tlF(y-2.5))
	case tlMkGaveUp:
		r.w(`<circle cx="%s" cy="%s" r="6.5" fill="#991b1b"/><text x="%s" y="%s" class="gt">!</text>`, X, Y, X, tlF(y+3.5))
	case tlMkAttempt:
		w := max(14, tlTextW(text, 9)+6)
		r.w(`<rect x="%s" y="%s" width="%s" height="14" rx="7" fill="#1e293b"/><text x="%s" y="%s" class="gt">%s</text>`,
			tlF(x-w/2), tlF(y-7), tlF(w), X, tlF(y+3.2), tlEsc(text))
	case tlMkApprovalAsked, tlMkApproved, tlMkRejected:
		fill, stroke := "#fff", "#d97706"
		switch k {
		case tlMkApproved:
			fill, stroke = "#16a34a", "#166534"
		case tlMkRejected:
			fill, stroke = "#dc2626", "#991b1b"
		}
		r.w(`<path d="M%s %sl6 6l-6 6l-6-6z" fill="%s" stroke="%s" stroke-width="1.5"/>`, X, tlF(y-6), fill, stroke)
	case tlMkPing:
		r.w(`<circle cx="%s" cy="%s" r="3" fill="#f59e0b" stroke="#92400e" stroke-width="1"/>`, X, Y)
	case tlMkRelisted:
		r.w(`<rect x="%s" y="%s" width="7" height="7" rx="1" fill="#0ea5e9"/>`, tlF(x-3.5), tlF(y-3.5))
	case tlMkToolsChanged:
		r.w(`<path d="M%s %sl6 11h-12z" fill="#a855f7" stroke="#6b21a8" stroke-width="1"/>`, X, tlF(y-6))
	case tlMkPinned:
		r.w(`<circle cx="%s" cy="%s" r="3.5" fill="#0d9488"/>`, X, Y)
	case tlMkCommand:
		r.w(`<rect x="%s" y="%s" width="12" height="12" rx="2" fill="#334155"/><text x="%s" y="%s" class="gt">%s</text>`, tlF(x-6), tlF(y-6), X, tlF(y+3.5), tlEsc(text))
	case tlMkDenied:
		r.w(`<circle cx="%s" cy="%s" r="5" fill="#fff" stroke="#dc2626" stroke-width="1.8"/><path d="M%s %sl6.4-6.4" stroke="#dc2626" stroke-width="1.8"/>`,
			X, Y, tlF(x-3.2), tlF(y+3.2))
	case tlMkAuthBlocked:
		r.w(`<rect x="%s" y="%s" width="11" height="8" rx="1.5" fill="#b91c1c"/><path d="M%s %sv-2.5a3 3 0 0 1 6 0v2.5" fill="none" stroke="#b91c1c" stroke-width="1.6"/>`,
			tlF(x-5.5), tlF(y-2), tlF(x-3), tlF(y-2))
	case tlMkAuth:
		fill := tlAuthColor[text]
		r.w(`<rect x="%s" y="%s" width="9" height="7" rx="1.5" fill="%s"/><path d="M%s %sv-2a2.5 2.5 0 0 1 5 0v2" fill="none" stroke="%s" stroke-width="1.4"/>`,
			tlF(x-4.5), tlF(y-2), fill, tlF(x-2.5), tlF(y-2), fill)
	case tlMkVerdict:
		r.w(`<text x="%s" y="%s" class="verdict">%s</text>`, tlF(x+4), tlF(y+3.5), tlEsc(text))
	}
}

func (r *tlRender) labels() {
	h := r.height()
	r.w("<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" class=\"lab\">\n", tlLabelW, h, tlLabelW, h)
	r.w(`<text x="14" y="18" class="axl">time since start</text>` + "\n")
	r.w(`<text x="14" y="%d" class="axl">time of day (UTC)</text>`+"\n", h-10)
	for i, l := range r.m.lanes {
		y := tlLaneTop(i)
		r.w(`<g class="h"><title>%s</title><rect x="0" y="%d" width="%d" height="%d" fill="%s"/>`,
			tlEsc(r.laneTitle(l)), y, tlLabelW, tlLaneH, tlLaneBg(i))
		r.w(`<text x="14" y="%d" class="name">%s</text>`, y+22, tlEsc(tlClip(l.name, 24)))
		sub := "not configured"
		if l.cfg != nil {
			sub = string(l.cfg.Transport)
			if l.cfg.Scope != "" {
				sub += " · " + string(l.cfg.Scope)
			}
			if l.cfg.Gated {
				sub += " · gated"
			}
		}
		r.w(`<text x="14" y="%d" class="meta">%s</text>`, y+38, tlEsc(tlClip(sub, 30)))
		if s, before := l.final(); s.state != "" {
			label, state, cls := string(s.state), s.state, "pill"
			if before != "" {
				label, state = string(before)+", then shut down", before
			} else if s.reason != "" {
				label += " · " + string(s.reason)
			}
			if state == events.StateFailed {
				cls = "pill inv"
			}
			label = tlClip(label, 30)
			r.w(`<rect x="14" y="%d" width="%s" height="15" rx="7.5" fill="%s"/><text x="21" y="%d" class="%s">%s</text>`,
				y+45, tlF(tlTextW(label, 10)+14), tlStateColor[state], y+56, cls, tlEsc(label))
		}
		r.w("</g>\n")
	}
	r.w("</svg>\n")
}

func (r *tlRender) laneTitle(l *tlLane) string {
	t := l.name
	if c := l.cfg; c != nil {
		t += fmt.Sprintf("\n%s · scope %s · config %s", c.Transport, tlOr(string(c.Scope)), tlHash(c.Hash))
		if c.Command != "" {
			t += "\n" + tlClip(strings.Join(append([]string{c.Command}, c.Args...), " "), 200)
		}
		if c.URL != "" {
			t += "\n" + tlClip(c.URL, 200)
		}
		if c.Source != "" {
			t += "\nfrom " + c.Source
		}
	}
	if l.lastError != "" {
		t += "\nlast error: " + tlClip(l.lastError, 300)
	}
	return t
}

func tlLaneBg(i int) string {
	if i%2 == 1 {
		return "#f8fafc"
	}
	return "#ffffff"
}

func (r *tlRender) chart() {
	m, h := r.m, r.height()
	W := int(math.Ceil(r.plotW)) + 2*tlPad
	bottom := tlLaneTop(len(m.lanes))
	r.w("<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" class=\"plot\">\n", W, h, W, h)
	for i := range m.lanes {
		r.w(`<rect x="0" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", tlLaneTop(i), W, tlLaneH, tlLaneBg(i))
	}
	// Ticks: round offsets from the start on top, with grid lines; round
	// UTC instants under the lanes.
	step := tlTickStep(r.span / r.plotW * 110)
	for off := int64(0); off <= int64(r.span); off += step {
		x := tlF(r.x(m.start + off))
		r.w(`<path d="M%s %dV%d" class="grid"/>`, x, tlAxisH-4, bottom)
		if lbl := "+" + tlDur(off); r.x(m.start+off)+tlTextW(lbl, 10)/2 < float64(W) {
			r.w(`<text x="%s" y="%d" class="tick">%s</text>`, x, tlAxisH-9, lbl)
		}
		r.w("\n")
	}
	// The first round instant may be before the start: r.x puts it on the
	// edge, where a label would be cut, as it would be within 40 px of
	// either edge. Past the end, r.x stays on the right edge.
	step = tlTickStep(r.span / r.plotW * 120)
	for t := m.start / step * step; r.x(t) <= float64(W)-40; t += step {
		if r.x(t) < 40 {
			continue
		}
		x := tlF(r.x(t))
		r.w(`<path d="M%s %dv5" class="axis"/><text x="%s" y="%d" class="tick">%s</text>`+"\n",
			x, bottom, x, bottom+18, tlUTCTick(t, step))
	}
	r.w(`<path d="M%d %dH%d M%d %dH%d" class="axis"/>`+"\n", 0, tlAxisH-4, W, 0, bottom, W)
	for i, l := range m.lanes {
		r.lane(l, tlLaneTop(i))
	}
	r.flags(bottom)
	r.w("</svg>\n")
}

func (r *tlRender) flags(bottom int) {
	fl := slices.Clone(r.m.flags)
	slices.SortStableFunc(fl, func(a, b tlFlag) int { return cmp.Compare(a.t, b.t) })
	color := map[string]string{"reload": "#7c3aed", "stop": "#334155", "reconnect": "#0369a1", "config": "#dc2626"}
	for i, f := range fl {
		x := r.x(f.t)
		room := r.plotW + tlPad - x
		if i+1 < len(fl) {
			room = r.x(fl[i+1].t) - x
		}
		c := color[f.kind]
		r.w(`<g class="h"><title>%s</title><path d="M%s %dV%d" stroke="%s" stroke-width="1.5" stroke-dasharray="5 3"/>`,
			tlEsc(f.title), tlF(x), tlAxisH-2, bottom, c)
		if tw := tlTextW(f.label, 10) + 10; room > tw+2 {
			r.w(`<rect x="%s" y="%d" width="%s" height="15" rx="3" fill="%s"/><text x="%s" y="%d" class="flag">%s</text>`,
				tlF(x), tlAxisH, tlF(tw), c, tlF(x+5), tlAxisH+11, tlEsc(f.label))
		} else {
			r.w(`<path d="M%s %dh8l-8 8z" fill="%s"/>`, tlF(x), tlAxisH, c)
		}
		r.w("</g>\n")
	}
}

// tlTickStep returns the smallest round step of at least minNs.
func tlTickStep(minNs float64) int64 {
	us, ms, s := int64(time.Microsecond), int64(time.Millisecond), int64(time.Second)
	for _, st := range []int64{50 * us, 100 * us, 200 * us, 500 * us, ms, 2 * ms, 5 * ms, 10 * ms, 20 * ms, 50 * ms, 100 * ms, 200 * ms, 500 * ms,
		s, 2 * s, 5 * s, 10 * s, 15 * s, 30 * s, 60 * s, 120 * s, 300 * s, 600 * s, 900 * s, 1800 * s,
		3600 * s, 7200 * s, 3 * 3600 * s, 6 * 3600 * s, 12 * 3600 * s} {
		if float64(st) >= minNs {
			return st
		}
	}
	return 24 * 3600 * s
}

func tlUTCTick(t, step int64) string {
	f := "15:04:05"
	if step < int64(time.Second) {
		f = "15:04:05.000"
	}
	return time.Unix(0, t).UTC().Format(f)
}

// tlF formats a coordinate with at most one decimal.
func tlF(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// tlTextW estimates the width of s in px at font size px.
func tlTextW(s string, px float64) float64 { return float64(len([]rune(s))) * px * 0.6 }
