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
	// byTime is every point received: series → time → its line; clash,
	// a point received again at the same time with another value.
	byTime map[string]map[uint64]string
	clash  []string
}

// keep notes one point of series at time t.
func (r *metricsReceiver) keep(series string, t uint64, line string) {
	r.points = append(r.points, line)
	if old, ok := r.byTime[series][t]; ok && old != line {
		r.clash = append(r.clash, old+" then "+line)
	}
	if r.byTime[series] == nil {
		r.byTime[series] = map[uint64]string{}
	}
	r.byTime[series][t] = line
}

// latest is the newest point of each series: what a backend keeping the
// latest cumulative value shows.
func (r *metricsReceiver) latest() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, byTime := range r.byTime {
		var last uint64
		for t := range byTime {
			last = max(last, t)
		}
		out = append(out, byTime[last])
	}
	slices.Sort(out)
	return out
}

func newMetricsReceiver(t *testing.T) *metricsReceiver {
	r := &metricsReceiver{byTime: map[string]map[uint64]string{}}
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
							series := mt.Name + "{" + attrsOf(p.Attributes) + "}"
							r.keep(series, p.TimeUnixNano, fmt.Sprintf("%s @%d..%d count=%d sum=%g", series,
								p.StartTimeUnixNano, p.TimeUnixNano, p.Count, p.GetSum()))
						}
					case *metricspb.Metric_Sum:
						for _, p := range d.Sum.DataPoints {
							series := mt.Name + "{" + attrsOf(p.Attributes) + "}"
							r.keep(series, p.TimeUnixNano, fmt.Sprintf("%s @%d..%d %d", series, p.StartTimeUnixNano, p.TimeUnixNano, p.GetAsInt()))
						}
					case *metricspb.Metric_Gauge:
						for _, p := range d.Gauge.DataPoints {
							series := mt.Name + "{" + attrsOf(p.Attributes) + "}"
							r.keep(series, p.TimeUnixNano, fmt.Sprintf("%s @%d %d", series, p.TimeUnixNano, p.GetAsInt()))
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
		events.New(at(2), "good", &events.ProcessSpawned{Attempt: 1, PID: 42}),
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

// TestLiveExportMetrics: `run` with OTEL_EXPORTER_OTLP_ENDPOINT set sends
// metrics as it journals; killed with -9 after its calls, the journal
// shipped by `ship` completes them: each call counted once in the newest
// points, and no point contradicts another of the same series and time.
// A fresh ship of the whole journal ends at the same newest points.
func TestLiveExportMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mcpledger processes")
	}
	rcv := newMetricsReceiver(t)
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	jp := filepath.Join(dir, "journal.db")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL) // run's child process inherits it
	holder := startRun(t, jp, cfg, dir)
	echoCalls(t, jp, 0, 3)
	op := func() string {
		for _, l := range rcv.latest() {
			if strings.HasPrefix(l, "mcp.client.operation.duration{") {
				return l
			}
		}
		return ""
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(op(), " count=3 "); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run's live export: no operation duration of 3 calls; newest points:\n%s", strings.Join(rcv.latest(), "\n"))
		}
	}
	if l := op(); !strings.Contains(l, "gen_ai.tool.name=echo") || !strings.Contains(l, "mcp.protocol.version=") ||
		!strings.Contains(l, "network.transport=pipe") || !strings.Contains(l, "mcpledger.server=good") {
		t.Errorf("operation duration: %s", l)
	}
	_ = holder.Process.Kill()
	_ = holder.Wait()

	if r := runCLI(t, "ship", "--journal", jp, "--otlp-endpoint", rcv.URL); r.err != nil {
		t.Fatalf("ship after the kill: %v\n%s", r.err, r.stderr)
	}
	rcv.mu.Lock()
	clash := slices.Clone(rcv.clash)
	rcv.mu.Unlock()
	if len(clash) > 0 {
		t.Errorf("points of the same series and time with other values:\n%s", strings.Join(clash, "\n"))
	}
	if l := op(); !strings.Contains(l, " count=3 ") {
		t.Errorf("after the kill and ship, the newest operation duration is %s; want 3 calls", l)
	}
	final := rcv.latest()

	fresh := newMetricsReceiver(t)
	if r := runCLI(t, "ship", "--journal", jp, "--otlp-endpoint", fresh.URL, "--cursor", filepath.Join(dir, "fresh.cursor")); r.err != nil {
		t.Fatalf("ship from the start: %v\n%s", r.err, r.stderr)
	}
	if got := fresh.latest(); !slices.Equal(got, final) {
		t.Errorf("a ship of the whole journal ends at other points:\n%s\nthe live export and ship after the kill:\n%s",
			strings.Join(got, "\n"), strings.Join(final, "\n"))
	}
}
