package events

import (
	"time"

	"github.com/google/uuid"
)

// Event is the envelope of every journal record.
//
// The writer of an event fills Kind, Server, Cause, Time and Payload; the
// journal assigns Session, Seq and GPos when it appends, and fills ID with a
// fresh UUIDv7 when it is zero. V is set by the codec to the kind's current
// schema version.
type Event struct {
	// ID identifies the event across journals; appends are idempotent by ID.
	ID uuid.UUID
	// Session is the session (stream) the event belongs to.
	Session uuid.UUID
	// Seq is the event's position in its session, from 1, gapless.
	Seq uint64
	// GPos is the event's position in the whole journal, from 1.
	GPos uint64
	// Time is when the event happened, in unix nanoseconds. Decisions carry
	// their input's time: the decider never reads a clock.
	Time int64
	// Kind says which payload struct Payload holds.
	Kind Kind
	// V is the payload's schema version.
	V uint16
	// Server is the server the event is about ("" for session-wide events).
	Server string
	// Cause is the seq of the input that caused a decision (0 for inputs).
	Cause uint64
	// Payload is a pointer to the kind's payload struct.
	Payload Payload
}

// New returns an event of payload p's kind about server at time t.
func New(t time.Time, server string, p Payload) Event {
	return Event{Time: t.UnixNano(), Kind: p.Kind(), Server: server, Payload: p}
}

// At returns the event's time.
func (e *Event) At() time.Time { return time.Unix(0, e.Time).UTC() }

// NewID returns a fresh UUIDv7 event ID. It panics only if the system's
// random source fails, as uuid.Must does.
func NewID() uuid.UUID { return uuid.Must(uuid.NewV7()) }
