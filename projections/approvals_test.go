package projections

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

func renderApprovals(rows []ApprovalRow) string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		dec, pend := "-", "-"
		if d := r.Decision; d != nil {
			dec = fmt.Sprintf("%s %s by %s s%c#%d %s", d.Decision, events.ShortHash(d.Hash), dash(d.By), d.Session[1], d.Seq, ms(d.At))
		}
		if p := r.Pending; p != nil {
			pend = fmt.Sprintf("%s prev=%s changed=%s s%c#%d", events.ShortHash(p.Hash), dash(events.ShortHash(p.Previous)),
				dash(strings.Join(p.Changed, ",")), p.Session[1], p.Seq)
		}
		out[i] = []string{r.Workspace, r.Server, dec, pend}
	}
	return table("WORKSPACE\tSERVER\tDECISION\tPENDING", out)
}

// TestApprovalsAcrossSessions walks one gated server through approve, a
// restart, a config change, reject and re-approve, across three sessions,
// checking State after each step and the rendered list in a golden file.
func TestApprovalsAcrossSessions(t *testing.T) {
	v1 := stdio("web")
	v2 := stdio("web", "--port", "9")
	h1, h2 := v1.Hash, v2.Hash
	j := newJournal()
	a := NewApprovals()
	var b strings.Builder
	type want struct{ h1, h2 string }
	step := func(what string, e events.Event, w want) {
		t.Helper()
		a.Apply(e)
		b.WriteString("== " + what + ": " + describe(e) + "\n" + renderApprovals(a.List()))
		if got := a.State("/ws", "web", h1); got != w.h1 {
			t.Errorf("%s: State(h1) = %s, want %s", what, got, w.h1)
		}
		if got := a.State("/ws", "web", h2); got != w.h2 {
			t.Errorf("%s: State(h2) = %s, want %s", what, got, w.h2)
		}
	}
	pending := want{ApprovalPending, ApprovalPending}

	s1 := j.session(1)
	step("nothing yet", s1.start(), pending)
	step("requested", s1.out("web", &events.ApprovalRequested{Workspace: "/ws", Hash: h1, Scope: events.ScopeProject}), pending)
	step("approved", s1.in("web", &events.ApprovalDecided{Workspace: "/ws", Decision: events.DecisionApprove, Hash: h1, By: "alice",
		Scope: events.ScopeProject, ToolHashes: []events.KV{{Key: "search", Value: "sha256:aa"}}}), want{ApprovalApproved, ApprovalPending})
	// Another workspace's decision about a server of the same name is
	// separate.
	step("other workspace", s1.in("web", &events.ApprovalDecided{Workspace: "/other", Decision: events.DecisionReject, Hash: h1}),
		want{ApprovalApproved, ApprovalPending})

	s2 := j.session(2)
	step("restart keeps approval", s2.start(), want{ApprovalApproved, ApprovalPending})
	step("config changed", s2.out("web", &events.ApprovalRequested{Workspace: "/ws", Hash: h2, Scope: events.ScopeProject,
		Previous: h1, Changed: []string{"args"}}), want{ApprovalApproved, ApprovalPending})
	step("changed rejected", s2.in("web", &events.ApprovalDecided{Workspace: "/ws", Decision: events.DecisionReject, Hash: h2, By: "bob"}),
		want{ApprovalPending, ApprovalRejected})

	s3 := j.session(3)
	step("restart keeps rejection", s3.start(), want{ApprovalPending, ApprovalRejected})
	step("re-approved", s3.in("web", &events.ApprovalDecided{Workspace: "/ws", Decision: events.DecisionApprove, Hash: h2, By: "bob"}),
		want{ApprovalPending, ApprovalApproved})
	step("back to the old config", s3.out("web", &events.ApprovalRequested{Workspace: "/ws", Hash: h1, Previous: h2, Changed: []string{"args"}}),
		want{ApprovalPending, ApprovalApproved})
	// A decision for another hash does not answer the request.
	step("decision about another hash", s3.in("web", &events.ApprovalDecided{Workspace: "/ws", Decision: events.DecisionApprove, Hash: h2, By: "carol"}),
		want{ApprovalPending, ApprovalApproved})

	golden(t, "approvals_sessions", b.String())

	d, ok := a.Lookup("/ws", "web")
	if !ok || d.Decision != events.DecisionApprove || d.Hash != h2 || d.By != "carol" || d.Session != "03030303-0303-0303-0303-030303030303" {
		t.Errorf("Lookup = %+v, %v", d, ok)
	}
	if _, ok := a.Lookup("/ws", "nope"); ok {
		t.Error("Lookup found an undecided server")
	}
	pend := a.Pending()
	if len(pend) != 1 || pend[0].Hash != h1 || pend[0].Previous != h2 || !slices.Equal(pend[0].Changed, []string{"args"}) {
		t.Errorf("Pending = %+v, want the unanswered request for h1", pend)
	}
	rows := a.List()
	if len(rows) != 2 || rows[0].Workspace != "/other" || rows[1].Workspace != "/ws" {
		t.Errorf("List not sorted by workspace: %+v", rows)
	}
}

func TestApprovalsAnswerClearsPending(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	a := NewApprovals()
	a.Apply(s.out("web", &events.ApprovalRequested{Workspace: "/ws", Hash: "sha256:1"}))
	a.Apply(s.out("api", &events.ApprovalRequested{Workspace: "/ws", Hash: "sha256:2"}))
	a.Apply(s.in("web", &events.ApprovalDecided{Workspace: "/ws", Decision: events.DecisionReject, Hash: "sha256:1"}))
	pend := a.Pending()
	if len(pend) != 1 || pend[0].Server != "api" {
		t.Errorf("pending = %+v, want only api", pend)
	}
	if got := a.State("/ws", "web", "sha256:1"); got != ApprovalRejected {
		t.Errorf("web = %s", got)
	}
	// A later request for the same hash is promptable again only if the
	// decider asks; the projection records what it is told.
	a.Apply(s.out("web", &events.ApprovalRequested{Workspace: "/ws", Hash: "sha256:3", Previous: "sha256:1"}))
	if len(a.Pending()) != 2 {
		t.Errorf("pending = %+v, want web and api", a.Pending())
	}
}

func TestApprovalsUnknownDecision(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	a := NewApprovals()
	a.Apply(s.in("web", &events.ApprovalDecided{Workspace: "/ws", Decision: "maybe", Hash: "sha256:1"}))
	if got := a.State("/ws", "web", "sha256:1"); got != ApprovalPending {
		t.Errorf("State after an unknown decision = %s, want pending", got)
	}
}

func TestApprovalsCopies(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	a := NewApprovals()
	kvs := []events.KV{{Key: "t", Value: "sha256:1"}}
	changed := []string{"args"}
	a.Apply(s.in("web", &events.ApprovalDecided{Workspace: "/ws", Decision: events.DecisionApprove, Hash: "h", ToolHashes: kvs}))
	a.Apply(s.out("web", &events.ApprovalRequested{Workspace: "/ws", Hash: "h2", Changed: changed}))
	kvs[0].Value, changed[0] = "input changed", "input changed"
	d, _ := a.Lookup("/ws", "web")
	d.ToolHashes[0].Value = "caller changed"
	rows := a.List()
	rows[0].Pending.Changed[0] = "caller changed"
	rows[0].Decision.ToolHashes[0].Value = "caller changed"
	d, _ = a.Lookup("/ws", "web")
	if d.ToolHashes[0].Value != "sha256:1" || a.Pending()[0].Changed[0] != "args" {
		t.Errorf("approvals share memory: %+v %+v", d, a.Pending())
	}
}
