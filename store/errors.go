package store

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Errors returned by [Open].
var (
	// ErrLocked is returned when another process holds the journal file:
	// only one process may open it for writing, and a writer excludes
	// readers. Open waits [Options.LockTimeout] before giving up.
	ErrLocked = errors.New("store: journal is locked by another process")

	// ErrNotJournal is returned when the file exists but is not a bbolt
	// file, or is a bbolt file without the journal's meta/format.
	ErrNotJournal = errors.New("store: not a journal file")

	// ErrNewerFormat is returned when the file's meta/format or meta/codec
	// is newer than this build understands.
	ErrNewerFormat = errors.New("store: journal format is newer than this build")
)

// Errors returned by appends.
var (
	// ErrConflict is returned when an append's [Expect] does not match the
	// session's last seq, or when its event IDs overlap events already in
	// the journal without being an exact retry. It fails only that append,
	// never the others committed in the same batch.
	ErrConflict = errors.New("store: expected version conflict")

	// ErrInvalid is returned for an append the journal cannot take: a zero
	// session ID, no events, an event without a payload or of an unknown
	// kind, or two events sharing an ID.
	ErrInvalid = errors.New("store: invalid append")

	// ErrFull is returned when a commit would grow the file past
	// [Options.MaxSize]. Nothing of the failed batch was written; events
	// acknowledged earlier are intact.
	ErrFull = errors.New("store: journal reached its maximum size")

	// ErrReadOnly is returned by appends to a journal opened with
	// [Options.ReadOnly].
	ErrReadOnly = errors.New("store: journal is read-only")
)

// Errors returned by any method.
var (
	// ErrClosed is returned after Close, and by appends that were still
	// queued when Close was called.
	ErrClosed = errors.New("store: journal closed")

	// ErrNotFound is returned for a session the journal does not hold.
	ErrNotFound = errors.New("store: session not found")

	// ErrCorrupt is wrapped by every [*CorruptError].
	ErrCorrupt = errors.New("store: corrupt journal")
)

// CorruptError reports the first bad record or index entry found by
// [Journal.Verify] or by a read. It wraps [ErrCorrupt] and, when a decode
// failed, the decoder's error (e.g. events.ErrCorrupt).
type CorruptError struct {
	// Session is the session the bad record belongs to (zero when the
	// damage is not in a session, e.g. a stray log entry).
	Session uuid.UUID
	// Seq is the bad record's seq in its session (0 if unknown).
	Seq uint64
	// GPos is the bad record's global position (0 if unknown).
	GPos uint64
	// Reason says what is wrong, in a few words.
	Reason string
	// Err is the underlying decode error, if any.
	Err error

	// fault is set when the error stands for a recovered panic or memory
	// fault (see recoverCorrupt), whose position the reader fills in.
	fault bool
}

// Error implements error.
func (e *CorruptError) Error() string {
	s := "store: corrupt journal: "
	if e.Session != uuid.Nil {
		s += fmt.Sprintf("session %s ", e.Session)
	}
	if e.Seq != 0 {
		s += fmt.Sprintf("seq %d ", e.Seq)
	}
	if e.GPos != 0 {
		s += fmt.Sprintf("gpos %d ", e.GPos)
	}
	s += e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns [ErrCorrupt] and the underlying error, if any.
func (e *CorruptError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorrupt, e.Err}
	}
	return []error{ErrCorrupt}
}

// translate maps bbolt's errors onto this package's sentinels, so callers
// never import bbolt to check an error. Errors without a counterpart are
// returned unchanged.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bolterrors.ErrMaxSizeReached):
		return fmt.Errorf("%w: %v", ErrFull, err)
	case errors.Is(err, bolterrors.ErrDatabaseNotOpen), errors.Is(err, bolterrors.ErrTxClosed):
		return fmt.Errorf("%w: %v", ErrClosed, err)
	case errors.Is(err, bolterrors.ErrTimeout):
		return ErrLocked
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch),
		errors.Is(err, bolterrors.ErrChecksum), errors.Is(err, bolterrors.ErrInvalidMapping):
		return fmt.Errorf("%w: %v", ErrNotJournal, err)
	case errors.Is(err, bolterrors.ErrDatabaseReadOnly), errors.Is(err, bolterrors.ErrTxNotWritable):
		return fmt.Errorf("%w: %v", ErrReadOnly, err)
	}
	return err
}
