package replay

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
)

// Reader is what replay needs from a journal. *store.Journal and
// *store.MemJournal satisfy it.
type Reader interface {
	// ReadSession calls fn for each event of session from seq fromSeq on,
	// in seq order; fn's error stops the read and is returned.
	ReadSession(ctx context.Context, session uuid.UUID, fromSeq uint64, fn func(events.Event) error) error
	// ReadAll calls fn for every event of every session in global order
	// from global position fromGPos on.
	ReadAll(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error
}

// CheckpointReader is a Reader whose journal keeps checkpoints of
// [projections.History] (cmd/mcpledger adapts *store.Journal to it). [At]
// and [Why] resume from the newest usable one below the session instead
// of folding the journal from its start.
type CheckpointReader interface {
	Reader
	// Checkpoints returns the stored checkpoints, oldest first.
	Checkpoints(ctx context.Context) ([]projections.Stored, error)
}

var errStop = errors.New("stop")

// Session reads all events of a session.
func Session(ctx context.Context, r Reader, session uuid.UUID) ([]events.Event, error) {
	var out []events.Event
	err := r.ReadSession(ctx, session, 1, func(e events.Event) error {
		out = append(out, e)
		return nil
	})
	if err == nil && len(out) == 0 {
		err = ErrEmptySession
	}
	return out, err
}

// SeqAt returns the seq of the last event of evs at or before time t (unix
// ns), for --until TIME.
func SeqAt(evs []events.Event, t int64) (uint64, error) {
	var seq uint64
	for _, e := range evs {
		if e.Time > t {
			break
		}
		seq = e.Seq
	}
	if seq == 0 {
		return 0, ErrNoSuchEvent
	}
	return seq, nil
}
