package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mcpledger/mcpledger/events"
)

// Source is the journal as the shipper reads it: *store.Journal, or a
// *store.Reader beside a process that writes it.
type Source interface {
	ReadAll(ctx context.Context, fromGPos uint64, fn func(events.Event) error) error
}

// Position is how far the journal has been shipped: GPos, the last event
// the receiver acknowledged, and From, where to read again to rebuild the
// spans still open at GPos (GPos+1 when none is). ID, when the cursor
// keeps it (a [FileCursor] does), is the ID of the event at GPos: a Ship
// refuses a position whose ID is not its journal's event at GPos (the
// cursor of another journal, which would skip this one's events).
type Position struct {
	GPos, From uint64
	ID         uuid.UUID
}

// Cursor keeps the shipper's [Position] across runs.
type Cursor interface {
	// Load returns the saved position; ok is false when none was saved.
	Load(ctx context.Context) (p Position, ok bool, err error)
	// Save stores p durably before it returns.
	Save(ctx context.Context, p Position) error
}

// Exporter sends mapped records and the metric points at the last event
// of their batch; it returns nil only once the receiver acknowledged all
// of them. [*SDKExporter] is the one that ships.
type Exporter interface {
	Export(ctx context.Context, spans []Span, logs []Log, metrics []metricdata.Metrics) error
}

// batchBudget is an Exporter whose receiver takes requests of a bounded
// size: MaxBatchBytes is the budget of a batch's log record bodies.
type batchBudget interface {
	MaxBatchBytes() int
}

// Options configure a [Shipper]. A zero field gives its default.
type Options struct {
	// Logger gets one line when exports start failing and one when they
	// recover. Nil: silent.
	Logger *slog.Logger
	// Batch is how many events one export carries at most. Default
	// 1024.
	Batch int
	// MaxBytes ends a batch early once its log records' bodies (the
	// events' payloads, most of a request) reach this many bytes, to stay
	// under receivers' request limits. Default: what the exporter's
	// MaxBatchBytes says, if it has that method and says a positive
	// number ([SDKExporter.MaxBatchBytes]), else 4 MiB.
	MaxBytes int
	// Linger is how often a following Ship reads the journal again for
	// new events (and so how long an event may wait to be exported).
	// Default 200 ms.
	Linger time.Duration
	// MinBackoff and MaxBackoff bound the wait between tries of a failed
	// export (doubling from the first to the second). Defaults 100 ms
	// and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// NoMetrics leaves metrics out: no [Metrics] fold, and so no read of
	// the journal from its start when a Ship begins.
	NoMetrics bool
}

// Stats are what one Ship did.
type Stats struct {
	// Events is how many events were shipped (acknowledged), Spans and
	// Logs the records they made, Points the metric points sent with
	// them.
	Events, Spans, Logs, Points int
	// Failures is how many export tries failed.
	Failures int
	// Position is where the cursor stands.
	Position Position
}

// Shipper ships a journal's events after its cursor to an exporter.
type Shipper struct {
	src Source
	cur Cursor
	exp Exporter
	o   Options
	log *slog.Logger
	// metrics is the fold of the journal up to the cursor's GPos (or
	// short of it, when a Ship ended while rebuilding it), kept between
	// Ships of this Shipper; nil: rebuilt from the journal's start by the
	// next Ship.
	metrics *Metrics
}

// NewShipper returns a Shipper of src's events to exp, from cur.
func NewShipper(src Source, cur Cursor, exp Exporter, o *Options) *Shipper {
	s := &Shipper{src: src, cur: cur, exp: exp}
	if o != nil {
		s.o = *o
	}
	if s.o.Batch <= 0 {
		s.o.Batch = 1024
	}
	if s.o.MaxBytes <= 0 {
		s.o.MaxBytes = 4 << 20
		if b, ok := exp.(batchBudget); ok && b.MaxBatchBytes() > 0 {
			s.o.MaxBytes = b.MaxBatchBytes()
		}
	}
	if s.o.Linger <= 0 {
		s.o.Linger = 200 * time.Millisecond
	}
	if s.o.MinBackoff <= 0 {
		s.o.MinBackoff = 100 * time.Millisecond
	}
	if s.o.MaxBackoff < s.o.MinBackoff {
		s.o.MaxBackoff = max(30*time.Second, s.o.MinBackoff)
	}
	s.log = s.o.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// item is what the reading goroutine hands over: an event, the end of
// one read of the journal while following (pass: export what was read),
// or the end of the reading (end, with err nil at the journal's end).
type item struct {
	e    events.Event
	pass bool
	end  bool
	err  error
}

// Ship exports the events after the cursor, in batches, saving the
// cursor after each batch the receiver acknowledged. Without follow it
// returns at the journal's end; with follow it waits for new events until
// ctx ends. A failing export is retried with backoff until it succeeds or
// ctx ends: the backlog stays in the journal. What was acknowledged is
// never exported again by the next Ship; what was not is, with the same
// IDs. The end of ctx ends Ship without an error.
func (s *Shipper) Ship(ctx context.Context, follow bool) (Stats, error) {
	st, err := s.ship(ctx, follow)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = nil
	}
	return st, err
}

func (s *Shipper) ship(ctx context.Context, follow bool) (Stats, error) {
	var st Stats
	pos, ok, err := s.cur.Load(ctx)
	if err != nil {
		return st, fmt.Errorf("otlp: reading the export cursor: %w", err)
	}
	if !ok {
		pos = Position{GPos: 0, From: 1}
	}
	if err := s.checkOwn(ctx, pos); err != nil {
		return st, err
	}
	st.Position = pos
	// The metrics are a fold of the journal from its start up to the
	// cursor: this Shipper's from its last Ship, else a new one. One
	// behind the cursor (new, or its rebuild cut short) folds the events
	// up to the cursor again, read from where it stands (the events
	// before From feed the fold only).
	from, refold := pos.From, uint64(0)
	fold := s.metrics
	s.metrics = nil
	if !s.o.NoMetrics {
		if fold == nil || fold.GPos() > pos.GPos {
			fold = NewMetrics() // ahead: it folded a batch never acknowledged
		}
		if fold.GPos() < pos.GPos {
			from, refold = min(from, fold.GPos()+1), pos.GPos
		}
	}
	defer func() {
		if fold != nil && fold.GPos() <= st.Position.GPos {
			s.metrics = fold // kept for the next Ship: not ahead of the cursor
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The reading goroutine runs one batch ahead of the exports.
	items := make(chan item, s.o.Batch)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.read(ctx, from, follow, items)
	}()
	defer func() { cancel(); <-done }()

	m := NewMapper()
	b := batch{fold: fold}
	for {
		var it item
		select {
		case it = <-items:
		case <-ctx.Done():
			return st, nil
		}
		if it.pass || it.end {
			if err := s.flush(ctx, m, &b, &st); err != nil {
				return st, err
			}
			if it.end && it.err != nil {
				return st, fmt.Errorf("otlp: reading the journal: %w", it.err)
			}
			if it.end {
				return st, nil
			}
			continue
		}
		if it.e.GPos <= refold && it.e.GPos > fold.GPos() {
			fold.Fold(it.e) // shipped before: read again for the fold
		}
		if it.e.GPos < pos.From {
			continue
		}
		spans, rec := m.Map(it.e)
		if it.e.GPos <= pos.GPos {
			continue // shipped before: read again to rebuild open spans
		}
		b.add(it.e, spans, rec)
		if b.events >= s.o.Batch || b.bytes >= s.o.MaxBytes {
			if err := s.flush(ctx, m, &b, &st); err != nil {
				return st, err
			}
		}
	}
}

// read sends the events from gpos from on to items, then the end; with
// follow, it reads again every Linger from where it stopped, sending a
// pass item after each read, until ctx ends. (Polling, not Follow: a
// follower woken by every commit costs a busy writer more than one read
// per Linger.)
func (s *Shipper) read(ctx context.Context, from uint64, follow bool, items chan<- item) {
	send := func(it item) bool {
		select {
		case items <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		err := s.src.ReadAll(ctx, from, func(e events.Event) error {
			from = e.GPos + 1
			if !send(item{e: e}) {
				return ctx.Err()
			}
			return nil
		})
		if err != nil || !follow {
			send(item{end: true, err: err})
			return
		}
		if !send(item{pass: true}) {
			return
		}
		t := time.NewTimer(s.o.Linger)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// batch is the records of the events read since the last export, and
// their events while the metrics fold has not taken them.
type batch struct {
	spans  []Span
	logs   []Log
	evs    []events.Event
	last   uint64
	lastID uuid.UUID // the ID of the event at last
	events int
	bytes  int
	// fold is the metrics fold (nil: no metrics); points its points at
	// last, once the batch's events are folded.
	fold   *Metrics
	points []metricdata.Metrics
}

func (b *batch) add(e events.Event, spans []Span, rec Log) {
	b.spans = append(b.spans, spans...)
	b.logs = append(b.logs, rec)
	if b.fold != nil {
		b.evs = append(b.evs, e)
	}
	b.last, b.lastID = e.GPos, e.ID
	b.events++
	b.bytes += len(rec.Body)
}

// foldIn folds the batch's events, once, and takes the points at its last
// event: a retried export sends the same points.
func (b *batch) foldIn() {
	if b.fold == nil || len(b.evs) == 0 {
		return
	}
	for _, e := range b.evs {
		b.fold.Fold(e)
	}
	clear(b.evs)
	b.evs = b.evs[:0]
	b.points = b.fold.Points()
}

// flush exports b until the receiver acknowledges it, then saves the
// cursor. It returns an error only when ctx ends or the cursor cannot be
// saved.
func (s *Shipper) flush(ctx context.Context, m *Mapper, b *batch, st *Stats) error {
	if b.events == 0 {
		return nil
	}
	b.foldIn()
	if err := s.export(ctx, b, st); err != nil {
		return err
	}
	p := Position{GPos: b.last, From: m.From(), ID: b.lastID}
	if p.From == 0 {
		p.From = b.last + 1
	}
	if err := s.cur.Save(ctx, p); err != nil {
		return fmt.Errorf("otlp: saving the export cursor at %d (the events after %d will be sent again): %w", b.last, st.Position.GPos, err)
	}
	st.Position = p
	st.Events += b.events
	st.Spans += len(b.spans)
	st.Logs += len(b.logs)
	st.Points += points(b.points)
	*b = batch{spans: b.spans[:0], logs: b.logs[:0], evs: b.evs[:0], fold: b.fold}
	return nil
}

// export tries b until it is acknowledged or ctx ends, logging the first
// failure of an episode and its end.
func (s *Shipper) export(ctx context.Context, b *batch, st *Stats) error {
	wait := s.o.MinBackoff
	var since time.Time
	failed := 0
	for {
		err := s.exp.Export(ctx, b.spans, b.logs, b.points)
		if err == nil {
			if failed > 0 {
				s.log.Info("otlp export recovered: the backlog is being sent", "failed_tries", failed, "after", time.Since(since).Round(time.Millisecond))
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st.Failures++
		if failed == 0 {
			since = time.Now()
			s.log.Warn("otlp export failing: events stay in the journal and are sent when the collector takes them; retrying with backoff",
				"error", err, "from_gpos", b.last-uint64(b.events)+1)
		}
		failed++
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		wait = min(wait*2, s.o.MaxBackoff)
	}
}

// points counts the data points of ms.
func points(ms []metricdata.Metrics) int {
	n := 0
	for _, m := range ms {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			n += len(d.DataPoints)
		case metricdata.Sum[int64]:
			n += len(d.DataPoints)
		case metricdata.Gauge[int64]:
			n += len(d.DataPoints)
		}
	}
	return n
}

// errFirst stops a read at its first event.
var errFirst = errors.New("otlp: first event read")

// EventAt returns the first event of src at or after gpos; ok is false
// when src holds none.
func EventAt(ctx context.Context, src Source, gpos uint64) (e events.Event, ok bool, err error) {
	err = src.ReadAll(ctx, gpos, func(at events.Event) error {
		e, ok = at, true
		return errFirst
	})
	if errors.Is(err, errFirst) {
		err = nil
	}
	return e, ok, err
}

// Foreign reports whether src holds, at p.GPos, another event than the
// one p names by its ID: p is then another journal's position. A position
// without an ID, or whose event src no longer holds (archived away), is
// not foreign.
func (p Position) Foreign(ctx context.Context, src Source) (bool, error) {
	if p.ID == uuid.Nil || p.GPos == 0 {
		return false, nil
	}
	at, ok, err := EventAt(ctx, src, p.GPos)
	return ok && at.GPos == p.GPos && at.ID != p.ID, err
}

// checkOwn refuses pos if it names, by its ID, an event other than the
// journal's at pos.GPos (as Position.Foreign), or a position past the
// journal's last event: the cursor of another journal.
func (s *Shipper) checkOwn(ctx context.Context, pos Position) error {
	if pos.ID == uuid.Nil || pos.GPos == 0 {
		return nil
	}
	at, found, err := EventAt(ctx, s.src, pos.GPos)
	switch {
	case err != nil:
		return fmt.Errorf("otlp: reading the event at the export cursor (gpos %d): %w", pos.GPos, err)
	case !found:
		return fmt.Errorf("%w: the export cursor is at gpos %d, past the journal's last event: it is another journal's cursor; give the cursor file of this journal's ship, or a new file to ship this journal from its start", ErrConfig, pos.GPos)
	case at.GPos == pos.GPos && at.ID != pos.ID:
		return fmt.Errorf("%w: the export cursor is at gpos %d, where this journal holds event %s, not %s: it is another journal's cursor; give the cursor file of this journal's ship, or a new file to ship this journal from its start", ErrConfig, pos.GPos, at.ID, pos.ID)
	}
	return nil
}
