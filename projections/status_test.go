package projections

import (
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

// lifecycleJournal is one session: github goes through a full lifecycle
// (configuring → launching → handshaking → ready → reconnecting → launching
// → … → failed), web is a project server waiting for approval, and old is
// ready until a reload removes it.
func lifecycleJournal() (*journal, *stream) {
	j := newJournal()
	s := j.session(1)
	s.start()
	web := stdio("web")
	web.Scope, web.Gated, web.Transport, web.Command, web.URL = events.ScopeProject, true, events.TransportHTTP, "", "https://example.com/mcp"
	web.Hash = events.ConfigHash(&web)
	s.config(stdio("github"), web, stdio("old"))
	s.out("github", &events.AdmissionDecided{Admitted: true})
	s.out("web", &events.AdmissionDecided{Admitted: false, Reason: events.ReasonPendingApproval})
	s.tr("web", events.StateConfiguring, events.StateStopped, events.ReasonPendingApproval, 0, nil)
	s.out("web", &events.ApprovalRequested{Workspace: "/ws", Hash: web.Hash})
	s.connect("github", events.StateConfiguring, 1, 4242, toolList("create_issue", "get_issue", "search"))
	s.connect("old", events.StateConfiguring, 1, 4343, toolList("legacy"))

	// github's process dies; the first retry fails to spawn; the second
	// connects; then it dies for good.
	s.in("github", &events.ProcessExited{Attempt: 1, PID: 4242, ExitCode: 1})
	s.tr("github", events.StateReady, events.StateReconnecting, "", 1, errExit(1))
	s.out("github", &events.TimerScheduled{TimerID: 1, Purpose: events.TimerBackoff, Attempt: 2, DelayMs: 500})
	s.in("github", &events.TimerFired{TimerID: 1, Purpose: events.TimerBackoff, Attempt: 2})
	s.tr("github", events.StateReconnecting, events.StateLaunching, "", 2, nil)
	s.in("github", &events.ConnectFailed{Attempt: 2, Phase: "spawn", Error: events.ClassifiedError{Class: events.ErrSpawn, Message: "npx: not found"}})
	s.tr("github", events.StateLaunching, events.StateReconnecting, "", 2, &events.ClassifiedError{Class: events.ErrSpawn, Message: "npx: not found"})
	s.in("github", &events.TimerFired{TimerID: 2, Purpose: events.TimerBackoff, Attempt: 3})
	s.connect("github", events.StateReconnecting, 3, 5151, toolList("create_issue", "get_issue"))
	s.in("github", &events.TransportClosed{Attempt: 3, Error: events.ClassifiedError{Class: events.ErrTransportClosed, Message: "EOF"}})
	s.tr("github", events.StateReady, events.StateReconnecting, "", 3, &events.ClassifiedError{Class: events.ErrTransportClosed, Message: "EOF"})
	s.in("github", &events.TimerFired{TimerID: 3, Purpose: events.TimerBackoff, Attempt: 4})
	s.tr("github", events.StateReconnecting, events.StateLaunching, "", 4, nil)
	s.in("github", &events.ProcessSpawned{Attempt: 4, PID: 6161})
	s.tr("github", events.StateLaunching, events.StateHandshaking, "", 4, nil)
	s.in("github", &events.ConnectFailed{Attempt: 4, Phase: "handshake", Error: events.ClassifiedError{Class: events.ErrTimeout, Message: "initialize: 30s"}})
	s.tr("github", events.StateHandshaking, events.StateFailed, events.ReasonExhausted, 4, &events.ClassifiedError{Class: events.ErrTimeout, Message: "initialize: 30s"})
	s.in("github", &events.ProcessExited{Attempt: 4, PID: 6161, Signal: "killed", Expected: true})

	// A reload drops old.
	s.config(stdio("github"), web)
	s.out("", &events.ReloadDecided{Trigger: "watch", Verdicts: []events.ReloadVerdict{{Server: "old", Verdict: events.VerdictRemove}}})
	s.tr("old", events.StateReady, events.StateStopped, events.ReasonRemoved, 1, nil)
	s.in("old", &events.ProcessExited{Attempt: 1, PID: 4343, Signal: "terminated", Expected: true})
	return j, s
}

func TestStatusLifecycleGolden(t *testing.T) {
	j, _ := lifecycleJournal()
	st := NewStatus()
	var b strings.Builder
	for _, e := range j.evs {
		st.Apply(e)
		b.WriteString("== " + describe(e) + "\n")
		b.WriteString(renderStatus(st.View()))
	}
	golden(t, "status_lifecycle", b.String())
}

func TestStatusLifecycle(t *testing.T) {
	j, _ := lifecycleJournal()
	st := NewStatus()
	// applyUntil applies events until the predicate holds after one.
	i := 0
	applyUntil := func(what string, ok func(events.Event) bool) events.Event {
		t.Helper()
		for ; i < len(j.evs); i++ {
			e := j.evs[i]
			st.Apply(e)
			if ok(e) {
				i++
				return e
			}
		}
		t.Fatalf("never reached: %s", what)
		return events.Event{}
	}
	transitionTo := func(server string, to events.ServerState) func(events.Event) bool {
		return func(e events.Event) bool {
			p, ok := e.Payload.(*events.ServerTransitioned)
			return ok && e.Server == server && p.To == to
		}
	}
	get := func(name string) ServerStatus {
		t.Helper()
		s, ok := st.Server(name)
		if !ok {
			t.Fatalf("server %q not listed", name)
		}
		return s
	}

	cfg := applyUntil("config", func(e events.Event) bool { return e.Kind == events.KindConfigObserved })
	for _, n := range []string{"github", "old", "web"} {
		if s := get(n); s.State != events.StateConfiguring || s.Since != cfg.Time {
			t.Errorf("after config %s: state %s since %d, want configuring since %d", n, s.State, s.Since, cfg.Time)
		}
	}
	if got := st.Session(); got != "01010101-0101-0101-0101-010101010101" {
		t.Errorf("session = %q", got)
	}

	ready := applyUntil("github ready", transitionTo("github", events.StateReady))
	if s := get("github"); s.Tools != 3 || s.ConnectedSince != ready.Time || s.PID != 4242 || s.ProtocolVersion != "2025-06-18" || s.ServerName != "github-mcp" {
		t.Errorf("ready: %+v", s)
	}
	if s := get("web"); s.State != events.StateStopped || s.Reason != events.ReasonPendingApproval || s.Tools != 0 {
		t.Errorf("web: %+v", s)
	}

	applyUntil("github reconnecting", transitionTo("github", events.StateReconnecting))
	if s := get("github"); s.ConnectedSince != 0 || s.PID != 0 || s.Tools != 3 || s.Error != "exit: exit status 1" || s.Attempt != 1 {
		t.Errorf("reconnecting: %+v (want stale tools counted, pid cleared, error kept)", s)
	}
	applyUntil("github relaunching", transitionTo("github", events.StateLaunching))
	if s := get("github"); s.Error != "exit: exit status 1" || s.Attempt != 2 || s.PID != 0 {
		t.Errorf("relaunching keeps the last error: %+v", s)
	}
	applyUntil("github reconnecting again", transitionTo("github", events.StateReconnecting))
	if s := get("github"); s.Error != "spawn: npx: not found" {
		t.Errorf("spawn failure: %+v", s)
	}
	applyUntil("github ready again", transitionTo("github", events.StateReady))
	if s := get("github"); s.Error != "" || s.Tools != 2 || s.PID != 5151 || s.Attempt != 3 {
		t.Errorf("ready again: %+v", s)
	}
	failed := applyUntil("github failed", transitionTo("github", events.StateFailed))
	if s := get("github"); s.Reason != events.ReasonExhausted || s.Error != "timeout: initialize: 30s" || s.Tools != 0 || s.Since != failed.Time || s.PID != 0 {
		t.Errorf("failed: %+v", s)
	}

	// The reload drops old from the config; it stays listed as it was until
	// its transition, and as stopped/removed after it.
	applyUntil("reload config", func(e events.Event) bool { return e.Kind == events.KindConfigObserved })
	if s := get("old"); s.State != events.StateReady {
		t.Errorf("old before its transition: %+v", s)
	}
	applyUntil("old stopped", transitionTo("old", events.StateStopped))
	for ; i < len(j.evs); i++ {
		st.Apply(j.evs[i])
	}
	if s := get("old"); s.State != events.StateStopped || s.Reason != events.ReasonRemoved || s.Tools != 0 {
		t.Errorf("old after removal: %+v", s)
	}
	names := []string{}
	for _, s := range st.Servers() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "github,old,web" {
		t.Errorf("servers = %s, want sorted github,old,web", got)
	}
}

func TestStatusSessions(t *testing.T) {
	j := newJournal()
	a := j.session(1)
	a.start()
	a.config(stdio("github"), stdio("removed"))
	a.connect("github", events.StateConfiguring, 1, 10, toolList("x"))
	b := j.session(2)
	b.start()
	b.config(stdio("github"))
	// A straggler from session 1 after session 2 started must not count.
	a.tr("github", events.StateReady, events.StateFailed, events.ReasonExhausted, 9, errExit(2))

	st := NewStatus()
	for _, e := range j.evs {
		st.Apply(e)
	}
	v := st.View()
	if v.Session != "02020202-0202-0202-0202-020202020202" {
		t.Errorf("session = %q, want the second", v.Session)
	}
	if len(v.Servers) != 1 || v.Servers[0].Name != "github" || v.Servers[0].State != events.StateConfiguring || v.Servers[0].Tools != 0 {
		t.Errorf("servers = %+v, want only github, configuring, no tools", v.Servers)
	}
}

func TestStatusReAddedAfterRemoval(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	s.config(stdio("a"))
	s.connect("a", events.StateConfiguring, 1, 10, toolList("x"))
	s.config()
	s.tr("a", events.StateReady, events.StateStopped, events.ReasonRemoved, 1, nil)
	readd := s.config(stdio("a"))
	st := NewStatus()
	for _, e := range j.evs {
		st.Apply(e)
	}
	got, _ := st.Server("a")
	if got.State != events.StateConfiguring || got.Reason != "" || got.Since != readd.Time || got.Attempt != 0 || got.ServerName != "" {
		t.Errorf("re-added server: %+v, want fresh configuring", got)
	}
}

func TestStatusFilteredToolCount(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	c := stdio("a")
	c.ExcludeTools = []string{"delete_*"}
	s.config(c)
	s.connect("a", events.StateConfiguring, 1, 10, toolList("get", "delete_repo", "delete_issue", "get"))
	st := NewStatus()
	for _, e := range j.evs {
		st.Apply(e)
	}
	if got, _ := st.Server("a"); got.Tools != 1 {
		t.Errorf("tools = %d, want 1 (two excluded, one duplicate)", got.Tools)
	}
	// A reload that only changes the filter changes the count.
	c.ExcludeTools = nil
	st.Apply(s.config(c))
	if got, _ := st.Server("a"); got.Tools != 3 {
		t.Errorf("tools after filter change = %d, want 3", got.Tools)
	}
}

func TestStatusCopies(t *testing.T) {
	st := NewStatus()
	j := newJournal()
	s := j.session(1)
	st.Apply(s.start())
	st.Apply(s.config(stdio("a")))
	v := st.Servers()
	v[0].Name = "mutated"
	if got := st.Servers()[0].Name; got != "a" {
		t.Errorf("caller's change leaked into the view: %q", got)
	}
	if _, ok := st.Server("nope"); ok {
		t.Error("unknown server found")
	}
}
