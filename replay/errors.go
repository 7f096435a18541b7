package replay

import (
	"errors"
	"fmt"

	"github.com/mcpledger/mcpledger/events"
)

// Errors returned by replay.
var (
	// ErrNondeterminism is wrapped by every *MismatchError: the decider,
	// run on a recorded input, does not decide what was recorded.
	ErrNondeterminism = errors.New("replay: nondeterministic decision")

	// ErrNoSuchEvent is returned when a session has no event at the
	// requested seq or time.
	ErrNoSuchEvent = errors.New("replay: no such event in the session")

	// ErrEmptySession is returned for a session with no events.
	ErrEmptySession = errors.New("replay: session has no events")
)

// MismatchKind says how a replayed decision differs from the record.
type MismatchKind string

// Mismatch kinds, as Temporal's replayer names them.
const (
	// Missing: the record has a decision the decider no longer makes.
	Missing MismatchKind = "missing"
	// Extra: the decider makes a decision the record does not have.
	Extra MismatchKind = "extra"
	// Different: both have a decision at this place, and they differ.
	Different MismatchKind = "different"
	// Refused: the decider now refuses a recorded input with an error.
	Refused MismatchKind = "refused"
)

// MismatchError is the first divergence between a recorded session and
// what the decider decides on its recorded inputs.
type MismatchError struct {
	Kind MismatchKind
	// Input is the recorded input whose decisions differ.
	Input events.Event
	// Seq is the seq of the recorded decision that differs (for Extra, the
	// seq where the extra decision would have been).
	Seq uint64
	// Recorded and Decided are the two sides (nil where a side has none).
	Recorded, Decided *events.Event
	// Err is the decider's error, for Refused; for the others, what else
	// is wrong, if anything (a recorded decision that names another cause).
	Err error
}

// Error describes the divergence with both sides.
func (e *MismatchError) Error() string {
	side := func(ev *events.Event) string {
		if ev == nil {
			return "nothing"
		}
		return describe(ev)
	}
	switch e.Kind {
	case Missing:
		if e.Recorded != nil && e.Recorded.Kind.IsInput() {
			// From Compare: the re-enactment does not have this input.
			return fmt.Sprintf("replay: nondeterministic decision at seq %d: recorded input %s was not re-enacted (re-enacted %s at its place)",
				e.Seq, side(e.Recorded), side(e.Decided))
		}
		if e.Input.Seq == e.Seq && e.Recorded != nil {
			return fmt.Sprintf("replay: nondeterministic decision at seq %d: recorded %s, but no recorded input causes it", e.Seq, side(e.Recorded))
		}
		return fmt.Sprintf("replay: nondeterministic decision at seq %d (caused by input seq %d %s %s): missing decision: recorded %s, decided nothing",
			e.Seq, e.Input.Seq, e.Input.Kind, e.Input.Server, side(e.Recorded))
	case Refused:
		return fmt.Sprintf("replay: nondeterministic decision: input seq %d (%s %s) is now refused: %v",
			e.Input.Seq, e.Input.Kind, e.Input.Server, e.Err)
	case Extra:
		if e.Decided != nil && e.Decided.Kind.IsInput() {
			// From Compare: the record does not have this input.
			return fmt.Sprintf("replay: nondeterministic decision at seq %d: re-enacted input %s is not in the record", e.Seq, side(e.Decided))
		}
	}
	s := fmt.Sprintf("replay: nondeterministic decision at seq %d (caused by input seq %d %s %s): %s decision: recorded %s, decided %s",
		e.Seq, e.Input.Seq, e.Input.Kind, e.Input.Server, e.Kind, side(e.Recorded), side(e.Decided))
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap makes errors.Is(err, ErrNondeterminism) true.
func (e *MismatchError) Unwrap() error { return ErrNondeterminism }
