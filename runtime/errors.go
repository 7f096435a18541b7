package runtime

import (
	"errors"
	"fmt"

	"github.com/mcpledger/mcpledger/events"
)

// Errors returned by the Manager.
var (
	// ErrShuttingDown is returned to calls still pending when Close runs,
	// and to any call made after it.
	ErrShuttingDown = errors.New("runtime: shutting down: the manager is closing; retry against a running mcpledger")

	// ErrNotStarted is returned by operations that need Start first.
	ErrNotStarted = errors.New("runtime: not started: call Start first")

	// ErrUnknownTool is returned for a tool name the catalog does not hold.
	ErrUnknownTool = errors.New("runtime: unknown tool")

	// ErrUnknownServer is returned for a server name no config defines.
	ErrUnknownServer = errors.New("runtime: unknown server")

	// ErrUnavailable is returned when the tool's server cannot serve it;
	// the error is an *UnavailableError naming the reason and the recovery.
	ErrUnavailable = errors.New("runtime: server unavailable")

	// ErrJournal is wrapped by the *DegradedError of every command and
	// call refused while the journal refuses appends (disk full, an I/O
	// error): the manager retries the journal and resumes by itself.
	ErrJournal = errors.New("runtime: journal append failed")
)

// UnavailableError explains why a server's tools cannot be called now and
// what to do about it.
type UnavailableError struct {
	Server string
	State  events.ServerState
	Reason events.Reason
	Detail string
}

// Error names the server, its state and reason, and the recovery.
func (e *UnavailableError) Error() string {
	s := fmt.Sprintf("runtime: server %q is %s", e.Server, e.State)
	if e.Reason != "" {
		s += " (" + string(e.Reason) + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if r := Recovery(e.Server, e.Reason, e.State); r != "" {
		s += "; " + r
	}
	return s
}

// Unwrap makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

// Recovery says what a user can do about a server being unavailable for
// reason r in state st.
func Recovery(server string, r events.Reason, st events.ServerState) string {
	switch r {
	case events.ReasonRemoved:
		return "it was removed from the config: re-add it"
	case events.ReasonNotAllowed:
		return "add it to \"allowed\" in settings (and to --allowed-servers if that was given)"
	case events.ReasonExcluded:
		return "remove it from \"excluded\" in settings"
	case events.ReasonPendingApproval:
		return fmt.Sprintf("approve it: mcpledger approve %s", server)
	case events.ReasonRejected:
		return "it was rejected: edit its config to be asked again"
	case events.ReasonUntrusted:
		return fmt.Sprintf("trust the workspace and approve it: mcpledger approve --trust %s, in the workspace directory (or mcpledger trust DIR, then mcpledger approve %s)", server, server)
	case events.ReasonDisabled:
		return "remove \"disabled\": true from its config"
	case events.ReasonStormHold:
		return "it crashed too often; it is held until the storm window passes, or launch it now with: mcpledger reconnect " + server +
			" (with mcpledger running or not: a reconnect stops counting the crashes before it)"
	case events.ReasonToolChanged:
		return fmt.Sprintf("its tool definition changed since approval: mcpledger approve %s", server)
	case events.ReasonInvalidConfig:
		return "fix its config entry"
	case events.ReasonExhausted:
		return fmt.Sprintf("it failed repeatedly: mcpledger reconnect %s", server)
	case events.ReasonStopRequested:
		return fmt.Sprintf("it was stopped: mcpledger reconnect %s", server)
	case events.ReasonNotFound, events.ReasonNotExecutable:
		return fmt.Sprintf("fix its \"command\" (or \"cwd\") in the config, and it relaunches at once; or install the command, then: mcpledger reconnect %s", server)
	case events.ReasonNeedsAuth:
		return fmt.Sprintf("it needs you to sign in: mcpledger login %s", server)
	}
	switch st {
	case events.StateFailed:
		return fmt.Sprintf("mcpledger reconnect %s", server)
	case events.StateReconnecting:
		return "it is reconnecting; retry shortly"
	}
	return ""
}
