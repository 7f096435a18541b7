package runtime

import (
	"errors"
	"fmt"

	"github.com/mcpledger/mcpledger/runtime/guard"
)

// Errors of the tool-call path (kept next to the path rather than in
// errors.go, which others edit concurrently).
var (
	// ErrInvalidArguments is returned when a call's arguments fail the
	// tool's input schema locally: nothing was sent, no retry was spent.
	// The error is an *ArgumentsError naming the field and why.
	ErrInvalidArguments = guard.ErrInvalidArguments

	// ErrCallDenied is returned when the call policy or the approver
	// denied a call: it never reached the server.
	ErrCallDenied = errors.New("runtime: call denied")

	// ErrOutcomeUnknown is returned when the connection was lost with the
	// request in flight and the call could not be retried safely: the
	// server may or may not have acted on it.
	ErrOutcomeUnknown = errors.New("runtime: outcome unknown")

	// ErrResultTooLarge is returned when a server's response exceeds
	// Options.MaxMessageBytes and could not be cut in transit (it is not
	// valid JSON, or too odd to cut: see Options.MaxMessageBytes): the
	// frame was discarded unread (the session stays up) and the call
	// failed.
	ErrResultTooLarge = errors.New("runtime: result too large")
)

// ArgumentsError says which argument failed the tool's input schema and
// why (guard.ValidateArgs checks them). errors.Is(err, ErrInvalidArguments)
// is true.
type ArgumentsError = guard.ArgumentsError

// DeniedError says who denied a call and why. errors.Is(err,
// ErrCallDenied) is true.
type DeniedError struct {
	Tool, By, Policy, Reason string
}

// Error names the tool, the policy, who denied it and why.
func (e *DeniedError) Error() string {
	s := fmt.Sprintf("runtime: call to %s denied by %s (policy %s)", e.Tool, e.By, e.Policy)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap makes errors.Is(err, ErrCallDenied) true.
func (e *DeniedError) Unwrap() error { return ErrCallDenied }
