package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ErrConfig is the error of an exporter setting that cannot work: a
// protocol other than grpc and http/protobuf, an endpoint that is not a
// URL, an OTEL_* variable that does not parse.
var ErrConfig = errors.New("otlp: invalid exporter setting")

// scopeName is the instrumentation scope of everything exported.
const scopeName = "github.com/mcpledger/mcpledger/export/otlp"

// ExporterOptions configure [NewExporter]. The standard OTEL_* variables
// (protocol, endpoint, headers, insecure, certificates, compression,
// timeout, service name, resource attributes) apply as the OpenTelemetry
// SDK reads them; a field set here wins.
type ExporterOptions struct {
	// Protocol is the protocol of all three signals. "": each signal's
	// OTEL_EXPORTER_OTLP_{TRACES,LOGS,METRICS}_PROTOCOL, else
	// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf (the
	// specification's default). http/json is refused: the Go SDK has no
	// exporter for it.
	Protocol Protocol
	// Endpoint is the collector's base URL. Over OTLP/HTTP
	// (http://host:4318) traces go to its /v1/traces, logs to its
	// /v1/logs, metrics to its /v1/metrics; over gRPC (http://host:4317)
	// all three go to its host and port, in plain text for http:// and
	// over TLS for https://. "": OTEL_EXPORTER_OTLP_ENDPOINT (and the
	// per-signal ones), else the SDK's default, http://localhost:4318 or
	// localhost:4317.
	Endpoint string
	// Timeout bounds one export request. Zero: OTEL_EXPORTER_OTLP_TIMEOUT,
	// else the SDK's 10 s.
	Timeout time.Duration
	// NoLogs sends no log records (OTEL_LOGS_EXPORTER=none): for a
	// receiver without a logs pipeline, such as Jaeger's default
	// configuration, which answers 404 on /v1/logs. The journal keeps
	// every event; a later ship with logs on sends them.
	NoLogs bool
}

// SDKExporter sends mapped spans, logs and metric points with the
// OpenTelemetry SDK's OTLP exporters, over HTTP (protobuf) or gRPC,
// each signal by its protocol, synchronously:
// [SDKExporter.Export] returns nil only once the receiver has
// acknowledged all three. The SDK's own retries are off: the [Shipper]
// retries, from the journal.
type SDKExporter struct {
	spans   sdktrace.SpanExporter
	logs    sdklog.Exporter
	metrics metricExporter
	proto   protocols
	res     *resource.Resource
	tp      *sdktrace.TracerProvider
	tracer  trace.Tracer
	sc      *spanCollector
	lp      *sdklog.LoggerProvider
	logger  otellog.Logger
	lc      *logCollector
}

// NewExporter checks the exporter settings and returns an exporter. It
// fails with [ErrConfig] for a setting that cannot work; it does not
// reach the endpoint.
func NewExporter(ctx context.Context, o ExporterOptions) (*SDKExporter, error) {
	if err := checkEnv(o); err != nil {
		return nil, err
	}
	p, err := resolveProtocols(o.Protocol, os.Getenv)
	if err != nil {
		return nil, err
	}
	env, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %w (give key=value pairs, comma-separated, values URL-encoded)", ErrConfig, err)
	}
	// service.name is mcpledger unless the environment names another.
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", "mcpledger")), env)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	se, err := newTraceExporter(ctx, p.traces, o.Endpoint, o.Timeout)
	if err != nil {
		return nil, fmt.Errorf("%w: traces exporter: %w", ErrConfig, err)
	}
	var le sdklog.Exporter
	if !o.NoLogs {
		if le, err = newLogExporter(ctx, p.logs, o.Endpoint, o.Timeout); err != nil {
			_ = se.Shutdown(ctx)
			return nil, fmt.Errorf("%w: logs exporter: %w", ErrConfig, err)
		}
	}
	me, err := newMetricExporter(ctx, p.metrics, o.Endpoint, o.Timeout)
	if err != nil {
		_ = se.Shutdown(ctx)
		if le != nil {
			_ = le.Shutdown(ctx)
		}
		return nil, fmt.Errorf("%w: metrics exporter: %w", ErrConfig, err)
	}
	x := &SDKExporter{spans: se, logs: le, metrics: me, proto: p, res: res, sc: &spanCollector{}, lc: &logCollector{}}
	// No limits: the journal bounds what a span carries, and the SDK's
	// defaults (128 events) would drop the transitions of a flapping
	// server's connection span without a word.
	unlimited := sdktrace.SpanLimits{AttributeValueLengthLimit: -1, AttributeCountLimit: -1, EventCountLimit: -1,
		LinkCountLimit: -1, AttributePerEventCountLimit: -1, AttributePerLinkCountLimit: -1}
	x.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(givenIDs{}), sdktrace.WithSpanProcessor(x.sc), sdktrace.WithRawSpanLimits(unlimited))
	x.tracer = x.tp.Tracer(scopeName)
	x.lp = sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(x.lc))
	x.logger = x.lp.Logger(scopeName)
	return x, nil
}

// Export sends spans, then logs, then metrics, and returns nil only after
// the receiver acknowledged all three. It is not safe for concurrent use
// (a Shipper calls it from one goroutine).
func (x *SDKExporter) Export(ctx context.Context, spans []Span, logs []Log, metrics []metricdata.Metrics) error {
	if len(spans) > 0 {
		if err := x.spans.ExportSpans(ctx, x.sdkSpans(spans)); err != nil {
			return fmt.Errorf("traces: %w%s", err, hint(err, x.proto.traces, "traces", ""))
		}
	}
	if len(logs) > 0 && x.logs != nil {
		if err := x.logs.Export(ctx, x.sdkLogs(logs)); err != nil {
			return fmt.Errorf("logs: %w%s", err, hint(err, x.proto.logs, "logs", "OTEL_LOGS_EXPORTER"))
		}
	}
	if len(metrics) > 0 {
		rm := &metricdata.ResourceMetrics{Resource: x.res, ScopeMetrics: []metricdata.ScopeMetrics{
			{Scope: instrumentation.Scope{Name: scopeName}, Metrics: metrics}}}
		if err := x.metrics.Export(ctx, rm); err != nil {
			return fmt.Errorf("metrics: %w%s", err, hint(err, x.proto.metrics, "metrics", "OTEL_METRICS_EXPORTER"))
		}
	}
	return nil
}

// hint says what to try after a failed export of signal over p: the
// endpoint answers the other protocol (wrongProtocol), the request is
// larger than the receiver takes (tooLarge), or it takes no signal
// (noPipeline, when the signal can be turned off with variable); ""
// otherwise.
func hint(err error, p Protocol, signal, variable string) string {
	if h := wrongProtocol(err, p) + tooLarge(err, p); h != "" {
		return h
	}
	if variable == "" {
		return ""
	}
	return noPipeline(err, p, signal, variable)
}

// noPipeline says what to do when the receiver has no pipeline for a
// signal: over HTTP it answers 404, over gRPC Unimplemented for the
// signal's service (the SDK's errors say so only in their text): ""
// otherwise.
func noPipeline(err error, p Protocol, signal, variable string) string {
	msg := err.Error()
	if p == GRPC && !(strings.Contains(msg, "code = Unimplemented") && strings.Contains(msg, "unknown service")) ||
		p != GRPC && !strings.Contains(msg, " 404 Not Found") {
		return ""
	}
	return fmt.Sprintf(" (the collector takes no %s: give it a %s pipeline, or set %s=none to send none; the journal keeps every event)", signal, signal, variable)
}

// Shutdown ends the exporters.
func (x *SDKExporter) Shutdown(ctx context.Context) error {
	var le error
	if x.logs != nil {
		le = x.logs.Shutdown(ctx)
	}
	return errors.Join(x.spans.Shutdown(ctx), le, x.metrics.Shutdown(ctx), x.tp.Shutdown(ctx), x.lp.Shutdown(ctx))
}

// sdkSpans builds the SDK's spans of spans: each is started and ended on
// the tracer with its own times and IDs (givenIDs), and collected.
func (x *SDKExporter) sdkSpans(spans []Span) []sdktrace.ReadOnlySpan {
	x.sc.spans = x.sc.spans[:0]
	for i := range spans {
		s := &spans[i]
		opts := []trace.SpanStartOption{trace.WithTimestamp(time.Unix(0, s.Start)), trace.WithSpanKind(s.Kind),
			trace.WithAttributes(s.Attrs...)}
		ctx := context.WithValue(context.Background(), idsKey{}, s)
		if s.Parent.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, s.Parent) // its trace ID is s.TraceID
		} else {
			opts = append(opts, trace.WithNewRoot())
		}
		for _, l := range s.Links {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: l}))
		}
		_, span := x.tracer.Start(ctx, s.Name, opts...)
		for _, ev := range s.Events {
			span.AddEvent(ev.Name, trace.WithTimestamp(time.Unix(0, ev.Time)), trace.WithAttributes(ev.Attrs...))
		}
		span.SetStatus(s.Status, s.StatusMsg)
		span.End(trace.WithTimestamp(time.Unix(0, s.End)))
	}
	return x.sc.spans
}

// sdkLogs builds the SDK's log records of logs, through the logger.
func (x *SDKExporter) sdkLogs(logs []Log) []sdklog.Record {
	x.lc.records = x.lc.records[:0]
	for i := range logs {
		l := &logs[i]
		var r otellog.Record
		t := time.Unix(0, l.Time)
		r.SetTimestamp(t)
		r.SetObservedTimestamp(t)
		r.SetEventName(l.EventName)
		r.SetSeverity(l.Severity)
		r.SetSeverityText(l.Severity.String())
		r.SetBody(attribute.StringValue(l.Body))
		r.AddAttributes(l.Attrs...)
		ctx := context.Background()
		if l.TraceID.IsValid() {
			ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: l.TraceID, SpanID: l.SpanID, TraceFlags: trace.FlagsSampled}))
		}
		x.logger.Emit(ctx, r)
	}
	return x.lc.records
}

// idsKey carries the Span being built to givenIDs.
type idsKey struct{}

// givenIDs gives a span the IDs its Span carries: NewIDs for a root,
// NewSpanID for a child of a caller's span (the trace ID is the parent's,
// which the Mapper gave the Span too).
type givenIDs struct{}

func (givenIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	s := ctx.Value(idsKey{}).(*Span)
	return s.TraceID, s.SpanID
}

func (givenIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	return ctx.Value(idsKey{}).(*Span).SpanID
}

// spanCollector keeps the spans the tracer ends, for Export to send.
type spanCollector struct{ spans []sdktrace.ReadOnlySpan }

func (c *spanCollector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *spanCollector) OnEnd(s sdktrace.ReadOnlySpan)                   { c.spans = append(c.spans, s) }
func (c *spanCollector) Shutdown(context.Context) error                  { return nil }
func (c *spanCollector) ForceFlush(context.Context) error                { return nil }

// logCollector keeps the records the logger emits, for Export to send.
type logCollector struct{ records []sdklog.Record }

func (c *logCollector) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.records = append(c.records, r.Clone())
	return nil
}
func (c *logCollector) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *logCollector) Shutdown(context.Context) error                         { return nil }
func (c *logCollector) ForceFlush(context.Context) error                       { return nil }

// checkEnv refuses the settings the SDK would ignore or misread with a
// line on stderr: mcpledger says what is wrong once, before it starts.
func checkEnv(o ExporterOptions) error {
	endpoints := map[string]string{"--otlp-endpoint": o.Endpoint}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		endpoints[k] = os.Getenv(k)
	}
	for k, v := range endpoints {
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: %s=%q is not an http(s) URL: give the collector's address as a URL, like http://localhost:4318 (OTLP/HTTP) or http://localhost:4317 (gRPC)", ErrConfig, k, v)
		}
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"} {
		if v := os.Getenv(k); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n <= 0 {
				return fmt.Errorf("%w: %s=%q: give a timeout in milliseconds, like 10000", ErrConfig, k, v)
			}
		}
	}
	return nil
}
