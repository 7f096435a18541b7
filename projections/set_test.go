package projections_test

import (
	"fmt"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
)

// Two sessions: in the first the github server connects and lists its
// tools; in the second, with the same config, the catalog offers those
// tools as deferred before the server has connected.
func ExampleSet() {
	gh := events.ServerConfig{Name: "github", Transport: events.TransportStdio, Command: "github-mcp"}
	gh.Hash = events.ConfigHash(&gh)
	tools := []events.Tool{{Name: "create_issue"}, {Name: "search"}}
	sess := func(n byte) (id [16]byte) { id[15] = n; return id }
	var seq uint64
	ev := func(session [16]byte, t int64, server string, p events.Payload) events.Event {
		seq++
		return events.Event{Session: session, Seq: seq, Time: t, Kind: p.Kind(), Server: server, Payload: p}
	}
	s1, s2 := sess(1), sess(2)
	journal := []events.Event{
		ev(s1, 1, "", &events.SessionStarted{}),
		ev(s1, 1, "github", &events.ApprovalDecided{Workspace: "/ws", Decision: events.DecisionApprove, Hash: gh.Hash}),
		ev(s1, 2, "", &events.ConfigObserved{Workspace: "/ws", Servers: []events.ServerConfig{gh}}),
		ev(s1, 2, "github", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Attempt: 1}),
		ev(s1, 3, "github", &events.ToolsListed{Attempt: 1, Tools: tools}),
		ev(s1, 4, "github", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateReady, Attempt: 1}),
		ev(s2, 10, "", &events.SessionStarted{}),
		ev(s2, 11, "", &events.ConfigObserved{Workspace: "/ws", Servers: []events.ServerConfig{gh}}),
		ev(s2, 11, "github", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Attempt: 1}),
	}

	views := projections.NewSet()
	for _, e := range journal {
		views.Apply(e)
	}
	for _, s := range views.Status.Servers() {
		fmt.Println(s.Name, s.State, s.Tools)
	}
	for _, t := range views.Catalog.Entries() {
		fmt.Println(t.Name, "deferred:", t.Deferred)
	}
	fmt.Println(views.Approvals.State("/ws", "github", gh.Hash))
	// Output:
	// github launching 0
	// mcp__github__create_issue deferred: true
	// mcp__github__search deferred: true
	// approved
}
