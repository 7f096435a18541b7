package runtime

import (
	"context"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// Journal is what the Manager needs from the journal. *store.Journal and
// *store.MemJournal satisfy it through a thin adapter (cmd/mcpledger).
//
// The Manager is the only writer of its session: it assigns Seq to every
// event (contiguous, continuing the session) before appending, and the
// journal must reject an append whose first seq does not follow the
// session's last one.
type Journal interface {
	// Append appends evs to session and returns once they are durable.
	Append(ctx context.Context, session uuid.UUID, evs []events.Event) error
	// AppendLater enqueues evs and returns at once; wait blocks until they
	// are durable (or failed). Appends are durable in submission order.
	AppendLater(session uuid.UUID, evs []events.Event) (wait func(context.Context) error)
	// ReadAll calls fn for every event of every session in global order,
	// starting at global position from.
	ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error
}
