package events

// ServerState is a server's lifecycle state. The set is mandated by the
// architecture; the legal transitions between them live in package fsm.
type ServerState string

// The lifecycle states.
const (
	StateConfiguring  ServerState = "configuring"
	StateLaunching    ServerState = "launching"
	StateHandshaking  ServerState = "handshaking"
	StateReady        ServerState = "ready"
	StateFailed       ServerState = "failed"
	StateReconnecting ServerState = "reconnecting"
	StateStopped      ServerState = "stopped"
)

// States lists the lifecycle states in table order.
func States() []ServerState {
	return []ServerState{StateConfiguring, StateLaunching, StateHandshaking, StateReady,
		StateFailed, StateReconnecting, StateStopped}
}

// Reason explains why a server is not running (or why it stopped). The
// runtime turns each into an error that names the recovery.
type Reason string

// Admission and stop reasons.
const (
	ReasonNone            Reason = ""
	ReasonPendingApproval Reason = "pending_approval"
	ReasonRejected        Reason = "rejected"
	ReasonExcluded        Reason = "excluded"
	ReasonNotAllowed      Reason = "not_allowed"
	ReasonDisabled        Reason = "disabled"
	ReasonUntrusted       Reason = "untrusted"
	ReasonInvalidConfig   Reason = "invalid_config"
	ReasonStormHold       Reason = "storm_hold"
	ReasonRemoved         Reason = "removed"
	ReasonConfigChanged   Reason = "config_changed"
	ReasonShutdown        Reason = "shutdown"
	ReasonStopRequested   Reason = "stop_requested"
	ReasonExhausted       Reason = "attempts_exhausted"
	ReasonToolChanged     Reason = "tool_changed"
	ReasonReconnect       Reason = "reconnect_requested"
	ReasonInterrupted     Reason = "interrupted" // the session's mcpledger died without stopping
	// ReasonDuplicate is a config entry not used because a source of
	// higher priority defines the same server name (never a transition's).
	ReasonDuplicate Reason = "duplicate"
	// ReasonNeedsAuth: a remote server asked for an OAuth sign-in (a 401
	// with no usable token); it stays failed until a sign-in
	// (auth.signed_in) or an explicit reconnect.
	ReasonNeedsAuth Reason = "needs_auth"
	// ReasonNotFound and ReasonNotExecutable: a stdio server's command
	// (or its working directory) does not exist, or exists but cannot be
	// executed. A configuration error, not a crash: it stays failed until
	// its config changes or an explicit reconnect.
	ReasonNotFound      Reason = "not_found"
	ReasonNotExecutable Reason = "not_executable"
)

// ErrorClass classifies why a connection attempt or a live session failed.
type ErrorClass string

// Error classes (architecture.md "Lifecycle").
const (
	ErrSpawn           ErrorClass = "spawn"
	ErrHandshake       ErrorClass = "handshake"
	ErrTimeout         ErrorClass = "timeout"
	ErrVersion         ErrorClass = "version"
	ErrTransportClosed ErrorClass = "transport_closed"
	ErrExit            ErrorClass = "exit"
	ErrPing            ErrorClass = "ping"
	ErrProtocol        ErrorClass = "protocol"
	// ErrAuth: the server refused the request for want of authorization
	// (a 401, or a token that cannot be refreshed); retrying without a
	// sign-in cannot help.
	ErrAuth ErrorClass = "auth"
	// ErrNotFound and ErrNotExecutable: the command of a stdio server
	// (or its working directory) does not exist, or cannot be executed
	// (no execute permission, a directory, not a format the kernel runs);
	// retrying the same config cannot help. Journals recorded before
	// these existed classify such a failure as spawn.
	ErrNotFound      ErrorClass = "not_found"
	ErrNotExecutable ErrorClass = "not_executable"
)

// ClassifiedError is an error as it is journaled: a class, the message, and
// for process exits the code or signal.
type ClassifiedError struct {
	Class    ErrorClass `msgpack:"class" json:"class"`
	Message  string     `msgpack:"message,omitempty" json:"message,omitempty"`
	ExitCode int        `msgpack:"exit_code,omitempty" json:"exit_code,omitempty"`
	Signal   string     `msgpack:"signal,omitempty" json:"signal,omitempty"`
}

// String renders e as "class: message".
func (e *ClassifiedError) String() string {
	if e == nil {
		return ""
	}
	s := string(e.Class)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Transport names how a server is reached.
type Transport string

// Transports.
const (
	TransportStdio     Transport = "stdio"
	TransportHTTP      Transport = "http"
	TransportSSE       Transport = "sse"
	TransportInProcess Transport = "inprocess"
)

// Scope says which configuration source a server came from. The project
// scope is gated: its servers need an approval.
type Scope string

// Scopes, highest priority first.
const (
	ScopeFlag Scope = "flag"
	// ScopeLocal is Claude Code's local scope: the servers of one
	// workspace in the user's ~/.claude.json (projects → path →
	// mcpServers). Private to the user, so not gated.
	ScopeLocal   Scope = "local"
	ScopeProject Scope = "project"
	ScopeUser    Scope = "user"
	ScopeDropIn  Scope = "dropin"
	ScopeEmbed   Scope = "embedded"
)

// KV is one key/value pair. Payloads use sorted []KV instead of Go maps so
// their encoding is byte-stable.
type KV struct {
	Key   string `msgpack:"k" json:"key"`
	Value string `msgpack:"v" json:"value"`
}
