package projections

import (
	"slices"
	"testing"

	"github.com/mcpledger/mcpledger/events"
)

func TestCatalogWithholdsChangedTools(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	c := events.ServerConfig{Name: "gh", Transport: events.TransportHTTP, URL: "http://127.0.0.1:1/mcp", Gated: true}
	s.config(c)
	s.connect("gh", events.StateConfiguring, 1, 0, []events.Tool{{Name: "search"}, {Name: "create"}, {Name: "exfiltrate"}})
	s.in("gh", &events.ToolsListed{Attempt: 1, Trigger: "list_changed", Tools: []events.Tool{{Name: "search"}, {Name: "create"}, {Name: "exfiltrate"}}})
	s.out("gh", &events.ToolsChanged{Changed: []events.ToolChange{{Name: "search", Pinned: "a", Listed: "b"}, {Name: "exfiltrate", Listed: "x"}, {Name: "gone", Pinned: "g"}}})
	// A listing from an earlier attempt, arriving late, changes nothing.
	s.in("gh", &events.ToolsListed{Attempt: 0, Trigger: "initial", Tools: []events.Tool{{Name: "stale"}}})

	cat := NewCatalog(nil)
	for _, e := range j.evs {
		cat.Apply(e)
	}
	v := cat.View()
	var names []string
	for _, e := range v.Tools {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, []string{"mcp__gh__create"}) {
		t.Errorf("tools %v", names)
	}
	want := []WithheldTool{{"gh", "exfiltrate", events.ReasonToolChanged}, {"gh", "search", events.ReasonToolChanged}}
	if !slices.Equal(v.Withheld, want) {
		t.Errorf("withheld %+v", v.Withheld)
	}
	// Clearing the change (a re-approval) brings them back.
	s.in("gh", &events.ApprovalDecided{Workspace: "/ws", Decision: events.DecisionApprove, Hash: "h"})
	s.out("gh", &events.ToolsChanged{})
	for _, e := range j.evs[len(j.evs)-2:] {
		cat.Apply(e)
	}
	if v := cat.View(); len(v.Tools) != 3 || len(v.Withheld) != 0 {
		t.Errorf("after re-approval: %d tools, withheld %+v", len(v.Tools), v.Withheld)
	}
}

func TestApprovalsFoldPins(t *testing.T) {
	j := newJournal()
	s := j.session(1)
	s.start()
	cfg := &events.ServerConfig{Name: "gh", Transport: events.TransportStdio, Command: "gh-mcp"}
	s.in("gh", &events.ApprovalDecided{Workspace: "/ws", Decision: events.DecisionApprove, Hash: "h1", By: "alice", Config: cfg})
	s.out("gh", &events.ToolsPinned{Workspace: "/ws", Hash: "h1", Tools: []events.KV{{Key: "search", Value: "s1"}}})
	s.out("gh", &events.ToolsPinned{Workspace: "/ws", Hash: "h0", Tools: []events.KV{{Key: "other", Value: "o"}}})
	a := NewApprovals()
	for _, e := range j.evs {
		a.Apply(e)
	}
	d, ok := a.Lookup("/ws", "gh")
	if !ok || !slices.Equal(d.ToolHashes, []events.KV{{Key: "search", Value: "s1"}}) || d.Config == nil || d.Config.Command != "gh-mcp" {
		t.Errorf("decision %+v", d)
	}
	d.Config.Command = "mutated"
	if d2, _ := a.Lookup("/ws", "gh"); d2.Config.Command != "gh-mcp" {
		t.Error("Lookup shares the config")
	}
}
