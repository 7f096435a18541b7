package main

// `mcpledger ship`'s metrics against an OTLP/HTTP receiver in the test
// (no Jaeger: it stores no metrics): the points decoded as a backend
// would read them.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpledger/mcpledger/events"
)

// metricsReceiver acknowledges every OTLP/HTTP request and keeps the
// metric points it received, a line each: series, time, value.
type metricsReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	points []string
}

func newMetricsReceiver(t *testing.T) *metricsReceiver {
	r := &metricsReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		if req.URL.Path != "/v1/metrics" {
			return // traces and logs: acknowledged (an empty response)
		}
		var m colmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, rm := range m.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, mt := range sm.Metrics {
					switch d := mt.Data.(type) {
					case *metricspb.Metric_Histogram:
						for _, p := range d.Histogram.DataPoints {
							r.points = append(r.points, fmt.Sprintf("%s{%s} @%d..%d count=%d sum=%g", mt.Name, attrsOf(p.Attributes),
								p.StartTimeUnixNano, p.TimeUnixNano, p.Count, p.GetSum()))
						}
					case *metricspb.Metric_Sum:
						for _, p := range d.Sum.DataPoints {
							r.points = append(r.points, fmt.Sprintf("%s{%s} @%d..%d %d", mt.Name, attrsOf(p.Attributes),
								p.StartTimeUnixNano, p.TimeUnixNano, p.GetAsInt()))
						}
					case *metricspb.Metric_Gauge:
						for _, p := range d.Gauge.DataPoints {
							r.points = append(r.points, fmt.Sprintf("%s{%s} @%d %d", mt.Name, attrsOf(p.Attributes), p.TimeUnixNano, p.GetAsInt()))
						}
					}
				}
			}
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func attrsOf(kvs []*commonpb.KeyValue) string {
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Key+"="+kv.Value.GetStringValue())
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// take returns the points received so far and forgets them.
func (r *metricsReceiver) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.points
	r.points = nil
	return out
}

// TestShipMetrics: `ship` sends, with the spans and logs, the journal's
// metrics: each call once in mcp.client.operation.duration with the
// conventions' attributes, the server's MCP session, the decisions. A
// second ship of the whole journal (a fresh cursor: a resend) sends the
// same cumulative points, same times and values, so a backend keeping
// the latest counts nothing twice. OTEL_METRICS_EXPORTER=none sends
// none.
func TestShipMetrics(t *testing.T) {
	dir := t.TempDir()
	jp := filepath.Join(dir, "journal.db")
	j := mustCreate(t, jp)
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	evs := []events.Event{
		events.New(at(0), "", &events.SessionStarted{Seed: 1}),
		events.New(at(1), "good", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Trigger: "config", Attempt: 1}),
		events.New(at(2), "good", &events.TransportOpened{Attempt: 1, Transport: events.TransportStdio}),
		events.New(at(3), "good", &events.HandshakeCompleted{Attempt: 1, ProtocolVersion: "2025-11-25"}),
		events.New(at(4), "good", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateReady, Trigger: "handshake", Attempt: 1}),
		events.New(at(5), "good", &events.CallDecided{CallID: "d", Tool: "rm", Decision: events.CallDeny, By: "user:cli", Policy: "ask"}),
	}
	for i := range 3 {
		id := fmt.Sprint("c", i)
		evs = append(evs,
			events.New(at(10+10*i), "good", &events.CallStarted{CallID: id, Tool: "echo", Attempt: 1}),
			events.New(at(15+10*i), "good", &events.CallFinished{CallID: id, Outcome: events.OutcomeOK, DurationNs: 5e6}))
	}
	evs = append(evs,
		events.New(at(2004), "good", &events.ServerTransitioned{From: events.StateReady, To: events.StateStopped, Trigger: "stop", Reason: events.ReasonShutdown, Attempt: 1}),
		events.New(at(2005), "", &events.SessionStopped{Reason: events.ReasonShutdown}))
	for i := range evs {
		evs[i].ID = events.NewID()
	}
	appendAll(t, j, events.NewID(), evs...)
	j.Close()

	rcv := newMetricsReceiver(t)
	r := runCLI(t, "ship", "--journal", jp, "--otlp-endpoint", rcv.URL)
	if r.err != nil || !strings.Contains(r.stdout, fmt.Sprintf("shipped %d events", len(evs))) || !strings.Contains(r.stdout, "metric points") {
		t.Fatalf("ship: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	first := rcv.take()
	end := at(2005).UnixNano()
	start := t0.UnixNano()
	for _, want := range []string{
		fmt.Sprintf("mcp.client.operation.duration{gen_ai.operation.name=execute_tool,gen_ai.tool.name=echo,mcp.method.name=tools/call,mcp.protocol.version=2025-11-25,mcpledger.server=good,network.transport=pipe} @%d..%d count=3 sum=0.015", start, end),
		fmt.Sprintf("mcp.client.session.duration{mcp.protocol.version=2025-11-25,mcpledger.server=good,network.transport=pipe} @%d..%d count=1 sum=2", start, end),
		fmt.Sprintf("mcpledger.call.decisions{mcpledger.call.decision=deny,mcpledger.call.policy=ask,mcpledger.server=good} @%d..%d 1", start, end),
		fmt.Sprintf("mcpledger.servers{mcpledger.server.state=ready} @%d 0", end),
	} {
		if !slices.Contains(first, want) {
			t.Errorf("the receiver has no point\n  %s\nit has:\n  %s", want, strings.Join(first, "\n  "))
		}
	}

	// The whole journal again, from a fresh cursor file: the same points.
	r = runCLI(t, "ship", "--journal", jp, "--otlp-endpoint", rcv.URL, "--cursor", filepath.Join(dir, "again.cursor"))
	if r.err != nil {
		t.Fatalf("ship again: %v\n%s", r.err, r.stderr)
	}
	if again := rcv.take(); !slices.Equal(again, first) {
		t.Errorf("a resend of the journal sent other points:\n  %s\nthe first time:\n  %s", strings.Join(again, "\n  "), strings.Join(first, "\n  "))
	}

	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	r = runCLI(t, "ship", "--journal", jp, "--otlp-endpoint", rcv.URL, "--cursor", filepath.Join(dir, "none.cursor"))
	if got := rcv.take(); r.err != nil || len(got) != 0 || !strings.Contains(r.stdout, " 0 metric points") {
		t.Errorf("ship with OTEL_METRICS_EXPORTER=none: %v, %d points\n%s", r.err, len(got), r.stdout)
	}
}
