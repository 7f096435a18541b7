package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/mcpledger/mcpledger/export/otlp"
	"github.com/mcpledger/mcpledger/store"
)

// shipCursor is the name of the export's cursor in the journal.
const shipCursor = "otlp"

// ShipCommand ships the journal to an OpenTelemetry collector.
type ShipCommand struct {
	env *env
}

// Run runs `ship [--follow] [--otlp-endpoint URL] [--otlp-protocol PROTOCOL] [--cursor FILE]`.
//
// Without --cursor it holds the journal for writing (as run does) and
// keeps its position in the journal's cursors bucket: for a journal no
// process holds (a backfill, a copy). Beside a run or serve that holds the
// journal it cannot write it, so it reads through a store.Reader (never
// blocking the writer) and keeps its position in the file --cursor names.
func (c *ShipCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("ship", "[--follow] [--otlp-endpoint URL] [--otlp-protocol PROTOCOL] [--cursor FILE]")
	follow := f.Bool("follow", false, "after the stored events, ship new ones as they are committed, until interrupted")
	endpoint := f.String("otlp-endpoint", "", "the collector's `URL` (default $OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318, or localhost:4317 over gRPC)")
	protocol := f.String("otlp-protocol", "", otlpProtocolUsage)
	cursorFile := f.String("cursor", "", "keep the export position in `FILE`, not in the journal: to ship beside a running run or serve")
	if err := f.parse(args); err != nil {
		return err
	}
	exp, err := otlp.NewExporter(ctx, otlp.ExporterOptions{Protocol: otlp.Protocol(*protocol), Endpoint: *endpoint, NoLogs: logsOff(c.env)})
	if err != nil {
		return err
	}
	defer func() { _ = exp.Shutdown(context.WithoutCancel(ctx)) }()

	var src otlp.Source
	var cur otlp.Cursor
	if *cursorFile == "" {
		// A journal to ship must exist: openWritable would create one.
		path, from, err := f.journalPath()
		if err != nil {
			return err
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no journal at %s (from %s); pass --journal PATH or set MCPLEDGER_JOURNAL", path, from)
		}
		w, _, err := f.openWritable()
		if errors.Is(err, store.ErrLocked) {
			return fmt.Errorf("%w\n(to ship beside it, keep the export position in a file of its own: mcpledger ship --cursor FILE)", err)
		}
		if err != nil {
			return err
		}
		defer w.Close()
		src, cur = w.Journal, journalCursor{w.Journal}
	} else {
		r, err := f.openReadOnly(ctx)
		if err != nil {
			return err
		}
		defer r.Close()
		src, cur = r, otlp.FileCursor{Path: *cursorFile}
	}
	logger := slog.New(slog.NewTextHandler(c.env.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	st, err := otlp.NewShipper(src, cur, exp, &otlp.Options{Logger: logger, NoMetrics: metricsOff(c.env)}).Ship(ctx, *follow)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.env.stdout, "shipped %d events (%d spans, %d log records, %d metric points); the export cursor is at gpos %d\n",
		st.Events, st.Spans, st.Logs, st.Points, st.Position.GPos)
	return err
}

// journalCursor keeps the export's position in the journal's cursors
// bucket (otlp.Cursor over store.Journal).
type journalCursor struct{ j *store.Journal }

func (c journalCursor) Load(ctx context.Context) (otlp.Position, bool, error) {
	cur, err := c.j.Cursor(ctx, shipCursor)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return otlp.Position{}, false, nil
	case errors.Is(err, store.ErrCursorDamaged):
		return otlp.Position{}, false, nil // ship again from the start: at least once
	case err != nil:
		return otlp.Position{}, false, err
	}
	return otlp.Position{GPos: cur.GPos, From: cur.From}, true, nil
}

func (c journalCursor) Save(ctx context.Context, p otlp.Position) error {
	return c.j.SaveCursor(ctx, shipCursor, store.Cursor{GPos: p.GPos, From: p.From})
}
