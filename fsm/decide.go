package fsm

import (
	"fmt"
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// Decide returns the decisions input in causes in state s. It is pure: s is
// not modified, and the same (s, in) always gives the same events. Each
// returned event has Kind, Server, Payload, Time (the input's time), Cause
// (the input's seq) and Session (the input's session) set; the journal
// assigns the rest.
//
// Inputs that refer to an earlier attempt than the server's current one are
// stale and produce no decisions. A command the table does not allow
// returns an error wrapping [ErrInvalidTransition] (or [ErrUnknownServer]);
// its decisions, if any were computed, are discarded.
func Decide(s State, in events.Event) ([]events.Event, error) {
	if !in.Kind.IsInput() {
		return nil, fmt.Errorf("%w: %s", ErrNotInput, in.Kind)
	}
	switch in.Kind {
	case events.KindCallStarted, events.KindCallFinished, events.KindHandshakeCompleted,
		events.KindResourcesListed, events.KindPromptsListed, events.KindSessionStarted, events.KindOutputSkipped,
		events.KindJournalArchived, events.KindJournalResumed,
		events.KindAuthRefreshed, events.KindAuthFailed, events.KindAuthSignedOut:
		return nil, nil // facts for the projections: they never cause a decision
	}
	d := &decider{prev: s, s: Evolve(scratchFor(s, in), in), in: in}
	if err := d.decide(); err != nil {
		return nil, err
	}
	return d.out, nil
}

// scratchFor returns the state Decide works on for input in, sharing
// nothing mutable with s. Observations about one server decide only from
// that server and the session-wide scalars (options, seed, config, timer
// counter), so their scratch holds just that server: no copy of the rest.
// Commands and config readings may touch every server and get a full
// clone.
func scratchFor(s State, in events.Event) State {
	switch in.Kind {
	case events.KindProcessSpawned, events.KindTransportOpened, events.KindConnectFailed, events.KindToolsListed,
		events.KindPingFailed, events.KindProcessExited, events.KindTransportClosed, events.KindTimerFired,
		events.KindAuthSignedIn:
		c := s
		c.Servers = make(map[string]*Server, 1)
		if p, ok := s.Servers[in.Server]; ok {
			c.Servers[in.Server] = p
		}
		return c
	}
	return s.Clone()
}

// decider carries one Decide call: the state before the input (prev), the
// scratch state with the input and every decision so far applied (s), and
// the decisions.
type decider struct {
	prev State
	s    State
	in   events.Event
	out  []events.Event
}

func (d *decider) opts() events.DeciderOptions { return WithDefaults(d.s.Options) }

// emit appends a decision and folds it into the scratch state, so later
// steps of the same Decide see its effect.
func (d *decider) emit(server string, p events.Payload) {
	e := events.Event{Session: d.in.Session, Time: d.in.Time, Kind: p.Kind(), Server: server,
		Cause: d.in.Seq, Payload: p}
	d.out = append(d.out, e)
	d.s = Evolve(d.s, e)
}

// transition emits a lifecycle transition of server by trigger t, checked
// against the table. A legal trigger that leads back to the same state
// emits nothing.
func (d *decider) transition(server string, t Trigger, reason events.Reason, attempt int, cerr *events.ClassifiedError) error {
	srv, _ := d.s.get(server)
	to, changed, err := Transition(srv.Phase, t)
	if err != nil {
		return fmt.Errorf("server %q: %w", server, err)
	}
	if !changed {
		return nil
	}
	if attempt == 0 {
		attempt = srv.Attempt
	}
	d.emit(server, &events.ServerTransitioned{From: srv.Phase, To: to, Trigger: string(t), Reason: reason,
		Attempt: attempt, Error: cerr})
	return nil
}

func (d *decider) decide() error {
	switch p := d.in.Payload.(type) {
	case *events.ConfigObserved:
		return d.reconcile(p)
	case *events.ApprovalDecided:
		return d.approval(p)
	case *events.ReconnectRequested:
		return d.reconnect(p)
	case *events.StopRequested:
		return d.stop(p)
	case *events.ProcessSpawned:
		return d.launched(p.Attempt)
	case *events.TransportOpened:
		return d.launched(p.Attempt)
	case *events.ToolsListed:
		srv, ok := d.current(p.Attempt)
		if !ok {
			return nil
		}
		if srv.Phase == events.StateHandshaking {
			if err := d.transition(d.in.Server, TrigReady, events.ReasonNone, 0, nil); err != nil {
				return err
			}
		}
		if srv.Phase == events.StateHandshaking || srv.Phase == events.StateReady {
			d.checkPins(d.in.Server)
		}
	case *events.ConnectFailed:
		return d.fail(p.Attempt, p.Error)
	case *events.ProcessExited:
		if p.Expected {
			return nil
		}
		cerr := events.ClassifiedError{Class: events.ErrExit, ExitCode: p.ExitCode, Signal: p.Signal}
		if p.Signal != "" {
			cerr.Message = "signal: " + p.Signal
		} else {
			cerr.Message = fmt.Sprintf("exited with code %d", p.ExitCode)
		}
		if n := len(p.StderrTail); n > 0 {
			cerr.Message += ": " + p.StderrTail[n-1]
		}
		return d.fail(p.Attempt, cerr)
	case *events.TransportClosed:
		if p.Expected {
			return nil
		}
		return d.fail(p.Attempt, p.Error)
	case *events.PingFailed:
		if p.Class == events.ErrAuth {
			return d.fail(p.Attempt, events.ClassifiedError{Class: events.ErrAuth, Message: "ping: " + p.Error})
		}
		if p.Consecutive >= d.opts().PingFailures {
			return d.fail(p.Attempt, events.ClassifiedError{Class: events.ErrPing,
				Message: fmt.Sprintf("%d pings failed in a row: %s", p.Consecutive, p.Error)})
		}
	case *events.TimerFired:
		return d.timer(p)
	case *events.AuthSignedIn:
		return d.signedIn()
	}
	// session.started, handshake.completed, resources/prompts listed and
	// calls are facts the projections fold; they cause no decision.
	return nil
}

// current returns the input's server if the input is about its current
// attempt.
func (d *decider) current(attempt int) (Server, bool) {
	srv, ok := d.s.get(d.in.Server)
	if !ok || attempt != srv.Attempt {
		return srv, false
	}
	return srv, true
}

func (d *decider) launched(attempt int) error {
	if srv, ok := d.current(attempt); ok && srv.Phase == events.StateLaunching {
		return d.transition(d.in.Server, TrigLaunched, events.ReasonNone, 0, nil)
	}
	return nil
}

// fail handles a failure of the server's current attempt: to reconnecting,
// then either a backoff timer or, with the retry budget spent, failed. A
// failure of class auth goes straight to failed (needs_auth): no retry
// can sign in, and it is not a crash the storm breaker counts. So does a
// command not found or not executable (a configuration error: retrying
// the same config cannot help).
func (d *decider) fail(attempt int, cerr events.ClassifiedError) error {
	srv, ok := d.current(attempt)
	if !ok {
		return nil
	}
	switch srv.Phase {
	case events.StateLaunching, events.StateHandshaking, events.StateReady:
	default:
		return nil // already failing, stopped or failed: nothing new to decide
	}
	if cerr.Class == events.ErrAuth {
		return d.transition(d.in.Server, TrigNeedsAuth, events.ReasonNeedsAuth, 0, &cerr)
	}
	if r, ok := commandReason(cerr.Class); ok {
		return d.transition(d.in.Server, TrigBadCommand, r, 0, &cerr)
	}
	o := d.opts()
	retries := srv.Retries
	if srv.ReadySince != 0 && d.in.Time-srv.ReadySince >= o.StableMs*1e6 {
		retries = 0 // it was healthy long enough: a fresh budget
	}
	name := d.in.Server
	if err := d.transition(name, TrigFail, events.ReasonNone, 0, &cerr); err != nil {
		return err
	}
	next := retries + 1
	if next >= o.MaxAttempts {
		// MaxAttempts counts launches in the episode, the first included:
		// this was the last one.
		return d.transition(name, TrigExhaust, events.ReasonExhausted, 0, &cerr)
	}
	ceil := BackoffCeil(o, next)
	delay := Jitter(d.s.Seed, name, srv.Attempt+1, ceil)
	d.emit(name, &events.TimerScheduled{TimerID: d.s.LastTimer + 1, Purpose: events.TimerBackoff,
		Attempt: srv.Attempt + 1, Retry: next, DelayMs: delay, CeilMs: ceil, FireAt: d.in.Time + delay*1e6})
	return nil
}

// commandReason is the reason of a failure of class c when c says the
// server's command cannot run as configured: not_found or not_executable.
func commandReason(c events.ErrorClass) (events.Reason, bool) {
	switch c {
	case events.ErrNotFound:
		return events.ReasonNotFound, true
	case events.ErrNotExecutable:
		return events.ReasonNotExecutable, true
	}
	return events.ReasonNone, false
}

func (d *decider) timer(p *events.TimerFired) error {
	name := d.in.Server
	srv, ok := d.prev.get(name)
	if !ok || srv.Timer != p.TimerID || p.TimerID == 0 {
		return nil // stale: cancelled by a later decision
	}
	if p.Purpose == events.TimerBackoff && srv.Phase == events.StateReconnecting {
		return d.launch(name, TrigRetry)
	}
	if p.Purpose == events.TimerHold && srv.Phase == events.StateStopped && srv.Reason == events.ReasonStormHold {
		if err := d.transition(name, TrigReconfigure, events.ReasonNone, 0, nil); err != nil {
			return err
		}
		return d.admit(name)
	}
	return nil
}

// launch moves a server to launching by trigger t (admit, retry or
// reconnect) unless the storm breaker holds it, in which case it stops with
// reason storm_hold and a timer to release it.
func (d *decider) launch(name string, t Trigger) error {
	srv, _ := d.s.get(name)
	o := d.opts()
	session, earlier := srv.Crashes, since(srv.Config.RecentCrashes, srv.Reconnected)
	if o.DecisionVersion < 2 { // version 1 counted launches, reconnects included
		session, earlier = srv.Launches, srv.Config.RecentLaunches
	}
	if held, until := StormHold(o, session, earlier, d.in.Time); held {
		trig := TrigStop
		if srv.Phase == events.StateConfiguring {
			trig = TrigDeny
		}
		if trig == TrigDeny {
			what := "crashes"
			if o.DecisionVersion < 2 {
				what = "launches"
			}
			d.emit(name, &events.AdmissionDecided{Admitted: false, Reason: events.ReasonStormHold, Hash: srv.Config.Hash,
				Detail: fmt.Sprintf("%d %s in %d ms", o.StormLimit, what, o.StormWindowMs)})
		}
		if err := d.transition(name, trig, events.ReasonStormHold, 0, nil); err != nil {
			return err
		}
		delay := (until - d.in.Time) / 1e6
		d.emit(name, &events.TimerScheduled{TimerID: d.s.LastTimer + 1, Purpose: events.TimerHold,
			Attempt: srv.Attempt + 1, DelayMs: delay, FireAt: until})
		return nil
	}
	if t == TrigAdmit {
		d.emit(name, &events.AdmissionDecided{Admitted: true, Hash: srv.Config.Hash})
	}
	return d.transition(name, t, events.ReasonNone, srv.Attempt+1, nil)
}

// admit runs admission for a server in configuring: launch it, or stop it
// with the reason (asking for an approval when it is newly promptable).
func (d *decider) admit(name string) error {
	srv, _ := d.s.get(name)
	reason, detail := Admission(&d.s.Config, &srv.Config)
	if reason == events.ReasonNone {
		return d.launch(name, TrigAdmit)
	}
	d.emit(name, &events.AdmissionDecided{Admitted: false, Reason: reason, Hash: srv.Config.Hash, Detail: detail})
	if err := d.transition(name, TrigDeny, reason, 0, nil); err != nil {
		return err
	}
	if reason == events.ReasonPendingApproval && srv.Promptable != srv.Config.Hash {
		a := srv.Config.Approval
		d.emit(name, &events.ApprovalRequested{Workspace: d.s.Config.Workspace, Hash: srv.Config.Hash,
			Scope: srv.Config.Scope, Previous: a.Hash, Changed: a.Changed})
	}
	return nil
}

// approval acts on a decision about a server this session runs at the
// decided hash. A decision about another server or hash is a fact for the
// approvals projection (an offline `mcpledger approve`, or one for a config
// edited since): it causes nothing here. [CheckApproval] tells a live
// caller about those cases before it journals anything.
func (d *decider) approval(p *events.ApprovalDecided) error {
	name := d.in.Server
	srv, ok := d.prev.get(name)
	if !ok || !srv.InConfig || p.Hash != srv.Config.Hash {
		return nil
	}
	if p.Decision == events.DecisionApprove && len(srv.Listed) > 0 &&
		(srv.Phase == events.StateReady || srv.Phase == events.StateHandshaking) {
		// A re-approval of a running server accepts its current tools.
		d.emit(name, &events.ToolsPinned{Workspace: d.s.Config.Workspace, Hash: srv.Config.Hash, Tools: srv.Listed})
		if len(srv.Withheld) > 0 {
			d.emit(name, &events.ToolsChanged{})
		}
		return nil
	}
	if srv.Phase == events.StateStopped && isAdmissionReason(srv.Reason) {
		if err := d.transition(name, TrigReconfigure, events.ReasonNone, 0, nil); err != nil {
			return err
		}
		return d.admit(name)
	}
	if p.Decision == events.DecisionReject && srv.Phase != events.StateStopped {
		return d.transition(name, TrigStop, events.ReasonRejected, 0, nil)
	}
	return nil
}

// CheckApproval reports why an approval decision about server at hash
// would change nothing in state s: the server is unknown to the session or
// its config is at another hash. Callers use it to refuse a typo or a stale
// decision before journaling it.
func CheckApproval(s State, server, hash string) error {
	srv, ok := s.get(server)
	if !ok || !srv.InConfig {
		return fmt.Errorf("%w: %q", ErrUnknownServer, server)
	}
	if hash != srv.Config.Hash {
		return fmt.Errorf("%w: %q is at %s, the decision names %s", ErrStaleApproval, server,
			events.ShortHash(srv.Config.Hash), events.ShortHash(hash))
	}
	return nil
}

// checkPins compares an approved gated server's listing with the tool
// definitions its approval pins: the first listing after an approval pins
// them (trust on first use); later listings withhold every tool whose
// definition differs from its pin, or that the approval never saw.
func (d *decider) checkPins(name string) {
	srv, _ := d.s.get(name)
	a := srv.Config.Approval
	if !srv.Config.Gated || a.Decision != events.DecisionApprove || a.Hash != srv.Config.Hash {
		return
	}
	if len(srv.Pins) == 0 {
		if len(srv.Listed) > 0 {
			d.emit(name, &events.ToolsPinned{Workspace: d.s.Config.Workspace, Hash: srv.Config.Hash, Tools: srv.Listed})
		}
		if len(srv.Withheld) > 0 {
			d.emit(name, &events.ToolsChanged{})
		}
		return
	}
	pins := make(map[string]string, len(srv.Pins))
	for _, kv := range srv.Pins {
		pins[kv.Key] = kv.Value
	}
	var changed []events.ToolChange
	var names []string
	for _, kv := range srv.Listed { // sorted by name
		if pinned, ok := pins[kv.Key]; !ok || pinned != kv.Value {
			changed = append(changed, events.ToolChange{Name: kv.Key, Pinned: pinned, Listed: kv.Value})
			names = append(names, kv.Key)
		}
	}
	if !slices.Equal(names, srv.Withheld) {
		d.emit(name, &events.ToolsChanged{Changed: changed})
	}
}

func (d *decider) reconnect(p *events.ReconnectRequested) error {
	if d.in.Server == "" {
		for _, name := range d.s.Names() {
			srv, _ := d.s.get(name)
			if srv.InConfig && srv.Phase == events.StateFailed {
				if err := d.launch(name, TrigReconnect); err != nil {
					return err
				}
			}
		}
		return nil
	}
	name := d.in.Server
	srv, ok := d.s.get(name)
	if !d.s.HasConfig {
		// A session that read no config runs no server: its reconnect
		// (an offline `mcpledger reconnect`) is a decision for the next
		// session, which no longer counts the crashes before it.
		return nil
	}
	if !ok || !srv.InConfig {
		return fmt.Errorf("%w: %q", ErrUnknownServer, name)
	}
	if p.FailedOnly && srv.Phase != events.StateFailed {
		return nil
	}
	switch srv.Phase {
	case events.StateFailed:
		return d.launch(name, TrigReconnect)
	case events.StateReconnecting:
		return d.launch(name, TrigRetry)
	case events.StateStopped:
		if err := d.transition(name, TrigReconfigure, events.ReasonNone, 0, nil); err != nil {
			return err
		}
		return d.admit(name)
	case events.StateConfiguring:
		return d.admit(name)
	default: // launching, handshaking, ready: restart it
		return d.restart(name, events.ReasonReconnect)
	}
}

// signedIn relaunches a server that failed for want of a sign-in, as an
// explicit reconnect does: by trigger reconnect, whose transition forgets
// the crashes before it (the storm breaker cannot hold it: nothing since
// its last launch was a crash). A sign-in for any other server (running,
// failed for another reason, unknown, or in a session that read no
// config: an offline `mcpledger login`) is a fact for the projections.
func (d *decider) signedIn() error {
	name := d.in.Server
	srv, ok := d.prev.get(name)
	if !ok || !srv.InConfig || !needsAuth(srv) {
		return nil
	}
	return d.launch(name, TrigReconnect)
}

// needsAuth reports whether srv is failed waiting for a sign-in.
func needsAuth(srv Server) bool {
	return srv.Phase == events.StateFailed && srv.Reason == events.ReasonNeedsAuth
}

func (d *decider) stop(p *events.StopRequested) error {
	reason := p.Reason
	if d.in.Server != "" {
		if reason == "" {
			reason = events.ReasonStopRequested
		}
		if _, ok := d.s.Servers[d.in.Server]; !ok {
			return fmt.Errorf("%w: %q", ErrUnknownServer, d.in.Server)
		}
		return d.transition(d.in.Server, TrigStop, reason, 0, nil)
	}
	if reason == "" {
		reason = events.ReasonShutdown
	}
	if d.prev.Stopping {
		return nil
	}
	for _, name := range d.s.Names() {
		if err := d.transition(name, TrigStop, reason, 0, nil); err != nil {
			return err
		}
	}
	d.emit("", &events.SessionStopped{Reason: reason})
	return nil
}
