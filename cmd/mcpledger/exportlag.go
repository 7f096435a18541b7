package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// exportLag is how far the journal's OTLP export (run or serve with an
// endpoint, or ship without --cursor: the cursor the journal holds) is
// behind the journal. A ship --cursor FILE keeps its position in FILE,
// which status does not read.
type exportLag struct {
	// CursorGPos is the last event the collector acknowledged.
	CursorGPos uint64 `json:"cursor_gpos"`
	// Events is how many events the journal holds after it.
	Events uint64 `json:"events"`
	// Oldest is the time of the first of them (RFC 3339), if any.
	Oldest string `json:"oldest,omitempty"`
}

// errFound stops a read at its first event.
var errFound = errors.New("found")

// exportLagOf reads the export's cursor in l; nil when the journal has
// none (nothing was ever exported from it).
func exportLagOf(ctx context.Context, l ledger) (*exportLag, error) {
	c, err := l.Cursor(ctx, shipCursor)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lag := &exportLag{CursorGPos: c.GPos}
	err = l.ReadAll(ctx, c.GPos+1, func(e events.Event) error {
		lag.Oldest = e.At().Format(time.RFC3339Nano)
		return errFound
	})
	if err != nil && !errors.Is(err, errFound) {
		return nil, err
	}
	if lag.Oldest == "" {
		return lag, nil
	}
	sessions, err := l.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	var last uint64
	for _, s := range sessions {
		last = max(last, s.LastGPos)
	}
	lag.Events = last - min(last, c.GPos)
	return lag, nil
}

// printExportLag writes the export's line of status, if it has one.
func printExportLag(w io.Writer, lag *exportLag, now time.Time) {
	switch {
	case lag == nil:
	case lag.Events == 0:
		fmt.Fprintf(w, "export (OTLP): up to date (every event through gpos %d acknowledged)\n", lag.CursorGPos)
	default:
		oldest, _ := time.Parse(time.RFC3339Nano, lag.Oldest)
		fmt.Fprintf(w, "export (OTLP): %d events behind, the oldest from %s (%s ago); they are sent when the collector takes them\n",
			lag.Events, formatTime(oldest.UnixNano()), now.Sub(oldest).Round(time.Second))
	}
}

// statusExportLag is the export's lag for status, read beside a running
// writer; nil when there is no export, or (said on stderr) when it cannot
// be read: status still shows the servers.
func (e *env) statusExportLag(ctx context.Context, f *commandFlags) *exportLag {
	l, err := f.openReadOnly(ctx)
	if err != nil {
		return nil // no journal: foldLast said so
	}
	defer l.Close()
	lag, err := exportLagOf(ctx, l)
	if err != nil {
		fmt.Fprintln(e.stderr, "mcpledger: warning: the export's lag cannot be read:", err)
	}
	return lag
}
