package otlp_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/export/otlp"
	"github.com/mcpledger/mcpledger/store"
)

// benchJournal writes a journal of n events: sessions of tool calls
// (call.started, call.finished) between connection transitions.
func benchJournal(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "journal.db")
	j, err := store.Open(path, &store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	sid := events.NewID()
	var batch []events.Event
	seq := 0
	add := func(p events.Payload) {
		e := events.New(t0.Add(time.Duration(seq)*time.Millisecond), "srv", p)
		e.ID = events.NewID()
		batch = append(batch, e)
		seq++
	}
	add(&events.SessionStarted{Seed: 1})
	add(&events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Trigger: "config", Attempt: 1})
	for seq < n {
		id := uuid.NewString()
		add(&events.CallStarted{CallID: id, Tool: "echo", Name: "mcp__srv__echo", Args: events.Blob{Text: `{"message":"hello"}`, Size: 19}})
		add(&events.CallFinished{CallID: id, Outcome: events.OutcomeOK, Result: events.Blob{Text: `{"content":[{"type":"text","text":"hello"}]}`, Size: 44}, DurationNs: 1e6})
		if len(batch) >= 1000 {
			if _, err := j.Append(context.Background(), sid, store.Any, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if _, err := j.Append(context.Background(), sid, store.Any, batch); err != nil {
			b.Fatal(err)
		}
	}
	return path
}

// memCursor keeps a position in memory: every run ships from the start.
type memCursor struct{ p otlp.Position }

func (c *memCursor) Load(context.Context) (otlp.Position, bool, error) { return c.p, false, nil }
func (c *memCursor) Save(_ context.Context, p otlp.Position) error     { c.p = p; return nil }

// atCursor is a cursor that stands at a position: a restart with nothing
// new to ship.
type atCursor struct{ p otlp.Position }

func (c atCursor) Load(context.Context) (otlp.Position, bool, error) { return c.p, true, nil }
func (c atCursor) Save(context.Context, otlp.Position) error         { return nil }

// BenchmarkShipBackfill: a backfill of a journal of calls to an OTLP/HTTP
// receiver that reads and acknowledges every request, with metrics and
// without, against its baseline in the same run, the plain ReadAll of
// the same journal (events/s for all). Start is a Ship whose cursor
// stands at the journal's end (a restart with nothing new): with
// metrics it folds the whole journal again, without it reads nothing
// (ms/op).
func BenchmarkShipBackfill(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		path := benchJournal(b, n)
		j, err := store.Open(path, &store.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("ReadAll/events=%d", n), func(b *testing.B) {
			for b.Loop() {
				count := 0
				if err := j.ReadAll(b.Context(), 1, func(events.Event) error { count++; return nil }); err != nil || count != n {
					b.Fatal(count, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		for _, metrics := range []bool{true, false} {
			b.Run(fmt.Sprintf("Ship/events=%d/metrics=%t", n, metrics), func(b *testing.B) {
				x, err := otlp.NewExporter(b.Context(), otlp.ExporterOptions{Endpoint: srv.URL})
				if err != nil {
					b.Fatal(err)
				}
				defer x.Shutdown(context.Background())
				for b.Loop() {
					st, err := otlp.NewShipper(j, &memCursor{}, x, &otlp.Options{NoMetrics: !metrics}).Ship(b.Context(), false)
					if err != nil || st.Events != n || (st.Points > 0) != metrics {
						b.Fatal(st, err)
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
		for _, metrics := range []bool{true, false} {
			b.Run(fmt.Sprintf("Start/events=%d/metrics=%t", n, metrics), func(b *testing.B) {
				x, err := otlp.NewExporter(b.Context(), otlp.ExporterOptions{Endpoint: srv.URL})
				if err != nil {
					b.Fatal(err)
				}
				defer x.Shutdown(context.Background())
				end := atCursor{otlp.Position{GPos: uint64(n), From: uint64(n) + 1}}
				for b.Loop() {
					st, err := otlp.NewShipper(j, end, x, &otlp.Options{NoMetrics: !metrics}).Ship(b.Context(), false)
					if err != nil || st.Events != 0 {
						b.Fatal(st, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/start")
			})
		}
		srv.Close()
		j.Close()
	}
}

// BenchmarkMapAndFold: the cost per event of the span and log mapping
// (Mapper.Map) and, beside it, of the metrics fold (Metrics.Fold), over
// the same events of a journal of calls, in memory.
func BenchmarkMapAndFold(b *testing.B) {
	const n = 100_000
	j, err := store.Open(benchJournal(b, n), &store.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]events.Event, 0, n)
	if err := j.ReadAll(b.Context(), 1, func(e events.Event) error { evs = append(evs, e); return nil }); err != nil {
		b.Fatal(err)
	}
	j.Close()
	b.Run("Map", func(b *testing.B) {
		for b.Loop() {
			m := otlp.NewMapper()
			for _, e := range evs {
				m.Map(e)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
	})
	b.Run("Fold", func(b *testing.B) {
		for b.Loop() {
			m := otlp.NewMetrics()
			for _, e := range evs {
				m.Fold(e)
			}
			if len(m.Points()) == 0 {
				b.Fatal("no points")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
	})
}

// BenchmarkShipProtocol: a backfill of a journal of calls, metrics
// included, to an OTLP/HTTP receiver and to an OTLP/gRPC one, in the
// same run, each decoding every request and acknowledging it (events/s).
func BenchmarkShipProtocol(b *testing.B) {
	const n = 100_000
	j, err := store.Open(benchJournal(b, n), &store.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m proto.Message
		switch r.URL.Path {
		case "/v1/traces":
			m = &coltrace.ExportTraceServiceRequest{}
		case "/v1/logs":
			m = &collogs.ExportLogsServiceRequest{}
		default:
			m = &colmetrics.ExportMetricsServiceRequest{}
		}
		if err := proto.Unmarshal(body, m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer h.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(g, discardTraces{})
	collogs.RegisterLogsServiceServer(g, discardLogs{})
	colmetrics.RegisterMetricsServiceServer(g, discardMetrics{})
	go func() { _ = g.Serve(l) }()
	defer g.Stop()
	for _, tc := range []struct {
		name     string
		p        otlp.Protocol
		endpoint string
	}{{"http", otlp.HTTPProtobuf, h.URL}, {"grpc", otlp.GRPC, "http://" + l.Addr().String()}} {
		b.Run(tc.name, func(b *testing.B) {
			x, err := otlp.NewExporter(b.Context(), otlp.ExporterOptions{Protocol: tc.p, Endpoint: tc.endpoint})
			if err != nil {
				b.Fatal(err)
			}
			defer x.Shutdown(context.Background())
			for b.Loop() {
				st, err := otlp.NewShipper(j, &memCursor{}, x, nil).Ship(b.Context(), false)
				if err != nil || st.Events != n || st.Failures != 0 {
					b.Fatal(st, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

type discardTraces struct {
	coltrace.UnimplementedTraceServiceServer
}

func (discardTraces) Export(context.Context, *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	return &coltrace.ExportTraceServiceResponse{}, nil
}

type discardLogs struct {
	collogs.UnimplementedLogsServiceServer
}

func (discardLogs) Export(context.Context, *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	return &collogs.ExportLogsServiceResponse{}, nil
}

type discardMetrics struct {
	colmetrics.UnimplementedMetricsServiceServer
}

func (discardMetrics) Export(context.Context, *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}
