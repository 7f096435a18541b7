package replay

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

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
	tlMkDenied
	// tlMkAuthBlocked: the server failed for want of a sign-in
	// (needs_auth); tlMkAuth: an auth.* event (its text says which).
	tlMkAuthBlocked
	tlMkAuth
	// tlMkVerdict is the last kind: marks are drawn in time and then kind
	// order, so a verdict's text goes right of the glyphs at its time.
	tlMkVerdict
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
	// killed: lost because mcpledger was killed with it in flight (the
	// next session closed it with the interrupted stop): when it ended
	// is unknown.
	killed bool
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
			if p.Reason == events.ReasonInterrupted {
				m.killedCalls(e.Time)
			}
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
		case *events.ConnectFailed:
			// A connection whose handshake failed has no session to close:
			// its attempt's failure ends it (a process ends with its exit).
			for i := len(l.procs) - 1; i >= 0; i-- {
				if pr := &l.procs[i]; pr.to == 0 && pr.pid == 0 && pr.attempt == p.Attempt {
					pr.to, pr.unexpected = e.Time, true
					pr.exit = fmt.Sprintf("connect failed (%s): %s", p.Phase, p.Error.String())
					break
				}
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
		case *events.AuthSignedIn, *events.AuthRefreshed, *events.AuthFailed, *events.AuthSignedOut:
			if l != nil {
				text, title := tlAuth(p)
				l.mark(e.Time, tlMkAuth, text, title+"\n"+head)
			}
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

// killedCalls marks the calls lost at t, when the next session closed
// this one as interrupted: their mcpledger was killed with them in
// flight.
func (m *tlModel) killedCalls(t int64) {
	for _, l := range m.lanes {
		for i := range l.calls {
			if c := &l.calls[i]; c.outcome == events.OutcomeLost && c.to == t {
				c.killed = true
			}
		}
	}
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
		if p.Error.Signal != "" {
			s.err = "signal " + p.Error.Signal
		} else if p.Error.Class == events.ErrExit {
			s.err = fmt.Sprintf("exit code %d", p.Error.ExitCode)
		}
	}
	s.marked = p.Trigger == string(fsm.TrigFail) || p.Trigger == string(fsm.TrigExhaust) || p.Trigger == string(fsm.TrigNeedsAuth) ||
		p.Trigger == string(fsm.TrigBadCommand)
	switch p.Reason {
	case events.ReasonNeedsAuth:
		s.info = append(s.info, "blocked on authorization: sign in with mcpledger login "+l.name)
	case events.ReasonNotFound, events.ReasonNotExecutable:
		s.info = append(s.info, `cannot run as configured: fix its "command" (or "cwd"); a config change relaunches it`)
	}
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
	case fsm.TrigNeedsAuth:
		t := fmt.Sprintf("blocked on authorization at attempt %d: %s\nsign in with: mcpledger login %s\n%s", p.Attempt, tlClip(p.Error.String(), 300), l.name, head)
		if cause != "" {
			t += "\ncause " + cause
		}
		l.mark(e.Time, tlMkAuthBlocked, "", t)
	case fsm.TrigBadCommand:
		l.mark(e.Time, tlMkGaveUp, "", fmt.Sprintf("cannot run as configured at attempt %d (%s), not retried: %s\nfix its \"command\" (or \"cwd\"): a config change relaunches it\n%s",
			p.Attempt, p.Reason, tlClip(p.Error.String(), 300), head))
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
	case *events.AuthSignedIn:
		s += " to " + tlOr(p.Issuer)
	}
	return s
}

// tlAuth says what an auth.* event recorded: the mark's text (which
// glyph: in, refresh, fail, out) and the first line of its title. Times
// are the token's expiry (UTC).
func tlAuth(p events.Payload) (text, title string) {
	expiry := func(ns int64) string {
		if ns == 0 {
			return ""
		}
		return "expires " + time.Unix(0, ns).UTC().Format(time.RFC3339)
	}
	scopes := func(ss []string) string { return tlPrefix("scopes ", strings.Join(ss, " ")) }
	switch p := p.(type) {
	case *events.AuthSignedIn:
		what := "signed in"
		if p.StepUp {
			what = "signed in again for more scopes (step-up)"
		}
		return "in", tlJoin(" · ", what+tlPrefix(" to ", p.Issuer), scopes(p.Scopes), tlPrefix("client ", p.ClientKind), expiry(p.ExpiresAt))
	case *events.AuthRefreshed:
		return "refresh", tlJoin(" · ", "token refreshed"+tlPrefix(" by ", p.Issuer), scopes(p.Scopes), expiry(p.ExpiresAt))
	case *events.AuthFailed:
		return "fail", fmt.Sprintf("authorization failed (%s)%s: %s", p.Phase, tlPrefix(" at ", p.Issuer), tlClip(p.Error, 300))
	case *events.AuthSignedOut:
		t := "signed out" + tlPrefix(" of ", p.Issuer)
		if p.Revoked {
			return "out", t + " · tokens revoked"
		}
		if p.RevokeError != "" {
			return "out", t + " · revocation failed: " + tlClip(p.RevokeError, 300)
		}
		return "out", t + " · tokens deleted (not revoked)"
	}
	return "", ""
}

// clock formats t as a UTC time of day and its offset from the start.
func (m *tlModel) clock(t int64) string {
	return time.Unix(0, t).UTC().Format("15:04:05.000") + " (+" + tlDur(t-m.start) + ")"
}
