package replay

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/projections"
)

// Snapshot is a session as it was right after one of its events.
type Snapshot struct {
	Session uuid.UUID `json:"session"`
	// Seq, GPos and Time locate the event the snapshot follows.
	Seq  uint64 `json:"seq"`
	GPos uint64 `json:"gpos"`
	Time int64  `json:"time"`
	// Status and Catalog (live, stale, deferred, withheld and unavailable
	// tools) are the session's as of that event.
	Status  projections.StatusView  `json:"status"`
	Catalog projections.CatalogView `json:"catalog"`
	// Approvals holds every decision recorded by then, across sessions.
	Approvals []projections.ApprovalRow `json:"approvals"`
	// Lost are the calls recorded lost by then (outcome unknown).
	Lost []LostCall `json:"lost,omitempty"`
	// State is the decider's state (unexported to JSON).
	State fsm.State `json:"-"`
	// Events are the session's events up to and including Seq.
	Events []events.Event `json:"-"`
}

// At folds the journal to the moment right after event seq of session:
// the tool cache and approvals from every event before it in the global
// log (any session), status and catalog from the session's own events.
// seq 0 means the session's last event. It returns ErrNoSuchEvent if the
// session has no event seq.
func At(ctx context.Context, r Reader, session uuid.UUID, seq uint64) (*Snapshot, error) {
	evs, err := Session(ctx, r, session)
	if err != nil {
		return nil, err
	}
	if seq == 0 {
		seq = evs[len(evs)-1].Seq
	}
	if seq > uint64(len(evs)) || evs[seq-1].Seq != seq {
		return nil, fmt.Errorf("%w: %s has %d events, asked for seq %d", ErrNoSuchEvent, session, len(evs), seq)
	}
	target := evs[seq-1]
	// The cross-session projections as of the session's start: from the
	// newest checkpoint below it, if the journal keeps them.
	h := projections.NewHistory()
	if cr, ok := r.(CheckpointReader); ok {
		cps, err := cr.Checkpoints(ctx)
		if err != nil {
			return nil, err
		}
		if h, _, err = projections.Resume(cps, evs[0].GPos); err != nil { // one passed over is folded from an older one
			return nil, err
		}
	}
	cache, approvals := h.Cache, h.Approvals
	status, catalog := projections.NewStatus(), projections.NewCatalog(cache)
	var st fsm.State
	err = r.ReadAll(ctx, h.GPos+1, func(e events.Event) error {
		if e.GPos > target.GPos {
			return errStop
		}
		cache.Apply(e)
		approvals.Apply(e)
		if e.Session == session {
			catalog.Apply(e)
			status.Apply(e)
			st = fsm.Evolve(st, e)
		}
		return nil
	})
	if err != nil && err != errStop {
		return nil, err
	}
	return &Snapshot{Session: session, Seq: seq, GPos: target.GPos, Time: target.Time, Status: status.View(),
		Catalog: catalog.View(), Approvals: approvals.List(), Lost: LostCalls(evs[:seq]), State: st, Events: evs[:seq]}, nil
}
