package otlp_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/export/otlp"
)

// renderPoints writes metric points as text, one point a line, for
// golden files a reviewer can read.
func renderPoints(ms []metricdata.Metrics) string {
	var b strings.Builder
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	for _, m := range ms {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			fmt.Fprintf(&b, "histogram %s (%s) %s\n", m.Name, m.Unit, d.Temporality)
			for _, p := range d.DataPoints {
				mn, _ := p.Min.Value()
				mx, _ := p.Max.Value()
				fmt.Fprintf(&b, "  {%s} %s..%s count=%d sum=%g min=%g max=%g buckets=%v\n", p.Attributes.Encoded(attribute.DefaultEncoder()), ts(p.StartTime), ts(p.Time),
					p.Count, p.Sum, mn, mx, p.BucketCounts)
			}
		case metricdata.Sum[int64]:
			fmt.Fprintf(&b, "sum %s (%s) %s monotonic=%t\n", m.Name, m.Unit, d.Temporality, d.IsMonotonic)
			for _, p := range d.DataPoints {
				fmt.Fprintf(&b, "  {%s} %s..%s %d\n", p.Attributes.Encoded(attribute.DefaultEncoder()), ts(p.StartTime), ts(p.Time), p.Value)
			}
		case metricdata.Gauge[int64]:
			fmt.Fprintf(&b, "gauge %s (%s)\n", m.Name, m.Unit)
			for _, p := range d.DataPoints {
				fmt.Fprintf(&b, "  {%s} %s %d\n", p.Attributes.Encoded(attribute.DefaultEncoder()), ts(p.Time), p.Value)
			}
		default:
			fmt.Fprintf(&b, "unknown %s %T\n", m.Name, m.Data)
		}
	}
	return b.String()
}

func foldAll(evs []events.Event) *otlp.Metrics {
	m := otlp.NewMetrics()
	for _, e := range evs {
		m.Fold(e)
	}
	return m
}

// TestMetricsGolden folds the repository's recorded journals and compares
// every point with a golden file; a second fold of the same journal
// gives the same text (the series' order does not follow map order).
func TestMetricsGolden(t *testing.T) {
	for _, name := range []string{"approvals", "crash-loop", "not-found", "sign-in", "reload", "tool-pinning"} {
		t.Run(name, func(t *testing.T) {
			evs := readJSONL(t, filepath.Join("..", "..", "testdata", "journals", name+".jsonl"))
			got := renderPoints(foldAll(evs).Points())
			for range 5 {
				if again := renderPoints(foldAll(evs).Points()); again != got {
					t.Fatalf("two folds of the same journal differ:\n%s\nand\n%s", got, again)
				}
			}
			golden(t, "metrics-"+name, got)
		})
	}
}

// sessionsEvents is callEvents (a denied call, a lost call retried, a
// server that fails, a session stopped with fs launching), then a session
// killed with gh ready and a call in flight, then a session that starts
// after it, calls and stops cleanly.
func sessionsEvents() []events.Event {
	out := callEvents()
	t0 := time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC)
	add := func(sid uuid.UUID, ms int, server string, p events.Payload) {
		e := events.New(t0.Add(time.Duration(ms)*time.Millisecond), server, p)
		e.Session, e.Seq, e.GPos = sid, uint64(len(out)+1), uint64(len(out)+1)
		e.ID = uuid.MustParse(fmt.Sprintf("01a20252-0000-7000-8000-%012d", 100+len(out)))
		out = append(out, e)
	}
	killed := uuid.MustParse("01a20252-0000-7000-8000-000000000002")
	add(killed, 0, "", &events.SessionStarted{Seed: 2})
	add(killed, 1, "gh", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Trigger: "config", Attempt: 1})
	add(killed, 2, "gh", &events.ProcessSpawned{Attempt: 1, PID: 42})
	add(killed, 5, "gh", &events.HandshakeCompleted{Attempt: 1, ProtocolVersion: "2025-11-25"})
	add(killed, 6, "gh", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateReady, Trigger: "handshake", Attempt: 1})
	add(killed, 10, "gh", &events.CallStarted{CallID: "k1", Tool: "read", Attempt: 1})
	add(killed, 1500, "gh", &events.CallDecided{CallID: "k2", Tool: "write", Decision: events.CallAllow, By: "user:cli", Policy: "ask"})
	next := uuid.MustParse("01a20252-0000-7000-8000-000000000003")
	add(next, 60_000, "", &events.SessionStarted{Seed: 3})
	add(next, 60_001, "gh", &events.ServerTransitioned{From: events.StateConfiguring, To: events.StateLaunching, Trigger: "config", Attempt: 1})
	add(next, 60_002, "gh", &events.TransportOpened{Attempt: 1, Transport: events.TransportHTTP})
	add(next, 60_005, "gh", &events.HandshakeCompleted{Attempt: 1, ProtocolVersion: "2026-07-28"})
	add(next, 60_006, "gh", &events.ServerTransitioned{From: events.StateHandshaking, To: events.StateReady, Trigger: "handshake", Attempt: 1})
	add(next, 60_010, "gh", &events.CallStarted{CallID: "n1", Tool: "read", Attempt: 1})
	// No duration_ns: the events' times give it.
	add(next, 60_030, "gh", &events.CallFinished{CallID: "n1", Outcome: events.OutcomeToolError, Error: "no such file"})
	add(next, 60_040, "", &events.ApprovalDecided{Decision: events.DecisionReject, By: "user:cli"})
	add(next, 70_006, "gh", &events.ServerTransitioned{From: events.StateReady, To: events.StateStopped, Trigger: "stop", Reason: events.ReasonShutdown, Attempt: 1})
	add(next, 70_010, "", &events.SessionStopped{Reason: events.ReasonShutdown})
	return out
}

// TestMetricsSessions: operation durations by tool, outcome and the
// server's protocol and transport; MCP sessions ended by a failure, by a
// reconnect, by a kill (interrupted, at the killed session's last event)
// and by a stop; reconnects; decisions; the servers gauge, which forgets
// a killed session's servers. Against a golden file, at three points of
// the journal.
func TestMetricsSessions(t *testing.T) {
	evs := sessionsEvents()
	var b strings.Builder
	for _, cut := range []int{len(callEvents()), len(callEvents()) + 7, len(evs) - 2, len(evs)} {
		fmt.Fprintf(&b, "after gpos %d\n%s", cut, renderPoints(foldAll(evs[:cut]).Points()))
	}
	golden(t, "metrics-sessions", b.String())
}

// TestMetricsBuckets: a duration on a bucket's bound counts in that
// bucket, a nanosecond more in the next, past the last bound in the
// overflow bucket; sum, min and max are exact.
func TestMetricsBuckets(t *testing.T) {
	sid := uuid.MustParse("01a20252-0000-7000-8000-000000000009")
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	var evs []events.Event
	add := func(p events.Payload) {
		e := events.New(t0, "s", p)
		e.Session, e.GPos = sid, uint64(len(evs)+1)
		evs = append(evs, e)
	}
	add(&events.SessionStarted{})
	durs := []int64{10e6, 10e6 + 1, 300e9, 300e9 + 1, 0}
	for i, d := range durs {
		id := fmt.Sprint("c", i)
		add(&events.CallStarted{CallID: id, Tool: "t"})
		add(&events.CallFinished{CallID: id, Outcome: events.OutcomeOK, DurationNs: d})
	}
	ms := foldAll(evs).Points()
	if len(ms) != 1 || ms[0].Name != otlp.MetricOperationDuration {
		t.Fatalf("points: %s", renderPoints(ms))
	}
	h := ms[0].Data.(metricdata.Histogram[float64])
	if len(h.DataPoints) != 1 {
		t.Fatalf("points: %s", renderPoints(ms))
	}
	p := h.DataPoints[0]
	want := make([]uint64, 15)
	want[0], want[1], want[13], want[14] = 2, 1, 1, 1 // 0 and 10 ms; 10 ms + 1 ns; 300 s; 300 s + 1 ns
	if fmt.Sprint(p.BucketCounts) != fmt.Sprint(want) || p.Count != 5 || len(p.Bounds) != 14 {
		t.Errorf("buckets %v count %d bounds %v; want %v, 5", p.BucketCounts, p.Count, p.Bounds, want)
	}
	mn, _ := p.Min.Value()
	mx, _ := p.Max.Value()
	if sum := float64(10e6+10e6+1+300e9+300e9+1) / 1e9; p.Sum != sum || mn != 0 || mx != 300.000000001 {
		t.Errorf("sum %v min %v max %v; want %v, 0, 300.000000001", p.Sum, mn, mx, sum)
	}
	// Eleven events of the same time: the last one's point 10 ns later.
	if !p.StartTime.Equal(t0) || !p.Time.Equal(t0.Add(10)) {
		t.Errorf("start %v time %v; want %v, 10 ns later", p.StartTime, p.Time, t0)
	}
}

// TestMetricsNone: no point before an event, and none of a series that
// nothing fed.
func TestMetricsNone(t *testing.T) {
	m := otlp.NewMetrics()
	if p := m.Points(); p != nil || m.GPos() != 0 {
		t.Errorf("an empty fold has points %s, gpos %d", renderPoints(p), m.GPos())
	}
	evs := callEvents()[:1]
	m.Fold(evs[0])
	if p := m.Points(); len(p) != 0 || m.GPos() != 1 {
		t.Errorf("a fold of session.started has points %s, gpos %d", renderPoints(p), m.GPos())
	}
}

// TestMetricsTimesIncrease: events of the same time (a decision journaled
// with its input's time) give points of distinct, increasing times, so
// points that differ never share a time, whatever the batches.
func TestMetricsTimesIncrease(t *testing.T) {
	evs := callEvents()
	for i := range evs {
		evs[i].Time = evs[0].Time
	}
	m := otlp.NewMetrics()
	var last time.Time
	for i, e := range evs {
		m.Fold(e)
		ps := m.Points()
		if len(ps) == 0 {
			continue
		}
		var at time.Time
		switch d := ps[0].Data.(type) {
		case metricdata.Histogram[float64]:
			at = d.DataPoints[0].Time
		case metricdata.Gauge[int64]:
			at = d.DataPoints[0].Time
		}
		if want := time.Unix(0, evs[0].Time+int64(i)); !at.Equal(want) || !at.After(last) {
			t.Errorf("point after gpos %d at %v, the one before at %v; want %v", e.GPos, at, last, want)
		}
		last = at
	}
}

// TestMetricsSessionEndForgetsOnlyItsOwn: a session's end forgets its own
// unfinished calls, not another session's: a call of a session still
// going when another stops is counted when it finishes.
func TestMetricsSessionEndForgetsOnlyItsOwn(t *testing.T) {
	a, b := uuid.MustParse("01a20252-0000-7000-8000-00000000000a"), uuid.MustParse("01a20252-0000-7000-8000-00000000000b")
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	var evs []events.Event
	add := func(sid uuid.UUID, p events.Payload) {
		e := events.New(t0.Add(time.Duration(len(evs))*time.Millisecond), "s", p)
		e.Session, e.GPos = sid, uint64(len(evs)+1)
		evs = append(evs, e)
	}
	add(a, &events.SessionStarted{})
	add(a, &events.CallStarted{CallID: "x", Tool: "ta"})
	add(b, &events.CallStarted{CallID: "x", Tool: "tb"})
	add(a, &events.SessionStopped{})
	add(a, &events.CallFinished{CallID: "x", Outcome: events.OutcomeOK, DurationNs: 1})
	add(b, &events.CallFinished{CallID: "x", Outcome: events.OutcomeOK, DurationNs: 1})
	got := renderPoints(foldAll(evs).Points())
	if !strings.Contains(got, "gen_ai.tool.name=tb") || strings.Contains(got, "gen_ai.tool.name=ta") || strings.Count(got, "count=1 ") != 1 {
		t.Errorf("want b's call counted once and a's forgotten with its session:\n%s", got)
	}
}
