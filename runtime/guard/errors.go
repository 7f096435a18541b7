package guard

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidArguments is returned when a call's arguments fail the
	// tool's input schema locally: nothing was sent, no retry was spent.
	// The error is an *ArgumentsError naming the field and why.
	ErrInvalidArguments = errors.New("guard: invalid arguments")

	// ErrSchemaUnresolved is returned by ValidateArgs when the tool's input
	// schema does not parse or resolve: the arguments were not checked, and
	// the call may go on (the server judges its own schema).
	ErrSchemaUnresolved = errors.New("guard: input schema does not resolve; arguments not checked locally")
)

// ArgumentsError says which argument failed the tool's input schema and
// why. errors.Is(err, ErrInvalidArguments) is true.
type ArgumentsError struct {
	Tool string
	// Field is the dotted path of the offending argument ("" when the
	// arguments as a whole are wrong); several missing ones are listed
	// comma-separated.
	Field  string
	Reason string
}

// Error names the tool, the field and the reason.
func (e *ArgumentsError) Error() string {
	s := fmt.Sprintf("guard: invalid arguments for %s", e.Tool)
	if e.Field != "" {
		s += fmt.Sprintf(": %s: %s", e.Field, e.Reason)
	} else {
		s += ": " + e.Reason
	}
	return s + " (checked against the tool's input schema; nothing was sent)"
}

// Unwrap makes errors.Is(err, ErrInvalidArguments) true.
func (e *ArgumentsError) Unwrap() error { return ErrInvalidArguments }
