package events

import "errors"

// Errors returned while encoding and decoding records.
var (
	// ErrUnknownKind is returned for a kind outside the closed set, or a
	// schema version newer than this build understands.
	ErrUnknownKind = errors.New("events: unknown event kind")

	// ErrCorrupt is returned when a record's CRC does not match its bytes, or
	// its bytes do not decode as an envelope.
	ErrCorrupt = errors.New("events: corrupt record")

	// ErrNoUpcaster is returned when a stored record has an old schema
	// version and no upcaster chain leads from it to the current version.
	ErrNoUpcaster = errors.New("events: no upcaster for schema version")
)
