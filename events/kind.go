package events

import "fmt"

// Kind names an event type. Kinds are stable strings decoupled from Go type
// names: a kind is never renamed or reused.
type Kind string

// Inputs: commands and observations. They are journaled as facts first;
// the decisions they cause follow with Cause set to their seq.
const (
	KindSessionStarted     Kind = "session.started"
	KindStopRequested      Kind = "stop.requested"
	KindConfigObserved     Kind = "config.observed"
	KindApprovalDecided    Kind = "approval.decided"
	KindReconnectRequested Kind = "reconnect.requested"
	KindProcessSpawned     Kind = "process.spawned"
	KindTransportOpened    Kind = "transport.opened"
	KindConnectFailed      Kind = "connect.failed"
	KindHandshakeCompleted Kind = "handshake.completed"
	KindToolsListed        Kind = "tools.listed"
	KindResourcesListed    Kind = "resources.listed"
	KindPromptsListed      Kind = "prompts.listed"
	KindPingFailed         Kind = "ping.failed"
	KindProcessExited      Kind = "process.exited"
	KindTransportClosed    Kind = "transport.closed"
	KindTimerFired         Kind = "timer.fired"
	KindCallStarted        Kind = "call.started"
	KindCallFinished       Kind = "call.finished"
	KindCallDecided        Kind = "call.decided"
	KindOutputSkipped      Kind = "process.output_skipped"
	// KindGatewayRejected: the gateway (mcpledger serve --http) refused a
	// request: a missing or wrong bearer token, or a Host or Origin it does
	// not serve.
	KindGatewayRejected Kind = "gateway.rejected"
	// KindJournalArchived: `mcpledger archive` (or run --retain) moved the
	// journal's oldest sessions into a sealed archive file.
	KindJournalArchived Kind = "journal.archived"
	// KindJournalResumed: the journal refused appends for a while (disk
	// full, an I/O error) and accepts them again; the outage's first
	// record after the gap.
	KindJournalResumed Kind = "journal.resumed"
	// KindAuthSignedIn, KindAuthRefreshed, KindAuthFailed and
	// KindAuthSignedOut: a remote server's OAuth sign-in (or step-up),
	// token refresh, failure and sign-out (see payloads_auth.go).
	KindAuthSignedIn  Kind = "auth.signed_in"
	KindAuthRefreshed Kind = "auth.refreshed"
	KindAuthFailed    Kind = "auth.failed"
	KindAuthSignedOut Kind = "auth.signed_out"
)

// Decisions: what fsm.Decide concluded from an input.
const (
	KindSessionStopped     Kind = "session.stopped"
	KindReloadDecided      Kind = "reload.decided"
	KindAdmissionDecided   Kind = "admission.decided"
	KindServerTransitioned Kind = "server.transitioned"
	KindTimerScheduled     Kind = "timer.scheduled"
	KindApprovalRequested  Kind = "approval.requested"
	KindToolsPinned        Kind = "tools.pinned"
	KindToolsChanged       Kind = "tools.changed"
)

// Kinds lists every kind in a fixed order: inputs first, then decisions.
func Kinds() []Kind {
	return []Kind{
		KindSessionStarted, KindStopRequested, KindConfigObserved, KindApprovalDecided,
		KindReconnectRequested, KindProcessSpawned, KindTransportOpened, KindConnectFailed,
		KindHandshakeCompleted, KindToolsListed, KindResourcesListed, KindPromptsListed,
		KindPingFailed, KindProcessExited, KindTransportClosed, KindTimerFired,
		KindCallStarted, KindCallFinished, KindCallDecided, KindGatewayRejected, KindOutputSkipped,
		KindJournalArchived, KindJournalResumed,
		KindAuthSignedIn, KindAuthRefreshed, KindAuthFailed, KindAuthSignedOut,
		KindSessionStopped, KindReloadDecided, KindAdmissionDecided, KindServerTransitioned,
		KindTimerScheduled, KindApprovalRequested, KindToolsPinned, KindToolsChanged,
	}
}

// IsInput reports whether events of kind k are inputs (commands and
// observations, journaled as facts) rather than decisions of the decider.
// It is false for unknown kinds.
func (k Kind) IsInput() bool {
	switch k {
	case KindSessionStarted, KindStopRequested, KindConfigObserved, KindApprovalDecided,
		KindReconnectRequested, KindProcessSpawned, KindTransportOpened, KindConnectFailed,
		KindHandshakeCompleted, KindToolsListed, KindResourcesListed, KindPromptsListed,
		KindPingFailed, KindProcessExited, KindTransportClosed, KindTimerFired,
		KindCallStarted, KindCallFinished, KindCallDecided, KindGatewayRejected, KindOutputSkipped,
		KindJournalArchived, KindJournalResumed,
		KindAuthSignedIn, KindAuthRefreshed, KindAuthFailed, KindAuthSignedOut:
		return true
	}
	return false
}

// Valid reports whether k is one of the closed set of kinds.
func (k Kind) Valid() bool {
	_, err := newPayload(k)
	return err == nil
}

// Version returns the current payload schema version of kind k (0 if k is
// unknown). Records written by this build carry it.
func (k Kind) Version() uint16 {
	switch k {
	case KindProcessExited:
		return 2 // v1 recorded the exit as one string; see upcast.go
	}
	if k.Valid() {
		return 1
	}
	return 0
}

// newPayload returns a pointer to a zero payload of the current version of k.
// It is the one exhaustive switch over kinds: no registry, no init().
func newPayload(k Kind) (Payload, error) {
	switch k {
	case KindSessionStarted:
		return &SessionStarted{}, nil
	case KindStopRequested:
		return &StopRequested{}, nil
	case KindConfigObserved:
		return &ConfigObserved{}, nil
	case KindApprovalDecided:
		return &ApprovalDecided{}, nil
	case KindReconnectRequested:
		return &ReconnectRequested{}, nil
	case KindProcessSpawned:
		return &ProcessSpawned{}, nil
	case KindTransportOpened:
		return &TransportOpened{}, nil
	case KindConnectFailed:
		return &ConnectFailed{}, nil
	case KindHandshakeCompleted:
		return &HandshakeCompleted{}, nil
	case KindToolsListed:
		return &ToolsListed{}, nil
	case KindResourcesListed:
		return &ResourcesListed{}, nil
	case KindPromptsListed:
		return &PromptsListed{}, nil
	case KindPingFailed:
		return &PingFailed{}, nil
	case KindProcessExited:
		return &ProcessExited{}, nil
	case KindTransportClosed:
		return &TransportClosed{}, nil
	case KindTimerFired:
		return &TimerFired{}, nil
	case KindCallStarted:
		return &CallStarted{}, nil
	case KindCallFinished:
		return &CallFinished{}, nil
	case KindOutputSkipped:
		return &OutputSkipped{}, nil
	case KindCallDecided:
		return &CallDecided{}, nil
	case KindGatewayRejected:
		return &GatewayRejected{}, nil
	case KindJournalArchived:
		return &JournalArchived{}, nil
	case KindJournalResumed:
		return &JournalResumed{}, nil
	case KindAuthSignedIn:
		return &AuthSignedIn{}, nil
	case KindAuthRefreshed:
		return &AuthRefreshed{}, nil
	case KindAuthFailed:
		return &AuthFailed{}, nil
	case KindAuthSignedOut:
		return &AuthSignedOut{}, nil
	case KindSessionStopped:
		return &SessionStopped{}, nil
	case KindReloadDecided:
		return &ReloadDecided{}, nil
	case KindAdmissionDecided:
		return &AdmissionDecided{}, nil
	case KindServerTransitioned:
		return &ServerTransitioned{}, nil
	case KindTimerScheduled:
		return &TimerScheduled{}, nil
	case KindApprovalRequested:
		return &ApprovalRequested{}, nil
	case KindToolsPinned:
		return &ToolsPinned{}, nil
	case KindToolsChanged:
		return &ToolsChanged{}, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownKind, string(k))
}

// NewPayload returns a pointer to a zero payload struct of the current
// version of kind k, or an error wrapping [ErrUnknownKind].
func NewPayload(k Kind) (Payload, error) { return newPayload(k) }
