package fsm

import "errors"

// Errors returned by the decider.
var (
	// ErrInvalidTransition is returned when an input asks for a transition
	// the lifecycle table does not allow from the server's current state
	// (looplab/fsm's InvalidEventError and UnknownEventError are translated
	// into it). No event is produced for it.
	ErrInvalidTransition = errors.New("fsm: invalid transition")

	// ErrUnknownServer is returned for a command about a server the session
	// has never been configured with.
	ErrUnknownServer = errors.New("fsm: unknown server")

	// ErrNotInput is returned when Decide is given a decision event.
	ErrNotInput = errors.New("fsm: event is not an input")

	// ErrStaleApproval is returned when an approval decision names a config
	// hash that is not the server's current one.
	ErrStaleApproval = errors.New("fsm: approval is for another config hash")

	// ErrOptions is returned by CheckOptions for a tunable outside the
	// range the decider handles.
	ErrOptions = errors.New("fsm: decider option out of range")
)
