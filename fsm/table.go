package fsm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	lfsm "github.com/looplab/fsm"

	"github.com/mcpledger/mcpledger/events"
)

// Trigger names a lifecycle transition in the table.
type Trigger string

// Triggers of the lifecycle table.
const (
	// TrigAdmit: configuring → launching, admission passed.
	TrigAdmit Trigger = "admit"
	// TrigDeny: configuring → stopped, admission refused (with a reason).
	TrigDeny Trigger = "deny"
	// TrigLaunched: launching → handshaking, the process started or the
	// endpoint was reached.
	TrigLaunched Trigger = "launched"
	// TrigReady: handshaking → ready, initialize agreed a version and
	// tools/list returned.
	TrigReady Trigger = "ready"
	// TrigFail: launching, handshaking, ready → reconnecting.
	TrigFail Trigger = "fail"
	// TrigRetry: reconnecting → launching, the backoff timer fired (or an
	// explicit reconnect cut the wait short).
	TrigRetry Trigger = "retry"
	// TrigExhaust: reconnecting → failed, the retry budget is spent.
	TrigExhaust Trigger = "exhaust"
	// TrigReconnect: failed → launching, explicit reconnect (or a sign-in
	// of a server that needed one).
	TrigReconnect Trigger = "reconnect"
	// TrigNeedsAuth: launching, handshaking, ready → failed, the server
	// wants an OAuth sign-in (a failure of class auth): retrying without
	// one cannot help, so there is no backoff, and it is not a crash.
	TrigNeedsAuth Trigger = "needs_auth"
	// TrigBadCommand: launching (in practice; handshaking, ready) →
	// failed, the stdio server's command (or working directory) is not
	// found or not executable (a failure of class not_found or
	// not_executable): a configuration error, so there is no backoff,
	// and it is not a crash.
	TrigBadCommand Trigger = "bad_command"
	// TrigStop: any → stopped (removed, config changed, shutdown, storm hold).
	TrigStop Trigger = "stop"
	// TrigReconfigure: stopped → configuring, a fresh admission follows (new
	// config, approval, hold released, explicit reconnect).
	TrigReconfigure Trigger = "reconfigure"
)

// Row is one row of the lifecycle table.
type Row struct {
	Trigger Trigger
	From    []events.ServerState
	To      events.ServerState
	Because string
}

var (
	sConfiguring  = events.StateConfiguring
	sLaunching    = events.StateLaunching
	sHandshaking  = events.StateHandshaking
	sReady        = events.StateReady
	sFailed       = events.StateFailed
	sReconnecting = events.StateReconnecting
	sStopped      = events.StateStopped
)

// table is the lifecycle table: the only place legal transitions are listed.
var table = []Row{
	{TrigAdmit, []events.ServerState{sConfiguring}, sLaunching, "admitted: enabled, allowed, not excluded, approved or not gated, workspace trusted (stdio), storm breaker closed"},
	{TrigDeny, []events.ServerState{sConfiguring}, sStopped, "not admitted: pending_approval, rejected, excluded, not_allowed, disabled, untrusted, invalid_config, storm_hold"},
	{TrigLaunched, []events.ServerState{sLaunching}, sHandshaking, "process started / endpoint reachable"},
	{TrigReady, []events.ServerState{sHandshaking}, sReady, "initialize agreed a protocol version; tools/list returned"},
	{TrigFail, []events.ServerState{sLaunching, sHandshaking, sReady}, sReconnecting, "spawn error, handshake error or timeout, transport closed, process exit, K failed pings"},
	{TrigRetry, []events.ServerState{sReconnecting}, sLaunching, "backoff timer fired"},
	{TrigExhaust, []events.ServerState{sReconnecting}, sFailed, "attempts exhausted; only an explicit reconnect revives it"},
	{TrigReconnect, []events.ServerState{sFailed}, sLaunching, "explicit reconnect, or a sign-in (auth.signed_in) of a server that needed one"},
	{TrigNeedsAuth, []events.ServerState{sLaunching, sHandshaking, sReady}, sFailed, "the server wants an OAuth sign-in (a 401 with no usable token); only a sign-in or an explicit reconnect revives it"},
	{TrigBadCommand, []events.ServerState{sLaunching, sHandshaking, sReady}, sFailed, "the command (or working directory) is not found or not executable; only a config change or an explicit reconnect revives it"},
	{TrigStop, events.States(), sStopped, "removed, fingerprint changed, shutdown, stop requested, storm hold"},
	{TrigReconfigure, []events.ServerState{sStopped}, sConfiguring, "new config, approval, hold released or explicit reconnect: a fresh admission follows"},
}

// Table returns a copy of the lifecycle table.
func Table() []Row {
	out := make([]Row, len(table))
	for i, r := range table {
		r.From = append([]events.ServerState(nil), r.From...)
		out[i] = r
	}
	return out
}

func lfsmEvents() lfsm.Events {
	evs := make(lfsm.Events, 0, len(table))
	for _, r := range table {
		src := make([]string, len(r.From))
		for i, s := range r.From {
			src[i] = string(s)
		}
		evs = append(evs, lfsm.EventDesc{Name: string(r.Trigger), Src: src, Dst: string(r.To)})
	}
	return evs
}

// machines pools looplab machines built from the table with no callbacks,
// so Transition is pure: SetState, Event, Current touch only the machine.
var machines = sync.Pool{New: func() any {
	return lfsm.NewFSM(string(events.StateConfiguring), lfsmEvents(), nil)
}}

// Transition returns the state trigger t leads to from state from. changed
// is false when the table allows t but it leads back to from (stop while
// stopped): no event should be produced. An illegal trigger gives an error
// wrapping [ErrInvalidTransition].
//
// The answer for a (state, trigger) pair never changes, so it is asked of
// the looplab machine once and cached: deciding pays a map lookup, not a
// machine event, per transition.
func Transition(from events.ServerState, t Trigger) (to events.ServerState, changed bool, err error) {
	k := transitionKey{from, t}
	if r, ok := transitions.Load(k); ok {
		a := r.(transitionAnswer)
		return a.to, a.changed, a.err
	}
	to, changed, err = askMachine(from, t)
	transitions.Store(k, transitionAnswer{to, changed, err})
	return to, changed, err
}

type transitionKey struct {
	from events.ServerState
	t    Trigger
}

type transitionAnswer struct {
	to      events.ServerState
	changed bool
	err     error
}

// transitions caches the looplab machine's answers (see Transition).
var transitions sync.Map

// askMachine runs trigger t from state from on a looplab machine built
// from the table.
func askMachine(from events.ServerState, t Trigger) (to events.ServerState, changed bool, err error) {
	m := machines.Get().(*lfsm.FSM)
	defer machines.Put(m)
	m.SetState(string(from))
	err = m.Event(context.Background(), string(t))
	var noTransition lfsm.NoTransitionError
	switch {
	case err == nil:
		return events.ServerState(m.Current()), true, nil
	case errors.As(err, &noTransition):
		return from, false, nil
	default:
		return from, false, fmt.Errorf("%w: %s from %s: %v", ErrInvalidTransition, t, from, err)
	}
}

// Mermaid renders the lifecycle table as a Mermaid state diagram.
func Mermaid() string {
	m := lfsm.NewFSM(string(events.StateConfiguring), lfsmEvents(), nil)
	s, _ := lfsm.VisualizeForMermaidWithGraphType(m, lfsm.StateDiagram) // StateDiagram is a known type
	return s
}
