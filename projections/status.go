package projections

import "github.com/mcpledger/mcpledger/events"

// Status is the per-server status view of one session: the session opened
// by the latest session.started it applied (or, before any, the session of
// the first event). Events of other sessions are ignored, so Status may be
// fed one session's stream or a global log in which sessions follow one
// another.
//
// A server's state changes only by server.transitioned events, with one
// exception: a server first named by a config.observed (or named again
// after it was stopped as removed) is configuring until a transition says
// otherwise. A server missing from a later config stays listed; its
// transition to stopped (reason removed) shows it as such.
//
// A Status is owned by one goroutine: Apply and every accessor must be
// called from it. Accessors return copies the caller owns.
type Status struct {
	fold serverFold
}

// ServerStatus is one server's row of the status view. The JSON names of
// the first eight fields are those of `mcpledger status --json`.
type ServerStatus struct {
	// Name is the server's configured name.
	Name string `json:"name"`
	// State is the lifecycle state of the latest transition.
	State events.ServerState `json:"state"`
	// Reason is the latest transition's reason (why it stopped or failed).
	Reason events.Reason `json:"reason"`
	// Transport is how the server's config says to reach it.
	Transport events.Transport `json:"transport"`
	// Tools counts the server's live tools that pass its tool filters, each
	// name once: the tools of its last tools.listed while the catalog shows
	// them (ready, or stale while it reconnects); 0 otherwise.
	Tools int `json:"tools"`
	// Attempt is the latest transition's attempt number.
	Attempt int `json:"attempt"`
	// Error is the last classified error ("class: message") a transition
	// carried. Becoming ready or configuring clears it; a failed or stopped
	// server keeps the error that led there.
	Error string `json:"error"`
	// Since is when the server entered its state (unix ns).
	Since int64 `json:"since"`
	// ConnectedSince is when the server last became ready (unix ns), or 0
	// when it is not ready.
	ConnectedSince int64 `json:"connected_since,omitempty"`
	// ProtocolVersion, ServerName and ServerVersion are from the last
	// handshake since the server was last configured.
	ProtocolVersion string `json:"protocol_version,omitempty"`
	ServerName      string `json:"server_name,omitempty"`
	ServerVersion   string `json:"server_version,omitempty"`
	// PID is the process ID from the current attempt's process.spawned
	// (stdio servers), until the process exits or the server relaunches,
	// stops or fails; else 0.
	PID int `json:"pid,omitempty"`
	// Auth is the server's OAuth authorization: whether it waits for a
	// sign-in, and what this session's auth.* events recorded. Nil for a
	// server that neither waits for one nor had such an event.
	Auth *AuthStatus `json:"auth,omitempty"`
}

// StatusView is a snapshot of a [Status]: the shape of `mcpledger status
// --json`.
type StatusView struct {
	// Session is the session's ID, or "" before any event.
	Session string `json:"session"`
	// Servers are sorted by name.
	Servers []ServerStatus `json:"servers"`
}

// NewStatus returns an empty status view.
func NewStatus() *Status {
	return &Status{fold: newServerFold()}
}

// Apply folds e into the view. Events must be applied in journal order.
// Kinds that do not bear on status are ignored.
func (st *Status) Apply(e events.Event) {
	st.fold.apply(e)
}

// Session returns the ID of the session the view describes, or "" before
// any event.
func (st *Status) Session() string { return st.fold.sess.session() }

// Servers returns every server's status, sorted by name.
func (st *Status) Servers() []ServerStatus {
	names := st.fold.sortedNames()
	out := make([]ServerStatus, len(names))
	for i, n := range names {
		out[i] = st.row(st.fold.servers[n])
	}
	return out
}

// Server returns the status of the server called name, and false if the
// session has not named it.
func (st *Status) Server(name string) (ServerStatus, bool) {
	s, ok := st.fold.servers[name]
	if !ok {
		return ServerStatus{}, false
	}
	return st.row(s), true
}

// View returns a snapshot of the whole view.
func (st *Status) View() StatusView {
	return StatusView{Session: st.Session(), Servers: st.Servers()}
}

func (st *Status) row(s *server) ServerStatus {
	n := 0
	if s.visibleLive() {
		s.filter.eachTool(s.live, map[string]struct{}{}, func(*events.Tool) { n++ })
	}
	return ServerStatus{
		Name: s.name, State: s.state, Reason: s.reason, Transport: s.transport, Tools: n,
		Attempt: s.attempt, Error: s.err, Since: s.since, ConnectedSince: s.connectedSince,
		ProtocolVersion: s.protoVersion, ServerName: s.serverName, ServerVersion: s.serverVersion,
		PID: s.pid, Auth: s.authStatus(),
	}
}
