package otlp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/export/otlp"
	"github.com/mcpledger/mcpledger/store"
)

// grpcReceiver serves OTLP/gRPC on a loopback port: each request goes
// to the decoding of an HTTP receiver, so the two count alike (a refusal
// it answers is a gRPC Unavailable). Without logs it does not offer the
// logs service, as a collector without a logs pipeline does not.
type grpcReceiver struct {
	*receiver
	addr   string
	noLogs bool
	srv    *grpc.Server
}

func newGRPCReceiver(t *testing.T, noLogs bool) *grpcReceiver {
	g := &grpcReceiver{receiver: newReceiver(t), noLogs: noLogs}
	g.start(t, "127.0.0.1:0")
	t.Cleanup(g.stop)
	return g
}

// start serves on addr (the same port again after a stop).
func (g *grpcReceiver) start(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g.addr = l.Addr().String()
	g.srv = grpc.NewServer()
	coltrace.RegisterTraceServiceServer(g.srv, grpcTraces{r: g.receiver})
	colmetrics.RegisterMetricsServiceServer(g.srv, grpcMetrics{r: g.receiver})
	if !g.noLogs {
		collogs.RegisterLogsServiceServer(g.srv, grpcLogs{r: g.receiver})
	}
	go func() { _ = g.srv.Serve(l) }()
}

func (g *grpcReceiver) stop() { g.srv.Stop() }

// url is the receiver's address as OTEL_EXPORTER_OTLP_ENDPOINT gives it.
func (g *grpcReceiver) url() string { return "http://" + g.addr }

// take hands a request to the HTTP receiver's decoding at path.
func (r *receiver) take(path string, m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	w := httptest.NewRecorder()
	r.serve(w, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(b)))
	if w.Code != http.StatusOK {
		return status.Error(codes.Unavailable, w.Body.String())
	}
	return nil
}

type grpcTraces struct {
	coltrace.UnimplementedTraceServiceServer
	r *receiver
}

func (g grpcTraces) Export(_ context.Context, m *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	return &coltrace.ExportTraceServiceResponse{}, g.r.take("/v1/traces", m)
}

type grpcLogs struct {
	collogs.UnimplementedLogsServiceServer
	r *receiver
}

func (g grpcLogs) Export(_ context.Context, m *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	return &collogs.ExportLogsServiceResponse{}, g.r.take("/v1/logs", m)
}

type grpcMetrics struct {
	colmetrics.UnimplementedMetricsServiceServer
	r *receiver
}

func (g grpcMetrics) Export(_ context.Context, m *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	return &colmetrics.ExportMetricsServiceResponse{}, g.r.take("/v1/metrics", m)
}

func grpcExporter(t *testing.T, o otlp.ExporterOptions) *otlp.SDKExporter {
	t.Helper()
	o.Timeout = 2 * time.Second
	x, err := otlp.NewExporter(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Shutdown(context.Background()) })
	return x
}

// TestShipOverGRPC: over gRPC (an http:// endpoint: plain text), a Ship
// delivers every span, one log record per event and the metric points,
// and saves the cursor at the last event. The receiver down: the events
// appended meanwhile stay in the journal (the cursor does not move), one
// line says the receiver is unavailable; the receiver back on its port:
// the same exporter reconnects and the backlog is delivered.
func TestShipOverGRPC(t *testing.T) {
	evs := callEvents()
	j := journalOf(t, evs)
	g := newGRPCReceiver(t, false)
	x := grpcExporter(t, otlp.ExporterOptions{Protocol: otlp.GRPC, Endpoint: g.url()})
	var logs syncBuffer
	bounded, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	st, err := otlp.NewShipper(j, journalCursor{j}, x, fastOptions(&logs)).Ship(bounded, false)
	if err != nil || st.Events != len(evs) || st.Points == 0 {
		t.Fatalf("Ship over gRPC = %+v, %v; want every event and some points", st, err)
	}
	spans, lg := g.counts()
	g.mu.Lock()
	points := len(g.points)
	g.mu.Unlock()
	if spans != 5 || lg != len(evs) || points == 0 {
		t.Errorf("the gRPC receiver got %d spans, %d logs, %d series; want 5, %d, some", spans, lg, points, len(evs))
	}
	if c, err := j.Cursor(t.Context(), "otlp"); err != nil || c.GPos != uint64(len(evs)) {
		t.Errorf("cursor %+v, %v; want at the last event", c, err)
	}

	g.stop()
	more := tracedEvents()
	appendTo(t, j, more)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	st, err = otlp.NewShipper(j, journalCursor{j}, x, fastOptions(&logs)).Ship(ctx, false)
	if err != nil || st.Events != 0 || st.Failures < 2 {
		t.Errorf("Ship with the receiver down = %+v, %v; want no error, nothing shipped, several failures", st, err)
	}
	if c, err := j.Cursor(t.Context(), "otlp"); err != nil || c.GPos != uint64(len(evs)) {
		t.Errorf("cursor with the receiver down %+v, %v; want where it was, %d", c, err, len(evs))
	}
	// Unavailable: the connection refused, or, when the export began
	// before the client saw its connection close, EOF.
	if out := logs.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "code = Unavailable") {
		t.Errorf("want one line saying the receiver is unavailable, got:\n%s", out)
	}

	g.start(t, g.addr)
	shipAll(t, j, x, len(more))
	if _, lg := g.counts(); lg != len(evs)+len(more) {
		t.Errorf("the gRPC receiver got %d log records in all, want %d", lg, len(evs)+len(more))
	}
	if c, err := j.Cursor(t.Context(), "otlp"); err != nil || c.GPos != uint64(len(evs)+len(more)) {
		t.Errorf("cursor %+v, %v; want at the last event", c, err)
	}
}

// TestShipOverGRPCFromEnv: OTEL_EXPORTER_OTLP_PROTOCOL=grpc with the
// endpoint in OTEL_EXPORTER_OTLP_ENDPOINT (as most agents set them) sends
// everything over gRPC; OTEL_EXPORTER_OTLP_LOGS_PROTOCOL=http/protobuf
// with OTEL_EXPORTER_OTLP_LOGS_ENDPOINT sends the log records, alone,
// over HTTP.
func TestShipOverGRPCFromEnv(t *testing.T) {
	evs := callEvents()
	g := newGRPCReceiver(t, false)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", g.url())
	j := journalOf(t, evs)
	shipAll(t, j, grpcExporter(t, otlp.ExporterOptions{}), len(evs))
	if spans, lg := g.counts(); spans != 5 || lg != len(evs) {
		t.Errorf("the gRPC receiver got %d spans, %d logs; want 5, %d", spans, lg, len(evs))
	}

	h := newReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", h.URL+"/v1/logs")
	j = journalOf(t, evs)
	shipAll(t, j, grpcExporter(t, otlp.ExporterOptions{}), len(evs))
	if spans, lg := g.counts(); spans != 5 || lg != len(evs) {
		t.Errorf("the gRPC receiver got %d spans, %d logs in all; want 5, %d (its logs of the first journal)", spans, lg, len(evs))
	}
	if spans, lg := h.counts(); spans != 0 || lg != len(evs) {
		t.Errorf("the HTTP receiver got %d spans, %d logs; want 0, %d", spans, lg, len(evs))
	}
}

// shipAll ships j with x, within 10 s, and wants n events shipped.
func shipAll(t *testing.T, j *store.Journal, x *otlp.SDKExporter, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if st, err := otlp.NewShipper(j, journalCursor{j}, x, fastOptions(io.Discard)).Ship(ctx, false); err != nil || st.Events != n {
		t.Fatalf("Ship = %+v, %v; want %d events shipped", st, err, n)
	}
}

// TestShipWrongProtocol: gRPC to an OTLP/HTTP port, OTLP/HTTP to a gRPC
// port, gRPC over TLS to a plain-text port: nothing is delivered, the
// cursor stays, and one line says what to try.
func TestShipWrongProtocol(t *testing.T) {
	h := newReceiver(t)
	g := newGRPCReceiver(t, false)
	for _, tc := range []struct {
		name string
		o    otlp.ExporterOptions
		want string
	}{
		{"grpc to http", otlp.ExporterOptions{Protocol: otlp.GRPC, Endpoint: h.URL}, "answers OTLP/HTTP, not gRPC: give the collector's OTLP/gRPC port, 4317 usually"},
		{"http to grpc", otlp.ExporterOptions{Protocol: otlp.HTTPProtobuf, Endpoint: g.url()}, "answers gRPC, not OTLP/HTTP: set OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
		{"tls to plain", otlp.ExporterOptions{Protocol: otlp.GRPC, Endpoint: "https://" + g.addr}, "give its URL with http://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := journalOf(t, callEvents())
			var logs syncBuffer
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			st, err := otlp.NewShipper(j, journalCursor{j}, grpcExporter(t, tc.o), fastOptions(&logs)).Ship(ctx, false)
			if err != nil || st.Events != 0 || st.Failures < 2 {
				t.Errorf("Ship = %+v, %v; want no error, nothing shipped, several failures", st, err)
			}
			if _, err := j.Cursor(t.Context(), "otlp"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("cursor saved with nothing delivered: %v", err)
			}
			if out := logs.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("want one line saying %q, got:\n%s", tc.want, out)
			}
		})
	}
	if spans, lg := h.counts(); spans+lg != 0 {
		t.Errorf("the HTTP receiver took %d spans, %d logs sent over gRPC", spans, lg)
	}
	if spans, lg := g.counts(); spans+lg != 0 {
		t.Errorf("the gRPC receiver took %d spans, %d logs sent over HTTP", spans, lg)
	}
}

// TestShipOverGRPCWithoutLogs: a gRPC receiver without the logs service
// (a collector without a logs pipeline) gets the spans again and again,
// the cursor stays, and the one failure line says what to do; with
// NoLogs everything else is delivered.
func TestShipOverGRPCWithoutLogs(t *testing.T) {
	evs := callEvents()
	j := journalOf(t, evs)
	g := newGRPCReceiver(t, true)
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	x := grpcExporter(t, otlp.ExporterOptions{Protocol: otlp.GRPC, Endpoint: g.url()})
	if _, err := otlp.NewShipper(j, journalCursor{j}, x, fastOptions(&logs)).Ship(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Cursor(t.Context(), "otlp"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cursor saved while the logs were refused: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "set OTEL_LOGS_EXPORTER=none to send none") || strings.Count(out, "\n") != 1 {
		t.Errorf("want one failure line saying what to do, got:\n%s", out)
	}
	x = grpcExporter(t, otlp.ExporterOptions{Protocol: otlp.GRPC, Endpoint: g.url(), NoLogs: true})
	shipAll(t, j, x, len(evs))
	if c, err := j.Cursor(t.Context(), "otlp"); err != nil || c.GPos != uint64(len(evs)) {
		t.Errorf("cursor %+v, %v; want at the last event", c, err)
	}
}

// TestShipOverGRPCLargeBatches: events whose payloads make a batch of
// the default byte budget bigger than a gRPC receiver takes by default (4
// MiB a message, as a collector's and Jaeger's) are delivered over gRPC,
// every one, in smaller batches (MaxBatchBytes: 2 MiB when the logs go
// over gRPC, else the Shipper's default). One event larger than the
// receiver takes stays in the journal, with one line saying what to do.
func TestShipOverGRPCLargeBatches(t *testing.T) {
	evs := callEvents()
	big := strings.Repeat("x", 300<<10)
	sid := evs[0].Session
	t0 := evs[len(evs)-1].At()
	for i := range 30 {
		e := events.New(t0.Add(time.Duration(i+1)*time.Millisecond), "gh", &events.CallFinished{CallID: fmt.Sprintf("big%d", i),
			Outcome: events.OutcomeOK, Result: events.Blob{Text: big, Size: int64(len(big))}})
		e.Session = sid
		evs = append(evs, e)
	}
	j := journalOf(t, evs)
	g := newGRPCReceiver(t, false)
	x := grpcExporter(t, otlp.ExporterOptions{Protocol: otlp.GRPC, Endpoint: g.url()})
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := otlp.NewShipper(j, journalCursor{j}, x, &otlp.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Ship(ctx, false)
	if err != nil || st.Events != len(evs) || st.Failures != 0 {
		t.Errorf("Ship = %+v, %v; want all %d events, no failure\n%s", st, err, len(evs), logs.String())
	}
	if _, lg := g.counts(); lg != len(evs) {
		t.Errorf("the gRPC receiver got %d log records, want %d", lg, len(evs))
	}
	for _, tc := range []struct {
		o    otlp.ExporterOptions
		want int
	}{
		{otlp.ExporterOptions{Protocol: otlp.GRPC, Endpoint: g.url()}, 2 << 20},
		{otlp.ExporterOptions{Protocol: otlp.GRPC, Endpoint: g.url(), NoLogs: true}, 0},
		{otlp.ExporterOptions{Protocol: otlp.HTTPProtobuf, Endpoint: g.url()}, 0},
	} {
		if got := grpcExporter(t, tc.o).MaxBatchBytes(); got != tc.want {
			t.Errorf("MaxBatchBytes of %+v = %d, want %d", tc.o, got, tc.want)
		}
	}

	huge := strings.Repeat("y", 5<<20)
	e := events.New(t0.Add(time.Second), "gh", &events.CallFinished{CallID: "huge", Outcome: events.OutcomeOK,
		Result: events.Blob{Text: huge, Size: int64(len(huge))}})
	e.Session = sid
	appendTo(t, j, []events.Event{e})
	var logs2 syncBuffer
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	done := make(chan struct{})
	go func() {
		defer close(done)
		st, err = otlp.NewShipper(j, journalCursor{j}, x, fastOptions(&logs2)).Ship(ctx2, false)
	}()
	waitFor(t, func() bool { return strings.Contains(logs2.String(), "otlp export failing") })
	time.Sleep(100 * time.Millisecond) // more tries
	cancel2()
	<-done
	if err != nil || st.Events != 0 || st.Failures == 0 {
		t.Errorf("Ship of a 5 MiB event = %+v, %v; want nothing shipped, failures", st, err)
	}
	if c, err := j.Cursor(t.Context(), "otlp"); err != nil || c.GPos != uint64(len(evs)) {
		t.Errorf("cursor %+v, %v; want where it was, %d", c, err, len(evs))
	}
	if out := logs2.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "raise its limit (a collector's max_recv_msg_size_mib), or send over http/protobuf") {
		t.Errorf("want one line saying what to do, got:\n%.600s", out)
	}
}
