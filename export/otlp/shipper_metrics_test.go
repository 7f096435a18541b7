package otlp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/export/otlp"
)

// metrics decodes a metrics request and keeps its points, noting a point
// received again for the same series and time with another value.
func (r *receiver) metrics(w http.ResponseWriter, body []byte) {
	var m colmetrics.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &m); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	keep := func(name string, attrs []*commonpb.KeyValue, t uint64, v string) {
		var kv []string
		for _, a := range attrs {
			kv = append(kv, a.Key+"="+a.Value.GetStringValue())
		}
		slices.Sort(kv)
		series := name + "{" + strings.Join(kv, ",") + "}"
		if r.points[series] == nil {
			r.points[series] = map[uint64]string{}
		}
		if old, ok := r.points[series][t]; ok {
			if old != v {
				r.conflicts = append(r.conflicts, fmt.Sprintf("%s at %d: %s, then %s", series, t, old, v))
			}
			r.resent++
		}
		r.points[series][t] = v
	}
	for _, rm := range m.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, mt := range sm.Metrics {
				switch d := mt.Data.(type) {
				case *metricspb.Metric_Histogram:
					if d.Histogram.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
						http.Error(w, "not cumulative", 400)
						return
					}
					for _, p := range d.Histogram.DataPoints {
						keep(mt.Name, p.Attributes, p.TimeUnixNano, fmt.Sprintf("start=%d count=%d sum=%g min=%g max=%g buckets=%v",
							p.StartTimeUnixNano, p.Count, p.GetSum(), p.GetMin(), p.GetMax(), p.BucketCounts))
					}
				case *metricspb.Metric_Sum:
					if d.Sum.AggregationTemporality != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE || !d.Sum.IsMonotonic {
						http.Error(w, "not a cumulative counter", 400)
						return
					}
					for _, p := range d.Sum.DataPoints {
						keep(mt.Name, p.Attributes, p.TimeUnixNano, fmt.Sprintf("start=%d %d", p.StartTimeUnixNano, p.GetAsInt()))
					}
				case *metricspb.Metric_Gauge:
					for _, p := range d.Gauge.DataPoints {
						keep(mt.Name, p.Attributes, p.TimeUnixNano, fmt.Sprint(p.GetAsInt()))
					}
				}
			}
		}
	}
	b, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// latest is, per series, the value of the newest point received, as
// text: what a backend that keeps the latest cumulative point shows.
func (r *receiver) latest() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lines []string
	for series, byTime := range r.points {
		t := slices.Max(slices.Collect(maps.Keys(byTime)))
		lines = append(lines, fmt.Sprintf("%s @%d %s", series, t, byTime[t]))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// pointsText is ms as latest writes it.
func pointsText(ms []metricdata.Metrics) string {
	var lines []string
	line := func(name string, set attribute.Set, t int64, v string) {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.AsString())
		}
		lines = append(lines, fmt.Sprintf("%s{%s} @%d %s", name, strings.Join(kv, ","), t, v))
	}
	for _, m := range ms {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				mn, _ := p.Min.Value()
				mx, _ := p.Max.Value()
				line(m.Name, p.Attributes, p.Time.UnixNano(), fmt.Sprintf("start=%d count=%d sum=%g min=%g max=%g buckets=%v",
					p.StartTime.UnixNano(), p.Count, p.Sum, mn, mx, p.BucketCounts))
			}
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				line(m.Name, p.Attributes, p.Time.UnixNano(), fmt.Sprintf("start=%d %d", p.StartTime.UnixNano(), p.Value))
			}
		case metricdata.Gauge[int64]:
			for _, p := range d.DataPoints {
				line(m.Name, p.Attributes, p.Time.UnixNano(), fmt.Sprint(p.Value))
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// crashingCursor is the journal's cursor in a process that dies after
// its receiver acknowledged a batch but before the cursor was saved: its
// save number failAt fails, and every save after it.
type crashingCursor struct {
	journalCursor
	saves, failAt int
}

var errCrash = errors.New("killed before saving the cursor")

func (c *crashingCursor) Save(ctx context.Context, p otlp.Position) error {
	c.saves++
	if c.saves >= c.failAt {
		return errCrash
	}
	return c.journalCursor.Save(ctx, p)
}

// readsFrom is a Source that notes where each read begins.
type readsFrom struct {
	otlp.Source
	mu    sync.Mutex
	froms []uint64
}

func (r *readsFrom) ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error {
	r.mu.Lock()
	r.froms = append(r.froms, from)
	r.mu.Unlock()
	return r.Source.ReadAll(ctx, from, fn)
}

// TestShipMetricsExactAfterCrash: a shipper killed after the receiver
// took a batch but before its cursor was saved; the next process sends
// that batch again, with the same cumulative points (same series, time,
// start and values: nothing counted twice), and the newest point of
// every series is the fold of the whole journal. A Shipper that ships
// again keeps its fold and reads from the cursor, not the journal's
// start, and its points continue the same series.
func TestShipMetricsExactAfterCrash(t *testing.T) {
	evs := sessionsEvents()
	j := journalOf(t, evs[:20])
	rcv := newReceiver(t)
	x := exporter(t, rcv.URL)

	_, err := otlp.NewShipper(j, &crashingCursor{journalCursor: journalCursor{j}, failAt: 3}, x, fastOptions(io.Discard)).Ship(t.Context(), false)
	if !errors.Is(err, errCrash) {
		t.Fatalf("the crashing Ship returned %v", err)
	}
	cur, err := j.Cursor(t.Context(), "otlp")
	if err != nil || cur.GPos != 8 {
		t.Fatalf("cursor after the crash: %+v, %v; want gpos 8 (two batches of 4)", cur, err)
	}

	src := &readsFrom{Source: j}
	sh := otlp.NewShipper(src, journalCursor{j}, x, fastOptions(io.Discard))
	if _, err := sh.Ship(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if rcv.resent == 0 {
		t.Fatal("nothing was sent again after the crash: the test did not test a resend")
	}
	appendTo(t, j, evs[20:])
	st, err := sh.Ship(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rcv.conflicts) > 0 {
		t.Errorf("points sent again with other values:\n%s", strings.Join(rcv.conflicts, "\n"))
	}
	if got, want := rcv.latest(), pointsText(foldAll(evs).Points()); got != want {
		t.Errorf("the newest points are not the fold of the journal:\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(rcv.latest(), "mcp.client.operation.duration{error.type=tool_error,") ||
		strings.Count(rcv.latest(), "mcp.client.operation.duration{") != 3 || !strings.Contains(rcv.latest(), "count=1 ") ||
		strings.Contains(rcv.latest(), "count=2 ") {
		t.Errorf("want three calls, each counted once:\n%s", rcv.latest())
	}
	src.mu.Lock()
	froms := slices.Clone(src.froms)
	src.mu.Unlock()
	if len(froms) != 2 || froms[0] != 1 || froms[1] <= 1 {
		t.Errorf("reads began at %v: want the journal's start (a fold to rebuild), then the cursor's From (the fold kept)", froms)
	}
	if st.Points == 0 {
		t.Errorf("stats %+v: no metric point counted", st)
	}
}

// TestShipNoMetrics: with NoMetrics, no metrics request, and the read
// begins at the cursor.
func TestShipNoMetrics(t *testing.T) {
	j := journalOf(t, callEvents())
	rcv := newReceiver(t)
	o := fastOptions(io.Discard)
	o.NoMetrics = true
	st, err := otlp.NewShipper(j, journalCursor{j}, exporter(t, rcv.URL), o).Ship(t.Context(), false)
	if err != nil || st.Points != 0 || len(rcv.points) != 0 {
		t.Errorf("Ship = %+v, %v; %d series received; want no metrics", st, err, len(rcv.points))
	}
	if spans, lg := rcv.counts(); spans != 5 || lg != len(callEvents()) {
		t.Errorf("%d spans, %d logs", spans, lg)
	}
}

// cancelAfter is a Source that ends ctx once n events were read, after
// a pause in which the Ship takes what was read.
type cancelAfter struct {
	readsFrom
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) ReadAll(ctx context.Context, from uint64, fn func(events.Event) error) error {
	return c.readsFrom.ReadAll(ctx, from, func(e events.Event) error {
		if c.n--; c.n == 0 {
			time.Sleep(50 * time.Millisecond)
			c.cancel()
		}
		return fn(e)
	})
}

// TestShipMetricsRebuildResumed: a Ship that ends while it rebuilds the
// fold (run stopped soon after it started) leaves the fold where it got
// to; the next Ship of the Shipper goes on from there, not from the
// journal's start (or from the cursor's From, when the spans need the
// events before), folding no event twice: its points are the fold of
// the whole journal.
func TestShipMetricsRebuildResumed(t *testing.T) {
	for _, from := range []uint64{15, 1} {
		t.Run(fmt.Sprint("from=", from), func(t *testing.T) {
			evs := sessionsEvents()
			j := journalOf(t, evs)
			// Shipped before, up to gpos 20: the fold must be rebuilt to there.
			if err := (journalCursor{j}).Save(t.Context(), otlp.Position{GPos: 20, From: from}); err != nil {
				t.Fatal(err)
			}
			rcv := newReceiver(t)
			ctx, cancel := context.WithCancel(t.Context())
			src := &cancelAfter{readsFrom: readsFrom{Source: j}, n: 6, cancel: cancel}
			o := fastOptions(io.Discard)
			o.Batch = 1024
			sh := otlp.NewShipper(src, journalCursor{j}, exporter(t, rcv.URL), o)
			if _, err := sh.Ship(ctx, false); err != nil {
				t.Fatal(err)
			}
			if len(rcv.points) != 0 {
				t.Fatalf("a Ship ended while rebuilding sent points: %v", rcv.points)
			}
			src.n = -1
			if _, err := sh.Ship(t.Context(), false); err != nil {
				t.Fatal(err)
			}
			want := from // the spans need the events from From
			if from > 6 {
				want = 6 // the fold took 5 or 6 events before the end
			}
			if len(src.froms) != 2 || src.froms[0] != 1 || src.froms[1] < min(want, 6) || src.froms[1] > want+1 {
				t.Errorf("reads began at %v: want 1, then %d or %d", src.froms, want, want+1)
			}
			if got, want := rcv.latest(), pointsText(foldAll(evs).Points()); got != want {
				t.Errorf("the points after a resumed rebuild are not the fold of the journal:\n%s\nwant\n%s", got, want)
			}
		})
	}
}
