package runtime

import (
	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/projections"
)

// View is a consistent, read-only snapshot of the Manager after some
// journal position: status, catalog, and the unavailable servers. The loop
// publishes a new View after every commit; a View is never modified.
type View struct {
	// Session is the running session.
	Session uuid.UUID
	// Seq is the last seq of the session the view reflects.
	Seq uint64
	// Status holds one row per server, sorted by name.
	Status []projections.ServerStatus
	// Catalog holds the tools, sorted by name, and the unavailable servers.
	Catalog projections.CatalogView
	// Journal says whether the journal accepts appends: while it does not,
	// the Manager refuses work and retries it (degraded.go).
	Journal JournalHealth
	// Config is what the latest config reading could not use: files and
	// skipped entries, with the reasons.
	Config projections.ConfigView

	promptable []string

	index map[string]int   // catalog name → index in Catalog.Tools
	live  map[string]*conn // servers with a ready session
	state map[string]projections.ServerStatus
}

// Tool returns the catalog entry named name.
func (v *View) Tool(name string) (projections.Entry, bool) {
	i, ok := v.index[name]
	if !ok {
		return projections.Entry{}, false
	}
	return v.Catalog.Tools[i], true
}

// Server returns the status row of server name.
func (v *View) Server(name string) (projections.ServerStatus, bool) {
	s, ok := v.state[name]
	return s, ok
}

// settled reports whether a server has reached a state Start need not wait
// for: ready, failed or stopped.
func settled(s events.ServerState) bool {
	return s == events.StateReady || s == events.StateFailed || s == events.StateStopped
}

func buildView(sid uuid.UUID, seq uint64, set *projections.Set, live map[string]*conn, st fsm.State) *View {
	v := &View{Session: sid, Seq: seq, Status: set.Status.Servers(), Catalog: set.Catalog.View(), Config: set.Config.View(),
		index: map[string]int{}, live: map[string]*conn{}, state: map[string]projections.ServerStatus{}}
	for i, e := range v.Catalog.Tools {
		v.index[e.Name] = i
	}
	for _, name := range st.Names() {
		if srv, _ := st.Server(name); srv.InConfig && srv.Promptable != "" && srv.Phase == events.StateStopped &&
			srv.Reason == events.ReasonPendingApproval {
			v.promptable = append(v.promptable, name)
		}
	}
	for _, s := range v.Status {
		v.state[s.Name] = s
		if c := live[s.Name]; c != nil && s.State == events.StateReady {
			v.live[s.Name] = c
		}
	}
	return v
}
