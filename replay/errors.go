package replay

import (
	"errors"
	"fmt"
	"time"

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

// Errors of exports and imports.
var (
	// ErrTampered is wrapped by an *ExportError for a sealed export whose
	// lines are not the ones that were exported.
	ErrTampered = errors.New("replay: the export was changed after it was written")

	// ErrTruncated is wrapped by an *ExportError for a sealed export
	// whose end is missing.
	ErrTruncated = errors.New("replay: the export is incomplete")

	// ErrUnsealed is returned for an export without digests (written
	// before exports were sealed, or by `log --json`) unless it is asked
	// for: an edit to it cannot be detected.
	ErrUnsealed = errors.New("replay: the export carries no digests, so an edit to it cannot be detected")

	// ErrInvalidExport is wrapped by an *ExportError for an unsealed
	// export that is not one session with seqs from 1 without gaps.
	ErrInvalidExport = errors.New("replay: not the export of one session")

	// ErrSigner is returned for an export that is not signed by the key
	// ReadExportOptions.Signer names.
	ErrSigner = errors.New("replay: the export is not signed by the key asked for")

	// ErrConflict is wrapped by a *ConflictError: the journal holds the
	// exported session with other content.
	ErrConflict = errors.New("replay: the journal holds this session with different content")
)

// ExportError is the first line of an export file that fails its check.
type ExportError struct {
	// Line is the line's number in the file, from 1.
	Line int
	// Seq and Kind are the line's event's, when it decodes (else 0, "").
	Seq  uint64
	Kind events.Kind
	// Reason says what is wrong with the line.
	Reason string
	// Err is ErrTampered, ErrTruncated or ErrInvalidExport.
	Err error
}

// Error names the line, its event and what is wrong with it.
func (e *ExportError) Error() string {
	where := fmt.Sprintf("line %d", e.Line)
	if e.Kind != "" {
		where += fmt.Sprintf(" (seq %d %s)", e.Seq, e.Kind)
	}
	return fmt.Sprintf("%v: %s %s", e.Err, where, e.Reason)
}

// Unwrap returns Err.
func (e *ExportError) Unwrap() error { return e.Err }

// ConflictError is the first difference between an exported session and
// the same session in a journal.
type ConflictError struct {
	// Seq is the first seq whose events differ.
	Seq uint64
	// Line is the exported event's line (0 if the export ends before Seq).
	Line int
	// Field names the first envelope field that differs ("time", "kind",
	// …) or "payload"; "" when one side has no event at Seq.
	Field string
	// Exported and Stored are the two sides (nil where a side has none).
	Exported, Stored *events.Event
}

// Error names the difference with both sides.
func (e *ConflictError) Error() string {
	side := func(ev *events.Event) string {
		if ev == nil {
			return "nothing"
		}
		return describeAt(ev)
	}
	where := fmt.Sprintf("at seq %d", e.Seq)
	if e.Line > 0 {
		where += fmt.Sprintf(" (line %d of the export)", e.Line)
	}
	if e.Field != "" {
		where += ", in its " + e.Field
	}
	return fmt.Sprintf("%v: they first differ %s: the export has %s, the journal has %s",
		ErrConflict, where, side(e.Exported), side(e.Stored))
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// describeAt describes an event for a conflict: its kind, server, time
// and payload, cut to 300 bytes (a call's result may be megabytes).
func describeAt(e *events.Event) string {
	const most = 300
	s := describe(e)
	if len(s) > most {
		s = s[:most] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return s + " at " + e.At().Format(time.RFC3339Nano)
}
