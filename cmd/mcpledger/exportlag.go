package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mcpledger/mcpledger/export/otlp"
	"github.com/mcpledger/mcpledger/store"
)

// exportLag is how far an OTLP export is behind the journal: the
// journal's own (run or serve with an endpoint, or ship without --cursor:
// the cursor the journal holds), or a sidecar's (ship --cursor FILE keeps
// its position in FILE, which status --cursor FILE reads).
type exportLag struct {
	// CursorFile is the file a ship --cursor keeps the position in; ""
	// for the journal's own cursor.
	CursorFile string `json:"cursor_file,omitempty"`
	// CursorGPos is the last event the collector acknowledged.
	CursorGPos uint64 `json:"cursor_gpos"`
	// Events is how many events the journal holds after it.
	Events uint64 `json:"events"`
	// Oldest is the time of the first of them (RFC 3339), if any.
	Oldest string `json:"oldest,omitempty"`
}

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
	return lagAfter(ctx, l, c.GPos)
}

// fileExportLagOf reads the position a `ship --cursor path` keeps in
// path (otlp.FileCursor) and how far it is behind l. A file that does
// not exist or does not hold a position is an error that says what to
// do.
func fileExportLagOf(ctx context.Context, l ledger, path string) (*exportLag, error) {
	p, ok, err := otlp.FileCursor{Path: path}.Load(ctx)
	switch {
	case errors.Is(err, otlp.ErrConfig):
		return nil, fmt.Errorf("the export cursor %s does not hold a position (a file ship --cursor wrote holds {\"gpos\":N,\"from\":M}); pass the file mcpledger ship --cursor keeps", path)
	case err != nil:
		return nil, fmt.Errorf("the export cursor %s cannot be read: %w; pass the file mcpledger ship --cursor keeps", path, err)
	case !ok:
		return nil, fmt.Errorf("no export cursor at %s: mcpledger ship --cursor %s writes it once the collector acknowledged its first events; check the path, or start that ship", path, path)
	}
	if foreign, err := p.Foreign(ctx, l); err != nil {
		return nil, err
	} else if foreign {
		return nil, fmt.Errorf("the export cursor %s is at gpos %d, where the journal %s holds another event than the one its ship acknowledged: it is another journal's; pass the --journal its ship reads", path, p.GPos, l.Path())
	}
	lag, err := lagAfter(ctx, l, p.GPos)
	if err != nil {
		return nil, err
	}
	if lag.Events == 0 {
		last, err := lastGPos(ctx, l)
		if err != nil {
			return nil, err
		}
		if p.GPos > last {
			return nil, fmt.Errorf("the export cursor %s is at gpos %d, past the last event of the journal %s (gpos %d): it is another journal's; pass the --journal its ship reads", path, p.GPos, l.Path(), last)
		}
	}
	lag.CursorFile = path
	return lag, nil
}

// lagAfter is the lag of an export whose collector acknowledged every
// event of l through gpos.
func lagAfter(ctx context.Context, l ledger, gpos uint64) (*exportLag, error) {
	lag := &exportLag{CursorGPos: gpos}
	oldest, ok, err := otlp.EventAt(ctx, l, gpos+1)
	if err != nil {
		return nil, err
	}
	if !ok {
		return lag, nil
	}
	lag.Oldest = oldest.At().Format(time.RFC3339Nano)
	last, err := lastGPos(ctx, l)
	if err != nil {
		return nil, err
	}
	lag.Events = last - min(last, gpos)
	return lag, nil
}

// lastGPos is the global position of l's last event.
func lastGPos(ctx context.Context, l ledger) (uint64, error) {
	sessions, err := l.Sessions(ctx)
	if err != nil {
		return 0, err
	}
	var last uint64
	for _, s := range sessions {
		last = max(last, s.LastGPos)
	}
	return last, nil
}

// printExportLag writes the line of status of each export that has one:
// the journal's own, then a ship --cursor FILE's.
func printExportLag(w io.Writer, now time.Time, lags ...*exportLag) {
	for _, lag := range lags {
		if lag == nil {
			continue
		}
		label := "export (OTLP)"
		if lag.CursorFile != "" {
			label = "export (OTLP, ship --cursor " + lag.CursorFile + ")"
		}
		if lag.Events == 0 {
			fmt.Fprintf(w, "%s: up to date (every event through gpos %d acknowledged)\n", label, lag.CursorGPos)
			continue
		}
		oldest, _ := time.Parse(time.RFC3339Nano, lag.Oldest)
		fmt.Fprintf(w, "%s: %d events behind, the oldest from %s (%s ago); they are sent when the collector takes them\n",
			label, lag.Events, formatTime(oldest.UnixNano()), now.Sub(oldest).Round(time.Second))
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

// statusFileExportLag is the lag of the export whose position a
// `ship --cursor path` keeps, for status --cursor path.
func (e *env) statusFileExportLag(ctx context.Context, f *commandFlags, path string) (*exportLag, error) {
	l, err := f.openReadOnly(ctx)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return fileExportLagOf(ctx, l, path)
}
