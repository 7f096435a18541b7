package otlp_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/google/uuid"
	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/export/otlp"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/tracectx"
)

// receiver is an OTLP/HTTP receiver: it decodes what the SDK's exporters
// send and keeps the span IDs and the event IDs of the log records it
// acknowledged. fail, while set, is the status it answers instead.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	fail     int
	failN    int    // requests refused so far
	missing  string // a path answered 404, as a receiver without that pipeline
	spans    map[string]int
	names    map[string]string // span ID → name
	nevents  map[string]int    // span ID → span events
	parents  map[string]string // span ID → "trace/parent span/tracestate"
	logs     map[string]int    // event ID → times received
	requests int
	// points is every metric point received: series → its time (unix
	// ns) → the value at that time; conflicts, points received again
	// for the same series and time with another value or start.
	points    map[string]map[uint64]string
	conflicts []string
	resent    int // points received again with the same value
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{spans: map[string]int{}, names: map[string]string{}, logs: map[string]int{}, nevents: map[string]int{},
		parents: map[string]string{}, points: map[string]map[uint64]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	if r.fail != 0 {
		r.failN++
		http.Error(w, "refused by the test", r.fail)
		return
	}
	if req.URL.Path == r.missing {
		r.failN++
		http.NotFound(w, req)
		return
	}
	switch req.URL.Path {
	case "/v1/traces":
		var m coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &m); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for _, rs := range m.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					id := hex.EncodeToString(s.SpanId)
					r.spans[id]++
					r.names[id] = s.Name
					r.nevents[id] = len(s.Events)
					r.parents[id] = hex.EncodeToString(s.TraceId) + "/" + hex.EncodeToString(s.ParentSpanId) + "/" + s.TraceState
				}
			}
		}
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	case "/v1/logs":
		var m collogs.ExportLogsServiceRequest
		if err := proto.Unmarshal(body, &m); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for _, rl := range m.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				for _, l := range sl.LogRecords {
					for _, kv := range l.Attributes {
						if kv.Key == "mcpledger.event.id" {
							r.logs[kv.Value.GetStringValue()]++
						}
					}
				}
			}
		}
		b, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	case "/v1/metrics":
		r.metrics(w, body)
	default:
		http.NotFound(w, req)
	}
}

func (r *receiver) setFail(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = code
}

func (r *receiver) counts() (spans, logs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans), len(r.logs)
}

// journalCursor is cmd/mcpledger's adapter of the journal's cursor.
type journalCursor struct{ j *store.Journal }

func (c journalCursor) Load(ctx context.Context) (otlp.Position, bool, error) {
	cur, err := c.j.Cursor(ctx, "otlp")
	if errors.Is(err, store.ErrNotFound) {
		return otlp.Position{}, false, nil
	}
	return otlp.Position{GPos: cur.GPos, From: cur.From}, err == nil, err
}

func (c journalCursor) Save(ctx context.Context, p otlp.Position) error {
	return c.j.SaveCursor(ctx, "otlp", store.Cursor{GPos: p.GPos, From: p.From})
}

// journalOf writes evs into a new journal file, each in its session.
func journalOf(t *testing.T, evs []events.Event) *store.Journal {
	t.Helper()
	j, err := store.Open(filepath.Join(t.TempDir(), "journal.db"), &store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	appendTo(t, j, evs)
	return j
}

func appendTo(t *testing.T, j *store.Journal, evs []events.Event) {
	t.Helper()
	for _, e := range evs {
		sid := e.Session
		e.Session, e.Seq, e.GPos = [16]byte{}, 0, 0
		if _, err := j.Append(t.Context(), sid, store.Any, []events.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
}

func exporter(t *testing.T, endpoint string) *otlp.SDKExporter {
	t.Helper()
	x, err := otlp.NewExporter(t.Context(), otlp.ExporterOptions{Endpoint: endpoint, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Shutdown(context.Background()) })
	return x
}

// syncBuffer is a log destination the shipper and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func fastOptions(logs io.Writer) *otlp.Options {
	return &otlp.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Batch: 4, Linger: 20 * time.Millisecond,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
}

// TestShipBackfillThenMore: a backfill sends every span and one log record
// per event, and saves the cursor at the last event; events appended later
// are all that the next Ship sends.
func TestShipBackfillThenMore(t *testing.T) {
	evs := callEvents()
	j := journalOf(t, evs[:7]) // call c2 started, not finished
	rcv := newReceiver(t)
	var logs syncBuffer
	sh := otlp.NewShipper(j, journalCursor{j}, exporter(t, rcv.URL), fastOptions(&logs))
	st, err := sh.Ship(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	// The denied call is the only span ended by then.
	if spans, lg := rcv.counts(); spans != 1 || lg != 7 || st.Events != 7 {
		t.Fatalf("after the first Ship: %d spans, %d logs received, stats %+v", spans, lg, st)
	}
	c, err := j.Cursor(t.Context(), "otlp")
	if err != nil || c.GPos != 7 || c.From != 2 {
		// From: the connection span of gh began at gpos 2.
		t.Fatalf("cursor %+v, %v; want gpos 7 from 2", c, err)
	}
	appendTo(t, j, evs[7:])
	before := rcv.requests
	st, err = sh.Ship(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	spans, lg := rcv.counts()
	if spans != 5 || lg != len(evs) || st.Events != len(evs)-7 {
		t.Errorf("after the second Ship: %d spans, %d logs, stats %+v; want 5, %d", spans, lg, st, len(evs))
	}
	for id, n := range rcv.logs {
		if n != 1 {
			t.Errorf("event %s received %d times", id, n)
		}
	}
	for id, n := range rcv.spans {
		if n != 1 {
			t.Errorf("span %s (%s) received %d times", id, rcv.names[id], n)
		}
	}
	if rcv.requests == before {
		t.Error("the second Ship sent nothing")
	}
	if logs.String() != "" {
		t.Errorf("a Ship that did not fail logged:\n%s", logs.String())
	}
}

// TestShipCollectorRefuses: a collector that answers 503, then 400, then
// accepts: the shipper retries the same batch (nothing skipped, the
// cursor not moved while refused), logs one line when the failures begin
// and one when they end, and delivers everything.
func TestShipCollectorRefuses(t *testing.T) {
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusBadRequest} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			evs := callEvents()
			j := journalOf(t, evs)
			rcv := newReceiver(t)
			rcv.setFail(code)
			var logs syncBuffer
			sh := otlp.NewShipper(j, journalCursor{j}, exporter(t, rcv.URL), fastOptions(&logs))
			done := make(chan error, 1)
			var st otlp.Stats
			go func() {
				var err error
				st, err = sh.Ship(t.Context(), false)
				done <- err
			}()
			deadline := time.Now().Add(10 * time.Second)
			for {
				rcv.mu.Lock()
				n := rcv.failN
				rcv.mu.Unlock()
				if n >= 5 || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if _, err := j.Cursor(t.Context(), "otlp"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("cursor saved while the collector refused: %v", err)
			}
			rcv.setFail(0)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if spans, lg := rcv.counts(); spans != 5 || lg != len(evs) {
				t.Errorf("%d spans, %d logs received; want 5, %d", spans, lg, len(evs))
			}
			out := logs.String()
			if strings.Count(out, "otlp export failing") != 1 || strings.Count(out, "otlp export recovered") != 1 || strings.Count(out, "\n") != 2 {
				t.Errorf("want one line when failing and one when recovered, got:\n%s", out)
			}
			if !strings.Contains(out, http.StatusText(code)) && !strings.Contains(out, "refused by the test") {
				t.Errorf("the failure line does not say what the collector answered:\n%s", out)
			}
			if st.Failures < 5 {
				t.Errorf("stats %+v: want at least 5 failures", st)
			}
		})
	}
}

// TestShipUnreachable: with nothing listening, Ship keeps the backlog
// (no cursor), logs once, and ends without error when its context does.
func TestShipUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	j := journalOf(t, callEvents())
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	st, err := otlp.NewShipper(j, journalCursor{j}, exporter(t, "http://"+addr), fastOptions(&logs)).Ship(ctx, false)
	if err != nil || st.Events != 0 || st.Failures < 2 {
		t.Errorf("Ship = %+v, %v; want no error, nothing shipped, several failures", st, err)
	}
	if _, err := j.Cursor(t.Context(), "otlp"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cursor saved with nothing delivered: %v", err)
	}
	if out := logs.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "connection refused") {
		t.Errorf("want one line naming the refused connection, got:\n%s", out)
	}
}

// TestShipFollow: --follow ships events appended while it runs, a part
// batch after Linger, and ends cleanly with its context.
func TestShipFollow(t *testing.T) {
	evs := callEvents()
	j := journalOf(t, evs[:3])
	rcv := newReceiver(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := otlp.NewShipper(j, journalCursor{j}, exporter(t, rcv.URL), fastOptions(io.Discard)).Ship(ctx, true)
		done <- err
	}()
	waitFor(t, func() bool { _, lg := rcv.counts(); return lg == 3 })
	appendTo(t, j, evs[3:])
	waitFor(t, func() bool { s, lg := rcv.counts(); return lg == len(evs) && s == 5 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Follow ended with %v", err)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNewExporterRefusesBadSettings: settings the SDK would ignore with a
// line on stderr, or misread, are refused before anything is read, each
// naming the variable and what to give.
func TestNewExporterRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "no OTLP/JSON exporter"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json", "no OTLP/JSON exporter"},
		{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpcs", "not an OTLP protocol"},
		{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "localhost:4318/v1/metrics", "not an http(s) URL"},
		{"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "5s", "milliseconds"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318", "not an http(s) URL"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s", "milliseconds"},
		{"OTEL_RESOURCE_ATTRIBUTES", "novalue", "key=value"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			_, err := otlp.NewExporter(t.Context(), otlp.ExporterOptions{})
			if !errors.Is(err, otlp.ErrConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.key[:len("OTEL_")]) {
				t.Errorf("NewExporter with %s=%s: %v", tc.key, tc.value, err)
			}
		})
	}
	for _, p := range []string{"http/protobuf", "grpc"} {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", p)
		t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5000")
		x, err := otlp.NewExporter(t.Context(), otlp.ExporterOptions{Endpoint: "http://127.0.0.1:4318"})
		if err != nil {
			t.Errorf("NewExporter with good settings (%s): %v", p, err)
			continue
		}
		_ = x.Shutdown(t.Context())
	}
	if _, err := otlp.NewExporter(t.Context(), otlp.ExporterOptions{Protocol: "http/json"}); !errors.Is(err, otlp.ErrConfig) || !strings.Contains(err.Error(), "--otlp-protocol") {
		t.Errorf("NewExporter with Protocol http/json: %v", err)
	}
	if _, err := otlp.NewExporter(t.Context(), otlp.ExporterOptions{Endpoint: "127.0.0.1:4318"}); !errors.Is(err, otlp.ErrConfig) {
		t.Errorf("NewExporter with an endpoint without a scheme: %v", err)
	}
}

// TestExportKeepsEveryTransition: a connection span with more events
// than the SDK's default limit (128) reaches the receiver with all of
// them: a flapping server's transitions are not dropped.
func TestExportKeepsEveryTransition(t *testing.T) {
	rcv := newReceiver(t)
	x := exporter(t, rcv.URL)
	s := otlp.Span{Name: "connection flappy", Start: 1, End: 1000}
	s.TraceID[0], s.SpanID[0] = 1, 1
	for i := range 300 {
		s.Events = append(s.Events, otlp.SpanEvent{Name: "mcpledger.transition", Time: int64(i + 1)})
	}
	if err := x.Export(t.Context(), []otlp.Span{s}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := rcv.nevents[s.SpanID.String()]; got != 300 {
		t.Errorf("the receiver got %d of the span's 300 events", got)
	}
}

// TestExportTracedSpan: the span of a call made in a caller's trace
// reaches the receiver in that trace, with the caller's span as parent
// and its tracestate; a span of the ledger's own has no parent.
func TestExportTracedSpan(t *testing.T) {
	rcv := newReceiver(t)
	x := exporter(t, rcv.URL)
	m := otlp.NewMapper()
	var spans []otlp.Span
	evs := tracedEvents()
	for _, e := range evs {
		s, _ := m.Map(e)
		spans = append(spans, s...)
	}
	if err := x.Export(t.Context(), spans, nil, nil); err != nil {
		t.Fatal(err)
	}
	_, t1 := tracectx.CallIDs(evs[0].Session, "t1")
	_, t4 := tracectx.CallIDs(evs[0].Session, "t4")
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if got, want := rcv.parents[t1.String()], "4bf92f3577b34da6a3ce929d0e0e4736/00f067aa0ba902b7/congo=t61rcWkgMzE"; got != want {
		t.Errorf("call t1 reached the receiver as %q, want %q (trace/parent/tracestate)", got, want)
	}
	if got := rcv.parents[t4.String()]; !strings.Contains(got, "//") || strings.HasPrefix(got, "4bf92f35") {
		t.Errorf("call t4 (malformed traceparent) reached the receiver as %q, want a root of its own trace", got)
	}
}

// TestShipToReceiverWithoutLogs: a receiver without a logs pipeline
// (Jaeger's default configuration answers 404 on /v1/logs) gets the
// spans again and again and the cursor stays, with a failure line that
// says what to do; with NoLogs (OTEL_LOGS_EXPORTER=none) the spans and
// metrics are delivered and the cursor moves.
func TestShipToReceiverWithoutLogs(t *testing.T) {
	evs := callEvents()
	j := journalOf(t, evs)
	rcv := newReceiver(t)
	rcv.missing = "/v1/logs"
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := otlp.NewShipper(j, journalCursor{j}, exporter(t, rcv.URL), fastOptions(&logs)).Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Cursor(t.Context(), "otlp"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cursor saved while the logs were refused: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "set OTEL_LOGS_EXPORTER=none to send none") || strings.Count(out, "\n") != 1 {
		t.Errorf("want one failure line saying what to do, got:\n%s", out)
	}

	x, err := otlp.NewExporter(t.Context(), otlp.ExporterOptions{Endpoint: rcv.URL, Timeout: 2 * time.Second, NoLogs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Shutdown(context.Background()) })
	st, err := otlp.NewShipper(j, journalCursor{j}, x, fastOptions(&logs)).Ship(t.Context(), false)
	if err != nil || st.Events != len(evs) {
		t.Fatalf("Ship without logs = %+v, %v; want every event shipped", st, err)
	}
	if c, err := j.Cursor(t.Context(), "otlp"); err != nil || c.GPos != uint64(len(evs)) {
		t.Errorf("cursor %+v, %v; want at the last event", c, err)
	}
	if spans, lg := rcv.counts(); spans != 5 || lg != 0 {
		t.Errorf("%d spans, %d logs received; want 5, 0", spans, lg)
	}
}

// TestShipRefusesAnotherJournalsCursor: a cursor file keeps the ID of the
// event at its position, and a Ship of another journal with it (events at
// the same positions, other IDs; or fewer events) is refused and sends
// nothing, where starting at that position would have skipped that
// journal's events. A file written before the ID was kept is not checked;
// the journal it belongs to resumes from it.
func TestShipRefusesAnotherJournalsCursor(t *testing.T) {
	evs := callEvents()
	a := journalOf(t, evs)
	other := make([]events.Event, len(evs))
	for i, e := range evs {
		e.ID = uuid.Nil // the store gives each another
		other[i] = e
	}
	b := journalOf(t, other)
	short := journalOf(t, other[:3])
	rcv := newReceiver(t)
	cur := otlp.FileCursor{Path: filepath.Join(t.TempDir(), "ship.cursor")}
	ship := func(j *store.Journal) error {
		_, err := otlp.NewShipper(j, cur, exporter(t, rcv.URL), fastOptions(io.Discard)).Ship(t.Context(), false)
		return err
	}
	if err := ship(a); err != nil {
		t.Fatal(err)
	}
	p, ok, err := cur.Load(t.Context())
	if !ok || err != nil || p.GPos != uint64(len(evs)) || p.ID != evs[len(evs)-1].ID {
		t.Fatalf("cursor after shipping a: %+v, %v, %v; want gpos %d, the ID of its last event", p, ok, err, len(evs))
	}
	_, sent := rcv.counts()
	for _, tc := range []struct {
		name string
		j    *store.Journal
		want string
	}{
		{"the same positions, other events", b, "where this journal holds event"},
		{"a shorter journal", short, "past the journal's last event"},
	} {
		err := ship(tc.j)
		if !errors.Is(err, otlp.ErrConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "another journal's cursor") {
			t.Errorf("%s: %v; want ErrConfig saying %q", tc.name, err, tc.want)
		}
		if _, n := rcv.counts(); n != sent {
			t.Errorf("%s: %d log records sent", tc.name, n-sent)
		}
		if q, _, _ := cur.Load(t.Context()); q != p {
			t.Errorf("%s: the cursor moved to %+v", tc.name, q)
		}
	}
	if err := ship(a); err != nil {
		t.Errorf("a with its own cursor: %v", err)
	}
	if err := os.WriteFile(cur.Path, []byte(fmt.Sprintf(`{"gpos":%d,"from":%d}`, p.GPos, p.From)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ship(b); err != nil {
		t.Errorf("a cursor file without the ID: %v; want it taken as before", err)
	}
}
