package replay

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
)

// TimelineOptions tunes [Timeline]. A nil *TimelineOptions means the
// defaults.
type TimelineOptions struct {
	// Width is the width of the time axis in pixels. Zero picks it from
	// the session: 1,150 px (the page fits a 1,400 px window), or wider, up
	// to 16,000 px with a horizontal scroll bar, when the busiest server
	// changes state more often than that leaves room for.
	Width int
	// Source says where the session was read from (a journal path). It is
	// shown under the summary when set.
	Source string
}

// Timeline writes session (the events of one session in seq order) as one
// self-contained HTML page: a header, a swimlane per server with its
// states over time, failures, reconnect attempts, backoff timers,
// processes, approvals, reloads and tool calls, a time axis, a legend and
// a summary table. Every mark has a tooltip (an SVG title) that an inline
// script also shows in a detail panel. The page loads nothing: no network,
// no external scripts, styles or fonts.
//
// The output depends only on session and opts: the same input gives the
// same bytes. Dense calls are drawn as a histogram instead of one bar each.
// The only errors are w's.
func Timeline(w io.Writer, session []events.Event, opts *TimelineOptions) error {
	var o TimelineOptions
	if opts != nil {
		o = *opts
	}
	m := tlFold(session)
	r := &tlRender{m: m}
	r.layout(o.Width)
	r.page(&o)
	_, err := io.WriteString(w, r.b.String())
	return err
}

// ---- the model: the session folded into lanes ----

type tlModel struct {
	id         string
	start, end int64 // the span drawn: first to last event
	started    *events.SessionStarted
	stopped    *events.SessionStopped
	stoppedAt  int64
	events     int
	calls      int
	lanes      []*tlLane
	flags      []tlFlag // session-wide vertical lines: reloads, stops, reconnects
	bySeq      map[uint64]*events.Event
}

type tlLane struct {
	name      string
	cfg       *events.ServerConfig
	first     int64
	segs      []tlSeg
	marks     []tlMark
	timers    []tlTimer
	procs     []tlProc
	calls     []tlCall
	hs        *events.HandshakeCompleted
	tools     int
	refusal   string // detail of the last refused admission
	launches  int
	failures  int
	outcomes  map[string]int
	lastError string
}

type tlSeg struct {
	from, to int64
	state    events.ServerState
	attempt  int
	reason   events.Reason
	err      string // the error that caused it, in a few words
	marked   bool   // a failure glyph sits on its start
	info     []string
}

type tlMarkKind int

const (
	tlMkFail tlMarkKind = iota
	tlMkGaveUp
	tlMkAttempt
	tlMkApprovalAsked
	tlMkApproved
	tlMkRejected
	tlMkPing
	tlMkRelisted
	tlMkToolsChanged
	tlMkPinned
	tlMkCommand
	tlMkVerdict
	tlMkDenied
)

type tlMark struct {
	t     int64
	kind  tlMarkKind
	text  string
	title string
}

type tlTimer struct {
	id              uint64
	at, fireAt      int64
	fired           int64 // 0: never fired
	purpose         string
	attempt, retry  int
	delayMs, ceilMs int64
}

type tlProc struct {
	from, to   int64 // to 0: still running at the end
	attempt    int
	pid        int
	what       string // command or endpoint
	exit       string
	unexpected bool
	stderr     []string
}

type tlCall struct {
	from, to int64 // to 0: never finished
	tool     string
	name     string
	outcome  string
	signals  string // injection signals: the call is highlighted
	detail   []string
}

type tlFlag struct {
	t     int64
	kind  string // reload, stop, reconnect, config
	label string
	title string
}

func tlFold(evs []events.Event) *tlModel {
	m := &tlModel{events: len(evs), bySeq: make(map[uint64]*events.Event, len(evs))}
	if len(evs) > 0 {
		m.id = evs[0].Session.String()
		m.start, m.end = evs[0].Time, evs[0].Time
	}
	for i := range evs {
		e := &evs[i]
		m.bySeq[e.Seq] = e
		m.start, m.end = min(m.start, e.Time), max(m.end, e.Time)
	}
	lanes := map[string]*tlLane{}
	lane := func(name string, t int64) *tlLane {
		l := lanes[name]
		if l == nil {
			l = &tlLane{name: name, first: t, outcomes: map[string]int{}}
			lanes[name] = l
			m.lanes = append(m.lanes, l)
		}
		return l
	}
	type ref struct {
		l *tlLane
		i int
	}
	timers, calls, decided := map[uint64]ref{}, map[string]ref{}, map[string]string{}
	for i := range evs {
		e := &evs[i]
		var l *tlLane
		if e.Server != "" {
			l = lane(e.Server, e.Time)
		}
		head := fmt.Sprintf("%s · #%d %s", m.clock(e.Time), e.Seq, e.Kind)
		switch p := e.Payload.(type) {
		case *events.SessionStarted:
			m.started = p
		case *events.SessionStopped:
			m.stopped, m.stoppedAt = p, e.Time
		case *events.ConfigObserved:
			for j := range p.Servers {
				lane(p.Servers[j].Name, e.Time).cfg = &p.Servers[j]
			}
			if len(p.Errors) > 0 {
				m.flags = append(m.flags, tlFlag{e.Time, "config", "config errors",
					head + "\n" + strings.Join(p.Errors, "\n")})
			}
		case *events.ReloadDecided:
			if p.Trigger == "start" {
				break // every session starts with one: the lanes show it
			}
			var lines []string
			for _, v := range p.Verdicts {
				lines = append(lines, fmt.Sprintf("%s: %s", v.Server, v.Verdict))
				if v.Verdict != events.VerdictKeep {
					lane(v.Server, e.Time).mark(e.Time, tlMkVerdict, v.Verdict,
						fmt.Sprintf("reload (%s): %s\n%s\nconfig %s → %s", p.Trigger, v.Verdict, head, tlHash(v.Before), tlHash(v.After)))
				}
			}
			m.flags = append(m.flags, tlFlag{e.Time, "reload", "reload", "reload · " + p.Trigger + "\n" + head + "\n" + strings.Join(lines, "\n")})
		case *events.StopRequested:
			if l == nil {
				m.flags = append(m.flags, tlFlag{e.Time, "stop", "stop", fmt.Sprintf("stop requested (%s) by %s\n%s", p.Reason, tlOr(p.By), head)})
			} else {
				l.mark(e.Time, tlMkCommand, "■", fmt.Sprintf("stop requested (%s) by %s\n%s", p.Reason, tlOr(p.By), head))
			}
		case *events.ReconnectRequested:
			if l == nil {
				m.flags = append(m.flags, tlFlag{e.Time, "reconnect", "reconnect", "reconnect of every failed server requested by " + tlOr(p.By) + "\n" + head})
			} else {
				l.mark(e.Time, tlMkCommand, "↻", "reconnect requested by "+tlOr(p.By)+"\n"+head)
			}
		case *events.AdmissionDecided:
			if !p.Admitted {
				l.refusal = strings.TrimSpace(string(p.Reason) + " " + p.Detail)
			}
		case *events.ServerTransitioned:
			m.transition(l, e, p, head)
		case *events.TimerScheduled:
			timers[p.TimerID] = ref{l, len(l.timers)}
			l.timers = append(l.timers, tlTimer{id: p.TimerID, at: e.Time, fireAt: p.FireAt, purpose: p.Purpose,
				attempt: p.Attempt, retry: p.Retry, delayMs: p.DelayMs, ceilMs: p.CeilMs})
		case *events.TimerFired:
			if r, ok := timers[p.TimerID]; ok && r.l.timers[r.i].fired == 0 {
				r.l.timers[r.i].fired = e.Time
			}
		case *events.ProcessSpawned:
			l.procs = append(l.procs, tlProc{from: e.Time, attempt: p.Attempt, pid: p.PID,
				what: fmt.Sprintf("pid %d · %s", p.PID, p.Command)})
		case *events.TransportOpened:
			l.procs = append(l.procs, tlProc{from: e.Time, attempt: p.Attempt, what: fmt.Sprintf("%s %s", p.Transport, p.Endpoint)})
		case *events.ProcessExited:
			exit := fmt.Sprintf("exit code %d", p.ExitCode)
			if p.Signal != "" {
				exit = "signal " + p.Signal
			}
			if p.Expected {
				exit += " (asked to stop)"
			}
			pr := l.openProc(e.Time, func(pr *tlProc) bool { return pr.pid == p.PID })
			pr.exit, pr.unexpected, pr.stderr = exit, !p.Expected, p.StderrTail
		case *events.TransportClosed:
			pr := l.openProc(e.Time, func(pr *tlProc) bool { return pr.pid == 0 && pr.attempt == p.Attempt })
			pr.exit, pr.unexpected = "closed: "+p.Error.String(), !p.Expected
			if p.Expected {
				pr.exit = "closed (asked to)"
			}
		case *events.HandshakeCompleted:
			l.hs = p
		case *events.ToolsListed:
			l.tools = len(p.Tools)
			if p.Trigger != "initial" {
				l.mark(e.Time, tlMkRelisted, "", fmt.Sprintf("tools listed again (%s): %d tools\n%s", p.Trigger, len(p.Tools), head))
			}
		case *events.PingFailed:
			l.mark(e.Time, tlMkPing, "", fmt.Sprintf("ping failed (%d in a row): %s\n%s", p.Consecutive, p.Error, head))
		case *events.ApprovalRequested:
			t := fmt.Sprintf("approval requested for config %s\n%s", tlHash(p.Hash), head)
			if len(p.Changed) > 0 {
				t += fmt.Sprintf("\nchanged since %s: %s", tlHash(p.Previous), strings.Join(p.Changed, ", "))
			}
			l.mark(e.Time, tlMkApprovalAsked, "", t)
		case *events.ApprovalDecided:
			k := tlMkApproved
			if p.Decision != events.DecisionApprove {
				k = tlMkRejected
			}
			l.mark(e.Time, k, "", fmt.Sprintf("%s by %s for config %s\n%s", p.Decision, tlOr(p.By), tlHash(p.Hash), head))
		case *events.ToolsPinned:
			l.mark(e.Time, tlMkPinned, "", fmt.Sprintf("%d tool definitions pinned under approval %s\n%s", len(p.Tools), tlHash(p.Hash), head))
		case *events.ToolsChanged:
			t := "tool definitions match the approval again"
			if len(p.Changed) > 0 {
				names := make([]string, len(p.Changed))
				for j, c := range p.Changed {
					names[j] = c.Name
				}
				t = "withheld, definitions changed since approval: " + strings.Join(names, ", ")
			}
			l.mark(e.Time, tlMkToolsChanged, "", t+"\n"+head)
		case *events.CallDecided:
			if p.Decision == events.CallAllow {
				decided[p.CallID] = fmt.Sprintf("allowed by %s (policy %s)", p.By, p.Policy)
				break
			}
			l.mark(e.Time, tlMkDenied, "", fmt.Sprintf("call %s denied by %s (policy %s)%s\n%s",
				p.Tool, p.By, p.Policy, tlPrefix(": ", p.Reason), head))
		case *events.CallStarted:
			m.calls++
			calls[p.CallID] = ref{l, len(l.calls)}
			c := tlCall{from: e.Time, tool: p.Tool, name: p.Name, outcome: tlUnfinished}
			c.detail = append(c.detail, tlJoin(", ", fmt.Sprintf("started %s (#%d)", m.clock(e.Time), e.Seq),
				tlPrefix("by ", p.Caller), tlPrefix("to attempt ", tlItoa(p.Attempt))))
			if d := decided[p.CallID]; d != "" {
				c.detail = append(c.detail, d)
			}
			if p.RetryOf != "" {
				c.detail = append(c.detail, "retry of call "+p.RetryOf)
			}
			c.detail = append(c.detail, "args "+tlBlob(p.Args))
			l.calls = append(l.calls, c)
		case *events.CallFinished:
			r, ok := calls[p.CallID]
			if !ok {
				break
			}
			c := &r.l.calls[r.i]
			c.to, c.outcome = e.Time, p.Outcome
			if p.Error != "" {
				c.detail = append(c.detail, "error "+tlClip(p.Error, 300))
			}
			c.detail = append(c.detail, "result "+tlBlob(p.Result))
			if p.CutChars > 0 {
				c.detail = append(c.detail, fmt.Sprintf("output cut: %d of %d characters removed", p.CutChars, p.RenderedChars))
			}
			if p.Retrying {
				c.detail = append(c.detail, "a reconnect and one retry follow")
			}
			if len(p.Signals) > 0 {
				c.signals = "injection signals: " + strings.Join(p.Signals, ", ")
			}
		}
	}
	slices.SortStableFunc(m.lanes, func(a, b *tlLane) int { return strings.Compare(a.name, b.name) })
	for _, l := range m.lanes {
		if n := len(l.segs); n > 0 && l.segs[n-1].to == 0 {
			l.segs[n-1].to = m.end
		}
		for _, c := range l.calls {
			l.outcomes[c.outcome]++
		}
	}
	return m
}

// tlUnfinished is the outcome of a call with no call.finished.
const tlUnfinished = "unfinished"

// tlCallsFailed are the outcomes counted as failed calls.
var tlCallsFailed = []string{events.OutcomeToolError, events.OutcomeInvalidArgs, events.OutcomeUnknownTool,
	events.OutcomeError, events.OutcomeLost, events.OutcomeTimeout}

// tlItoa formats n, or "" for 0 (an attempt not known).
func tlItoa(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func tlPrefix(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

// final returns the lane's last state and, when the session's shutdown
// stopped it from another state than ready, that state: the one that
// matters in a post-mortem.
func (l *tlLane) final() (last tlSeg, before events.ServerState) {
	n := len(l.segs)
	if n == 0 {
		return tlSeg{}, ""
	}
	last = l.segs[n-1]
	if last.reason == events.ReasonShutdown && n > 1 && l.segs[n-2].state != events.StateReady {
		before = l.segs[n-2].state
	}
	return last, before
}

func (l *tlLane) mark(t int64, k tlMarkKind, text, title string) {
	l.marks = append(l.marks, tlMark{t, k, text, title})
}

// openProc returns the latest process (or connection) matching match that
// has not ended, ending it at t; without one it records an instant one.
func (l *tlLane) openProc(t int64, match func(*tlProc) bool) *tlProc {
	for i := len(l.procs) - 1; i >= 0; i-- {
		if pr := &l.procs[i]; pr.to == 0 && match(pr) {
			pr.to = t
			return pr
		}
	}
	l.procs = append(l.procs, tlProc{from: t, to: t, what: "(start not recorded)"})
	return &l.procs[len(l.procs)-1]
}

func (m *tlModel) transition(l *tlLane, e *events.Event, p *events.ServerTransitioned, head string) {
	if n := len(l.segs); n > 0 {
		l.segs[n-1].to = e.Time
	} else if p.From != "" && e.Time > l.first {
		l.segs = append(l.segs, tlSeg{from: l.first, to: e.Time, state: p.From})
	}
	s := tlSeg{from: e.Time, state: p.To, attempt: p.Attempt, reason: p.Reason}
	s.info = append(s.info, fmt.Sprintf("entered #%d: %s → %s by %s", e.Seq, p.From, p.To, p.Trigger))
	cause := m.describe(e.Cause)
	if cause != "" {
		s.info = append(s.info, "cause "+cause)
	}
	if p.Reason != "" {
		s.info = append(s.info, "reason "+string(p.Reason))
	}
	if p.Error != nil {
		s.info = append(s.info, "error "+tlClip(p.Error.String(), 300))
		s.err = string(p.Error.Class)
		switch {
		case p.Error.Signal != "":
			s.err = "signal " + p.Error.Signal
		case p.Error.Class == events.ErrExit:
			s.err = fmt.Sprintf("exit code %d", p.Error.ExitCode)
		}
	}
	s.marked = p.Trigger == string(fsm.TrigFail) || p.Trigger == string(fsm.TrigExhaust)
	switch p.To {
	case events.StateLaunching:
		l.launches++
		if p.Attempt > 1 {
			l.mark(e.Time, tlMkAttempt, strconv.Itoa(p.Attempt), fmt.Sprintf("attempt %d (%s)\n%s", p.Attempt, p.Trigger, head))
		}
	case events.StateReady:
		if l.hs != nil {
			s.info = append(s.info, tlJoin(" · ", tlJoin(" ", "server", l.hs.ServerName, l.hs.ServerVersion), tlPrefix("protocol ", l.hs.ProtocolVersion)))
		}
		s.info = append(s.info, fmt.Sprintf("%d tools listed", l.tools))
	case events.StateStopped:
		if l.refusal != "" && p.Trigger == string(fsm.TrigDeny) {
			s.info = append(s.info, "admission refused: "+l.refusal)
		}
	}
	if p.Error != nil {
		l.lastError = p.Error.String()
	}
	switch fsm.Trigger(p.Trigger) {
	case fsm.TrigFail:
		l.failures++
		t := fmt.Sprintf("failure of attempt %d: %s\n%s", p.Attempt, tlClip(p.Error.String(), 300), head)
		if cause != "" {
			t += "\ncause " + cause
		}
		if c := m.bySeq[e.Cause]; c != nil {
			if pe, ok := c.Payload.(*events.ProcessExited); ok && len(pe.StderrTail) > 0 {
				t += "\nstderr:\n  " + strings.Join(tlTail(pe.StderrTail, 8), "\n  ")
			}
		}
		l.mark(e.Time, tlMkFail, "", t)
	case fsm.TrigExhaust:
		l.mark(e.Time, tlMkGaveUp, "", fmt.Sprintf("gave up after attempt %d (%s): only an explicit reconnect revives it\n%s", p.Attempt, p.Reason, head))
	}
	l.segs = append(l.segs, s)
}

// describe says in one line what input seq was.
func (m *tlModel) describe(seq uint64) string {
	e := m.bySeq[seq]
	if seq == 0 || e == nil {
		return ""
	}
	s := fmt.Sprintf("#%d %s", e.Seq, e.Kind)
	switch p := e.Payload.(type) {
	case *events.ProcessExited:
		s += fmt.Sprintf(" pid %d", p.PID)
		if p.Signal != "" {
			s += " signal " + p.Signal
		} else {
			s += fmt.Sprintf(" code %d", p.ExitCode)
		}
	case *events.ConnectFailed:
		s += fmt.Sprintf(" (%s)", p.Phase)
	case *events.TimerFired:
		s += fmt.Sprintf(" %s timer %d", p.Purpose, p.TimerID)
	case *events.ConfigObserved:
		s += " (" + p.Trigger + ")"
	case *events.StopRequested:
		s += " by " + tlOr(p.By)
	case *events.ReconnectRequested:
		s += " by " + tlOr(p.By)
	case *events.ApprovalDecided:
		s += " " + p.Decision + " by " + tlOr(p.By)
	case *events.PingFailed:
		s += fmt.Sprintf(" (%d in a row)", p.Consecutive)
	}
	return s
}

// clock formats t as a UTC time of day and its offset from the start.
func (m *tlModel) clock(t int64) string {
	return time.Unix(0, t).UTC().Format("15:04:05.000") + " (+" + tlDur(t-m.start) + ")"
}

// ---- rendering ----

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

func (r *tlRender) page(o *TimelineOptions) {
	m := r.m
	r.w("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	r.w("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n")
	r.w("<title>mcpledger timeline · %s</title>\n<style>%s</style>\n</head>\n<body>\n", tlEsc(tlOr(m.id)), tlCSS)
	r.header()
	r.legend()
	r.w("<div class=\"chart\">\n<div class=\"labels\">\n")
	r.labels()
	r.w("</div>\n<div class=\"scroll\">\n")
	r.chart()
	r.w("</div>\n</div>\n<p class=\"hint\">Hover over a band, mark or call for its details; click to pin them, click elsewhere to unpin.</p>\n")
	r.summary()
	if o.Source != "" {
		r.w("<p class=\"foot\">Read from %s.</p>\n", tlEsc(o.Source))
	}
	r.w("<div id=\"detail\" hidden=\"hidden\"></div>\n<script>%s</script>\n</body>\n</html>\n", tlJS)
}

func (r *tlRender) header() {
	m := r.m
	r.w("<header>\n<h1>mcpledger timeline</h1>\n<div class=\"sub\">session %s</div>\n<dl class=\"meta\">\n", tlEsc(tlOr(m.id)))
	item := func(k, v string) {
		r.w("<div><dt>%s</dt><dd title=\"%s\">%s</dd></div>\n", tlEsc(k), tlEsc(v), tlEsc(v))
	}
	utc := func(t int64) string { return time.Unix(0, t).UTC().Format("2006-01-02 15:04:05.000 UTC") }
	item("started", utc(m.start))
	end := "not recorded: interrupted, or still running"
	if m.stopped != nil {
		end = fmt.Sprintf("%s · %s", time.Unix(0, m.stoppedAt).UTC().Format("15:04:05.000"), m.stopped.Reason)
	}
	item("ended", end)
	item("duration", tlDur(m.end-m.start))
	if s := m.started; s != nil {
		item("command", tlOr(s.Command))
		item("build", tlJoin(" · ", s.Version, s.Build))
		item("seed", strconv.FormatUint(s.Seed, 10))
		if s.Host != "" || s.PID != 0 {
			pid := ""
			if s.PID != 0 {
				pid = "pid " + strconv.Itoa(s.PID)
			}
			item("host", tlJoin(" · ", s.Host, pid))
		}
		o := fsm.WithDefaults(s.Options)
		item("retries", fmt.Sprintf("%d launches, backoff %s doubling to %s", o.MaxAttempts, tlMs(o.BackoffBaseMs), tlMs(o.BackoffMaxMs)))
		if s.Previous != "" {
			item("previous", s.Previous)
		}
	}
	item("recorded", tlJoin(" · ", tlCount(m.events, "event"), tlCount(len(m.lanes), "server"), tlCount(m.calls, "call")))
	r.w("</dl>\n</header>\n")
}

func (r *tlRender) legend() {
	r.w("<div class=\"legend\">\n")
	sw := func(label string, draw func()) {
		r.w("<span><svg width=\"22\" height=\"16\" viewBox=\"0 0 22 16\">")
		draw()
		r.w("</svg>%s</span>\n", tlEsc(label))
	}
	for _, s := range events.States() {
		sw(string(s), func() { r.w(`<rect x="1" y="3" width="20" height="10" rx="2" fill="%s"/>`, tlStateColor[s]) })
	}
	r.w("<i></i>\n")
	sw("failure", func() { r.glyph(tlMkFail, 11, 8, "") })
	sw("gave up", func() { r.glyph(tlMkGaveUp, 11, 8, "") })
	sw("retry attempt", func() { r.glyph(tlMkAttempt, 11, 8, "2") })
	sw("backoff timer", func() {
		r.w(`<path d="M2 5v6M2 8H17" stroke="#b45309" stroke-width="1.5" fill="none"/><circle cx="18" cy="8" r="2.5" fill="#b45309"/>`)
	})
	sw("process", func() {
		r.w(`<rect x="2" y="7" width="16" height="3" fill="#475569"/><circle cx="19" cy="8.5" r="2.5" fill="#dc2626"/>`)
	})
	sw("approval asked", func() { r.glyph(tlMkApprovalAsked, 11, 8, "") })
	sw("approved", func() { r.glyph(tlMkApproved, 11, 8, "") })
	sw("rejected", func() { r.glyph(tlMkRejected, 11, 8, "") })
	sw("tools changed", func() { r.glyph(tlMkToolsChanged, 11, 8, "") })
	sw("ping failed", func() { r.glyph(tlMkPing, 11, 8, "") })
	sw("merged: too short to draw apart", func() {
		r.w(`<rect x="1" y="3" width="20" height="10" fill="%s"/><path d="M1 12H21" class="churn"/>`, tlStateColor[events.StateReady])
	})
	sw("reload", func() { r.w(`<path d="M11 0V16" stroke="#7c3aed" stroke-width="1.5" stroke-dasharray="3 2"/>`) })
	r.w("<i></i>\n")
	for _, o := range append(append([]string{events.OutcomeOK}, tlCallsFailed...), events.OutcomeCancelled, tlUnfinished) {
		sw(strings.ReplaceAll(o, "_", " "), func() { r.w(`<rect x="3" y="4" width="16" height="8" rx="1.5" fill="%s"/>`, tlOutcomeColor[o]) })
	}
	sw("injection signals", func() {
		r.w(`<rect x="3" y="4" width="16" height="8" rx="1.5" fill="%s" stroke="#c026d3" stroke-width="2"/>`, tlOutcomeColor[events.OutcomeOK])
	})
	sw("call denied", func() { r.glyph(tlMkDenied, 11, 8, "") })
	sw("calls, aggregated", func() {
		r.w(`<rect x="3" y="9" width="4" height="5" fill="#16a34a"/><rect x="8" y="4" width="4" height="10" fill="#16a34a"/><rect x="8" y="2" width="4" height="2" fill="#dc2626"/><rect x="13" y="7" width="4" height="7" fill="#16a34a"/>`)
	})
	r.w("</div>\n")
}

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
			switch {
			case before != "":
				label, state = string(before)+", then shut down", before
			case s.reason != "":
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
	step = tlTickStep(r.span / r.plotW * 120)
	for t := (m.start + step - 1) / step * step; t <= m.start+int64(r.span); t += step {
		if r.x(t) < 40 || r.x(t) > float64(W)-40 {
			continue // its label would be cut
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
	tlMkVerdict: "reload verdicts", tlMkDenied: "denied calls"}

// marks draws the point marks of a lane whose top is y: failures on the
// band, denied calls in the calls row, the rest above the band, where a
// verdict's text moves right of the glyphs drawn at its time. Marks of
// one kind closer than 10 px are drawn as one.
func (r *tlRender) marks(l *tlLane, y int) {
	type drawn struct {
		g    tlGroup
		kind tlMarkKind
		ms   []tlMark
	}
	var all []drawn
	for k := tlMkFail; k <= tlMkDenied; k++ {
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
		case tlMkFail, tlMkGaveUp:
			gap = 14
		}
		for _, g := range tlGroups(len(ms), func(i int) (float64, float64) { x := r.x(ms[i].t); return x, x }, 1, gap) {
			all = append(all, drawn{g, k, ms[g.i:g.j]})
		}
	}
	slices.SortStableFunc(all, func(a, b drawn) int {
		return cmp.Or(cmp.Compare(a.ms[0].t, b.ms[0].t), cmp.Compare(tlBool(a.kind == tlMkVerdict), tlBool(b.kind == tlMkVerdict)))
	})
	right := math.Inf(-1) // the right edge of the row above the band so far
	for _, d := range all {
		first, last := d.ms[0], d.ms[len(d.ms)-1]
		cy, x := float64(y+12), d.g.x0
		switch d.kind {
		case tlMkFail, tlMkGaveUp:
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
			if c.to != 0 {
				title += " in " + tlDur(c.to-c.from)
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
		switch {
		case c.outcome == events.OutcomeOK:
			b.ok++
		case slices.Contains(tlCallsFailed, c.outcome):
			b.failed++
		default:
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
	switch {
	case s.err != "" && s.reason != "":
		long = append(long, name+" · "+string(s.reason)+" · "+s.err)
	case s.err != "":
		long = append(long, name+" · "+s.err)
	}
	switch {
	case s.reason != "" && s.state != events.StateReady:
		long = append(long, name+" · "+string(s.reason))
	case s.attempt > 1 && s.state != events.StateStopped:
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

func (r *tlRender) summary() {
	r.w("<h2>Servers</h2>\n<table>\n<thead><tr><th>server</th><th>transport</th><th class=\"n\">launches</th><th class=\"n\">failures</th>" +
		"<th class=\"n\">ready</th><th class=\"n\">calls ok</th><th class=\"n\">calls failed</th><th>final state</th><th>last error</th></tr></thead>\n<tbody>\n")
	for _, l := range r.m.lanes {
		transport := "-"
		if l.cfg != nil {
			transport = string(l.cfg.Transport)
		}
		var ready int64
		for _, s := range l.segs {
			if s.state == events.StateReady {
				ready += s.to - s.from
			}
		}
		last, before := l.final()
		readyText := "-"
		if lived := r.m.end - l.first; lived > 0 && ready > 0 {
			readyText = fmt.Sprintf("%s (%.0f%%)", tlDur(ready), 100*float64(ready)/float64(lived))
		}
		bad := 0
		var extra []string
		for _, o := range append(slices.Clone(tlCallsFailed), events.OutcomeCancelled, tlUnfinished) {
			if n := l.outcomes[o]; n > 0 {
				extra = append(extra, fmt.Sprintf("%d %s", n, strings.ReplaceAll(o, "_", " ")))
				if slices.Contains(tlCallsFailed, o) {
					bad += n
				}
			}
		}
		badText := strconv.Itoa(bad)
		if len(extra) > 0 {
			for i := range extra {
				extra[i] = "<span>" + tlEsc(extra[i]) + "</span>"
			}
			badText += "<div class=\"brk\">" + strings.Join(extra, " · ") + "</div>"
		}
		state := "-"
		if last.state != "" {
			state = fmt.Sprintf("<span class=\"pill\" style=\"background:%s\">%s</span>", tlStateColor[last.state], tlEsc(string(last.state)))
			if last.reason != "" {
				state += " <span class=\"muted\">" + tlEsc(string(last.reason)) + "</span>"
			}
			if before != "" {
				state += fmt.Sprintf(" <span class=\"muted\">(was</span> <span class=\"pill\" style=\"background:%s\">%s</span><span class=\"muted\">)</span>",
					tlStateColor[before], tlEsc(string(before)))
			}
		}
		r.w("<tr><td class=\"srv\">%s</td><td>%s</td><td class=\"n\">%d</td><td class=\"n%s\">%d</td><td class=\"n\">%s</td><td class=\"n\">%d</td><td class=\"n%s\">%s</td><td class=\"st\">%s</td><td class=\"err\" title=\"%s\">%s</td></tr>\n",
			tlEsc(l.name), tlEsc(transport), l.launches, tlHot(l.failures), l.failures, tlEsc(readyText), l.outcomes[events.OutcomeOK],
			tlHot(bad), badText, state, tlEsc(l.lastError), tlEsc(tlClip(l.lastError, 90)))
	}
	if len(r.m.lanes) == 0 {
		r.w("<tr><td colspan=\"9\" class=\"muted\">No server appears in this session.</td></tr>\n")
	}
	r.w("</tbody>\n</table>\n")
}

// tlCount says "1 call", "2 calls".
func tlCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// tlJoin joins the non-empty parts with sep ("-" when all are empty).
func tlJoin(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return tlOr(strings.Join(out, sep))
}

func tlBool(b bool) int {
	if b {
		return 1
	}
	return 0
}

func tlHot(n int) string {
	if n > 0 {
		return " hot"
	}
	return ""
}

// ---- small helpers ----

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

// tlDur formats a duration compactly: 840µs, 316ms, 1.02s, 2m05s, 1h02m.
func tlDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < 0:
		return "-" + tlDur(-ns)
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/1e6, 'g', 3, 64) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(float64(d)/1e9, 'g', 3, 64) + "s"
	case d < time.Hour && d%time.Minute < time.Second:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d%time.Hour < time.Minute:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func tlMs(ms int64) string { return tlDur(ms * int64(time.Millisecond)) }

// tlF formats a coordinate with at most one decimal.
func tlF(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// tlTextW estimates the width of s in px at font size px.
func tlTextW(s string, px float64) float64 { return float64(len([]rune(s))) * px * 0.6 }

func tlOr(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tlHash abbreviates a config hash.
func tlHash(h string) string {
	if h == "" {
		return "-"
	}
	h = strings.TrimPrefix(h, "sha256:")
	return tlClip(h, 12)
}

func tlTail(lines []string, n int) []string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = tlClip(l, 200)
	}
	return out
}

func tlBlob(b events.Blob) string {
	s := tlClip(b.Text, 240)
	s += fmt.Sprintf(" (%d B", b.Size)
	if b.Truncated {
		s += ", truncated"
	}
	return s + ")"
}

// tlClip shortens s to n runes, ending it with … when it was longer.
func tlClip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// tlANSI matches terminal escape sequences (colours in stderr).
var tlANSI = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|[@-Z\\-_])`)

// tlEsc escapes s for HTML and XML text and attributes, dropping what XML
// cannot hold (control characters other than tab and newline, invalid
// UTF-8), so the SVG stays well-formed whatever a server printed.
func tlEsc(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.Contains(s, "\x1b") {
		s = tlANSI.ReplaceAllString(s, "")
	}
	s = strings.Map(func(c rune) rune {
		if c == '\n' || c == '\t' {
			return c
		}
		if unicode.IsControl(c) || c == 0xFFFE || c == 0xFFFF {
			return -1
		}
		return c
	}, s)
	return html.EscapeString(s)
}

const tlCSS = `
:root{--fg:#0f172a;--muted:#64748b;--line:#e2e8f0}
*{box-sizing:border-box}
body{margin:0;padding:20px 24px 48px;font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue","DejaVu Sans",Arial,sans-serif;color:var(--fg);background:#f1f5f9}
h1{font-size:20px;margin:0}
h2{font-size:15px;margin:22px 0 8px}
.sub{color:var(--muted);font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
.meta{display:grid;grid-template-columns:repeat(auto-fill,minmax(400px,1fr));gap:3px 28px;margin:12px 0;padding:10px 16px;background:#fff;border:1px solid var(--line);border-radius:8px}
.meta div{display:flex;gap:10px;min-width:0}
.meta dt{color:var(--muted);flex:none;width:70px}
.meta dd{margin:0;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.legend{display:flex;flex-wrap:wrap;align-items:center;gap:4px 14px;margin:0 0 10px;font-size:12px;color:#334155}
.legend span{display:inline-flex;align-items:center;gap:4px}
.legend i{flex-basis:100%;height:0}
.chart{display:flex;background:#fff;border:1px solid var(--line);border-radius:8px;overflow:hidden}
.labels{flex:none;border-right:1px solid var(--line)}
.scroll{overflow-x:auto;flex:1 1 auto}
svg{display:block}
svg text{font-family:inherit}
.name{font-size:13px;font-weight:600;fill:#0f172a}
.lab .meta{font-size:11px;fill:#64748b}
.pill{font-size:10px;fill:#0f172a}
.pill.inv{fill:#fff}
.axl{font-size:10px;fill:#94a3b8;text-transform:uppercase;letter-spacing:.04em}
.tick{font-size:10px;fill:#64748b;text-anchor:middle}
.grid{stroke:#e2e8f0;stroke-width:1}
.axis{stroke:#cbd5e1;stroke-width:1}
.band{font-size:11px;fill:#1e293b}
.band.inv{fill:#fff}
.gt{font-size:9px;font-weight:700;fill:#fff;text-anchor:middle}
.verdict{font-size:10px;font-weight:600;fill:#6d28d9}
.flag{font-size:10px;font-weight:600;fill:#fff}
.spawn{stroke:#475569;stroke-width:1.5}
.churn{stroke:#7f1d1d;stroke-width:2;stroke-dasharray:2 1}
.timer{stroke:#b45309;stroke-width:1.5;fill:none}
.timer.dead{stroke:#94a3b8;stroke-dasharray:3 2}
.timer.hold{stroke:#b91c1c}
.tlbl{font-size:9px;fill:#92400e;text-anchor:middle}
.h{cursor:pointer}
.h:hover{filter:brightness(.88)}
.h.pinned{filter:drop-shadow(0 0 2px #0f172a)}
.hint{color:var(--muted);font-size:12px;margin:6px 2px}
table{border-collapse:collapse;background:#fff;border:1px solid var(--line);border-radius:8px;font-size:12.5px;min-width:900px}
th,td{padding:6px 12px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#f8fafc;color:#475569;font-weight:600;white-space:nowrap}
td.st{white-space:nowrap}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
td.srv{font-weight:600}
td.hot{color:#b91c1c;font-weight:600}
td.err{color:#7f1d1d;max-width:380px}
td.n{white-space:nowrap}
.brk{font-size:11px;font-weight:400;color:var(--muted);white-space:normal;max-width:230px;margin-left:auto}
.brk span{white-space:nowrap}
span.pill{display:inline-block;padding:0 8px;border-radius:8px;font-size:11.5px}
.muted{color:var(--muted);font-weight:400}
.foot{color:var(--muted);font-size:12px}
#detail{position:fixed;right:16px;bottom:16px;max-width:600px;max-height:50vh;overflow:auto;margin:0;padding:10px 14px;background:#0f172a;color:#f1f5f9;border-radius:8px;box-shadow:0 6px 24px rgba(15,23,42,.35);white-space:pre-wrap;font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
#detail[hidden]{display:none}
`

// tlJS shows the hovered (or clicked) element's SVG title in the detail
// panel. It avoids < and & so the whole page stays well-formed XML.
const tlJS = `
(function(){
var d=document.getElementById('detail'),pin=null;
function tip(n){
  for(;n;n=n.parentNode){
    if(n.nodeType!==1){return null}
    var c=n.firstElementChild;
    if(c){if(c.tagName.toLowerCase()==='title'){return n}}
  }
  return null;
}
function show(n){d.textContent=n.firstElementChild.textContent;d.hidden=false}
document.addEventListener('mouseover',function(e){
  if(pin){return}
  var n=tip(e.target);
  if(n){show(n)}else{d.hidden=true}
});
document.addEventListener('click',function(e){
  var n=tip(e.target);
  if(pin){pin.classList.remove('pinned')}
  pin=n;
  if(n){n.classList.add('pinned');show(n)}else{d.hidden=true}
});
})();
`
